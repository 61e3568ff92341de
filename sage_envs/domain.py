"""The domain plug-in interface of the chain env.

A domain (ALFWorld, ScienceWorld, TextWorld, ...) supplies tasks grouped into chains and a way to play one task.
The chain env (:mod:`sage_envs.chain`) owns everything else: the skill library, the action language, rewards,
termination and the ``info`` keys. Adding a domain means writing one :class:`Domain` subclass and one
:class:`TaskGame` subclass and registering an env id in :mod:`sage_envs.registration`; the chain env is not touched.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

SPLITS = ("train", "valid_seen", "valid_unseen")


@dataclass(frozen=True)
class TaskSpec:
    """A task a domain can load, identified independently of any engine state."""

    task_id: str
    """Unique id within the split (for official ALFWorld: the game folder relative to the split)."""
    task_type: str
    """The task family, e.g. ``pick_heat_then_place_in_recep``; used for per-type metrics."""
    scenario: str
    """The grouping key for chains: tasks of one chain share a scenario (an ALFWorld household)."""
    extra: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    """Domain-specific fields (e.g. the path of a game file); never read by the chain env."""


@dataclass(frozen=True)
class StepResult:
    """What the engine returns for one primitive command."""

    observation: str
    """The engine's feedback text for the command."""
    won: bool
    """Whether the task's goal is satisfied after this command."""


class TaskGame(abc.ABC):
    """One running task of a domain: a thin handle over the engine."""

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """The task sentence shown to the agent, e.g. ``heat some egg and put it in garbagecan``."""

    @abc.abstractmethod
    def reset(self) -> str:
        """Start (or restart) the task and return the engine's opening text."""

    @abc.abstractmethod
    def step(self, command: str) -> StepResult:
        """Apply one primitive command; an unknown command is the engine's business (e.g. "Nothing happens.")."""

    @abc.abstractmethod
    def admissible_commands(self) -> list[str]:
        """The commands the engine accepts in the current state, in the engine's order."""

    def entities(self) -> Mapping[str, Sequence[str]]:
        """Named collections of domain entities a skill program may iterate over (``for r in receptacles:``).

        The default is no collections; a domain overrides this with what its agent can observe.
        """
        return {}

    def expert_plan(self) -> list[str]:
        """The expert's next commands from the current state (first item = what to do now); [] if none."""
        return []

    def close(self) -> None:  # noqa: B027  (optional hook: most games hold nothing to release)
        """Release engine resources."""


class Domain(abc.ABC):
    """A family of tasks, split into train / valid_seen / valid_unseen, grouped into chains."""

    name: str = "domain"
    """Short name used in env ids and result files."""

    @abc.abstractmethod
    def tasks(self, split: str) -> list[TaskSpec]:
        """All tasks of ``split`` in a fixed order."""

    @abc.abstractmethod
    def load(self, task: TaskSpec) -> TaskGame:
        """Build a playable game for ``task``."""

    def chains(self, split: str, chain_length: int) -> list[tuple[TaskSpec, ...]]:
        """Group the split's tasks into chains of ``chain_length`` tasks that share a scenario.

        Tasks of one scenario are taken in their listed order and cut into consecutive runs of ``chain_length``;
        a scenario's remainder becomes one shorter chain, so that the chains cover the split exactly (every task
        once). Deterministic: the same split gives the same chains. Domains with a better notion of "related"
        override this.
        """
        by_scenario: dict[str, list[TaskSpec]] = {}
        for task in self.tasks(split):
            by_scenario.setdefault(task.scenario, []).append(task)
        chains = []
        for scenario_tasks in by_scenario.values():
            for start in range(0, len(scenario_tasks), chain_length):
                chains.append(tuple(scenario_tasks[start : start + chain_length]))
        return chains

    def close(self) -> None:  # noqa: B027  (optional hook)
        """Release shared resources (caches, subprocesses)."""
