"""The experience reservoir: a bounded window of the most recent episodes the skill creator learns from.

An :class:`Episode` is one task attempt (one chain position of a rollout): its actions, the observation that
followed each action, whether it succeeded, its task type and description, the training step and the library
arm (``"new"`` / ``"old"`` during a version test, ``""`` otherwise). ReSkill (arXiv 2606.01619) keeps ~200.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Episode:
    """One task attempt, as the assertion engine and the skill creator see it."""

    actions: list[str]
    """Action texts, in order."""
    observations: list[str]
    """The env's observation after each action (same length as ``actions``)."""
    success: bool
    """The task was completed."""
    task_type: str = ""
    """Task type (``info["task_type"]``), e.g. ``pick_heat_then_place``."""
    task: str = ""
    """Task description (``obs["task"]``)."""
    step: int = 0
    """Training step that produced the episode."""
    arm: str = ""
    """``"new"`` or ``"old"`` when played during a version test, else ``""``."""
    version: int = 0
    """Library version id the episode ran with."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form JSON-serialisable fields."""

    def __post_init__(self) -> None:
        if len(self.actions) != len(self.observations):
            raise ValueError(
                f"an episode needs one observation per action, got {len(self.actions)} actions and "
                f"{len(self.observations)} observations"
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict of every field."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Episode:
        """Inverse of :meth:`to_dict`."""
        return cls(**d)


class ExperienceReservoir:
    """The ``capacity`` most recent episodes, oldest first (older ones drop out as new ones arrive)."""

    def __init__(self, capacity: int = 200):
        """Create an empty reservoir.

        Args:
            capacity: the most episodes kept (ReSkill: ~200).
        """
        if type(capacity) is not int or capacity < 1:
            raise ValueError(f"capacity={capacity!r}; use a positive int such as 200")
        self.capacity = capacity
        self._episodes: deque[Episode] = deque(maxlen=capacity)

    def add(self, episode: Episode) -> None:
        """Append one episode (the oldest is dropped when full)."""
        self._episodes.append(episode)

    def extend(self, episodes: Iterable[Episode]) -> None:
        """Append several episodes in order."""
        for episode in episodes:
            self.add(episode)

    @property
    def episodes(self) -> list[Episode]:
        """All kept episodes, oldest first."""
        return list(self._episodes)

    def successes(self) -> list[Episode]:
        """The successful episodes."""
        return [e for e in self._episodes if e.success]

    def failures(self) -> list[Episode]:
        """The failed episodes."""
        return [e for e in self._episodes if not e.success]

    def success_rate(self) -> float:
        """Share of kept episodes that succeeded (0 when empty)."""
        return len(self.successes()) / len(self) if self._episodes else 0.0

    def __len__(self) -> int:
        return len(self._episodes)

    def __iter__(self) -> Iterator[Episode]:
        return iter(list(self._episodes))

    def to_dict(self) -> dict[str, Any]:
        """``{"capacity": int, "episodes": [Episode.to_dict(), ...]}``."""
        return {"capacity": self.capacity, "episodes": [e.to_dict() for e in self._episodes]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExperienceReservoir:
        """Inverse of :meth:`to_dict`."""
        reservoir = cls(d["capacity"])
        reservoir.extend(Episode.from_dict(e) for e in d["episodes"])
        return reservoir


def episodes_from_rollouts(
    rollouts: Sequence[Any], *, step: int = 0, arms: Sequence[str] | None = None, versions: Sequence[int] | None = None
) -> list[Episode]:
    """One :class:`Episode` per played chain position of each :class:`~sage_agents.rollout.ChainRollout`.

    Args:
        rollouts: the step's rollouts.
        step: training step to stamp.
        arms: per rollout, ``"new"``/``"old"``/``""``.
        versions: per rollout, the library version id.

    Returns:
        The episodes, rollout by rollout, position by position.
    """
    out = []
    for i, ro in enumerate(rollouts):
        for k, played in enumerate(ro.played):
            if not played:
                continue
            turns = ro.turns_of(k)
            tasks = getattr(ro, "tasks", [])
            out.append(
                Episode(
                    actions=[t.action for t in turns],
                    observations=[getattr(t, "observation", "") for t in turns],
                    success=bool(ro.task_success[k]),
                    task_type=ro.task_types[k] if k < len(ro.task_types) else "",
                    task=tasks[k] if k < len(tasks) else "",
                    step=step,
                    arm=arms[i] if arms is not None else "",
                    version=versions[i] if versions is not None else 0,
                )
            )
    return out
