"""The domain plug-in interface of the chain env.

A domain (ALFWorld, ScienceWorld, TextWorld, ...) supplies tasks grouped into chains and a way to play one task.
The chain env (:mod:`sage_envs.chain`) owns everything else: the skill library, the action language, rewards,
termination and the ``info`` keys. Adding a domain means writing one :class:`Domain` subclass and one
:class:`TaskGame` subclass and registering an env id in :mod:`sage_envs.registration`; the chain env is not touched
(checklist: docs/domains.md).

A domain also speaks to agents, which never import a domain package: through its env id
(:func:`sage_envs.registration.domain_class`) or a made env (``env.unwrapped.domain``) an agent reaches the
domain's :meth:`Domain.expert`, its :meth:`Domain.vocabulary` (the words a tokenizer built from scratch must
know), its :meth:`Domain.skill_templates` (the expert's skill definitions: the command shapes a policy may write
skills with) and its :attr:`Domain.entity_pattern` (how an entity is named in its texts).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sage_envs.error import InvalidConfigError

SPLITS = ("train", "valid_seen", "valid_unseen")
"""The default of :attr:`Domain.splits` (ALFWorld's split names); a domain with other splits declares its own."""
ENTITY_PATTERN = r"\b([a-z]+ \d+)\b"
"""The default of :attr:`Domain.entity_pattern`: a lower-case word and a number (``countertop 1``)."""


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
    lost: bool = False
    """Whether the task can no longer be won after this command (a lost game, a failed task): it ends as failed."""
    score: float | None = None
    """The domain's score of the task after this command (ScienceWorld: 0-100); None when it has none."""
    parsed: bool | None = None
    """Whether the engine's parser read the command as one of its actions, for engines whose parser reads more
    than the admissible list names (ScienceWorld's ``examine X`` for ``look at X``); None when the engine does not
    say: the chain env then counts a command valid only when it is admissible."""

    def __post_init__(self) -> None:
        if self.won and self.lost:  # a domain bug, not an agent's: the chain env could not say how the task ended
            raise ValueError(f"a StepResult is won or lost, not both (observation {self.observation[:80]!r}).")

    @property
    def done(self) -> bool:
        """The task ended on this command (won or lost)."""
        return self.won or self.lost


@dataclass(frozen=True)
class Advice:
    """The expert's command on one turn, with what it is for (:meth:`Domain.advise`)."""

    name: str
    """A skill name for the advice (``heat_with_microwave``): lowercase words joined by ``_``."""
    command: str
    """The command to send (the expert's own)."""
    reason: str
    """Why, in the domain's words: ``the microwave can heat the egg; then heat egg 1 with microwave 1``."""


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
    """A family of tasks, split into the :attr:`splits` it declares, grouped into chains.

    Besides tasks and games, a domain offers agents what they need to play it without importing its package;
    these are class-level, so that an agent reaches them from an env id without building an env
    (:func:`sage_envs.registration.domain_class`).
    """

    name: str = "domain"
    """Short name used in env ids and result files."""
    splits: tuple[str, ...] = SPLITS
    """The split names :meth:`tasks` takes, in order (training first); the chain env accepts only these."""
    eval_split: str = SPLITS[-1]
    """The split agents are compared on by default (the demo's evaluation; ALFWorld: ``valid_unseen``, scenes never
    seen in training). A subclass that does not name one gets the last of its own :attr:`splits`."""
    scored: bool = False
    """Whether its games report a :attr:`StepResult.score`; the chain env's ``info`` then has ``task_score``."""
    entity_pattern: str = ENTITY_PATTERN
    """A regex whose first group matches one entity name in the domain's texts (skill-call arguments)."""
    task_names_entities: bool = True
    """Whether a task's words name the entities its skills act on ("put a clean apple in fridge" names the apple
    before any observation shows it): constrained decoding then offers them as skill-call arguments and types the
    arguments by them. False where the task text names none (TextWorld's one sentence for every recipe)."""
    argument_values: Mapping[str, tuple[str, ...]] = {}
    """The values a skill parameter of each name takes where they are no entity names: closed classes of words
    that fill a command's verb slot (TextWorld's ``how`` in ``{how} {food} with {knife}``: chop, slice or dice).
    Constrained decoding offers a parameter of such a name these values and nothing else."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "eval_split" not in vars(cls):  # follow the subclass's own splits, not an inherited evaluation split
            cls.eval_split = cls.splits[-1]
        if cls.eval_split not in cls.splits:  # a domain bug: fail where the class is defined, not at evaluation
            raise InvalidConfigError(
                f"{cls.__name__}.eval_split={cls.eval_split!r} is not one of its splits {cls.splits}."
            )

    @classmethod
    def expert(cls, *, use_skills: bool = True, skills: Sequence[str] | None = None, **kwargs: Any) -> Any:
        """The domain's scripted expert: an agent with ``reset()`` and ``act(observation, info) -> str``.

        Args:
            use_skills: define and call program skills (False: plain commands, as ``skills="none"`` requires).
            skills: the names of :meth:`skill_templates` it may use (None = all).
            **kwargs: the domain expert's own options (ALFWorld: ``vary_definitions``).

        Raises:
            NotImplementedError: the domain has no expert.
        """
        raise NotImplementedError(f"domain {cls.name!r} has no expert; its Domain subclass does not define expert().")

    @classmethod
    def vocabulary(cls) -> list[str]:
        """Texts that hold the domain's words (commands, messages, entity names, task sentences); [] if none.

        A tokenizer built from scratch for the domain (``sage_agents.models.build_tokenizer``) knows their words.
        """
        return []

    @classmethod
    def skill_templates(cls, **env_kwargs: Any) -> dict[str, list[str]]:
        """The expert's skill definitions in the DSL by name ({} if none).

        A constrained policy is offered them as define-and-call actions, or writes its own skills with their
        command shapes (``sage_agents.skill_grammar``); the keys are the names :meth:`expert` takes in ``skills``.
        Each name maps to one definition per form that the games made with ``env_kwargs`` (the env's
        ``gymnasium.make`` kwargs) may need: ALFWorld games of both command grammars need the put line in both.
        Kwargs that do not change the definitions are ignored.
        """
        return {}

    @classmethod
    def skill_examples(cls) -> list[str]:
        """Further definitions the domain's expert may write beyond :meth:`skill_templates` ([] if none).

        Other bodies of the same skills and whole-task skills that call them: with the templates, the vocabulary
        of a policy that writes its skills like the expert's (``sage_agents.skill_grammar``).
        """
        return []

    @classmethod
    def advise(cls, task: str, earlier: Sequence[str], command: str) -> Advice | None:
        """What the expert's ``command`` does for ``task`` after the task's ``earlier`` commands, or None.

        Guidance-conditioning SFT data (``sage_agents.sft``) writes a guidance skill naming it for that turn.
        None where the domain has no advice (the default) or the command moves no task on.
        """
        return None

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
