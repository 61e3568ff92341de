"""An expert that follows a plan of primitive commands per task and sends the plan's routines as skill calls.

The TextWorld (walkthrough) and ScienceWorld (gold sequence) experts are this loop with another plan: a domain
gives the plan of the task the next action goes to (:meth:`PlanExpert.task_key`, :meth:`PlanExpert.plan`) and
the routines its skills send (:attr:`PlanExpert.definitions`, :meth:`PlanExpert.skill_call`). With skills it plays
as SAGE intends: a routine is sent as a call of its skill, defined in the same action the first time the chain
needs it; later tasks of the chain call the stored skill.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar


class PlanExpert:
    """Follows each task's plan; with skills, sends its routines as calls of :attr:`definitions`.

    Protocol (as for every agent of the project): :meth:`reset` at each chain start, then :meth:`act` with the
    chain env's observation and ``info`` (``task_id``, ``chain_successes``, ``primitive_steps``,
    ``skill_library``, ``action_valid``, ``message``). Its place in the plan advances by the primitive commands
    each turn ran, so a skill call that stops early is followed by the plan's next command. Whenever a skill
    cannot be used (skills disabled, a failing call) it carries on with plain commands.
    """

    definitions: ClassVar[Mapping[str, str]] = {}
    """The skills' definitions in the DSL, by name."""
    idle_command: ClassVar[str] = "look"
    """Sent once the plan is spent and the task goes on: nothing the plan knows wins from there."""

    def __init__(self, use_skills: bool = True, skills: Sequence[str] | None = None) -> None:
        """Create the agent.

        Args:
            use_skills: send skill definitions and calls; False sends plain commands only (``skills="none"``).
            skills: the names of :attr:`definitions` it may use (None = all).

        Raises:
            ValueError: an unknown skill name.
        """
        unknown = sorted(set(skills or ()) - set(self.definitions))
        if unknown:
            raise ValueError(f"unknown expert skills {unknown}; choose among {sorted(self.definitions)}")
        self.use_skills = use_skills
        self.skills = frozenset(self.definitions if skills is None else skills)
        self.reset()

    def task_key(self, info: Mapping[str, Any]) -> str:
        """The id of the task the next action goes to."""
        raise NotImplementedError

    def plan(self, task_key: str) -> list[str]:
        """The primitive commands that win the task from its opening state."""
        raise NotImplementedError

    def skill_call(self, commands: Sequence[str]) -> tuple[str, tuple[str, ...]] | None:
        """The ``(skill, arguments)`` call that sends the first commands of ``commands``, or None."""
        raise NotImplementedError

    def reset(self) -> None:
        """Forget the previous chain (called at each chain start)."""
        self._skills_off = not self.use_skills
        self._broken: set[str] = set()
        self._task_key = ""
        self._plan: list[str] = []
        self._position = 0
        self._call = ""

    def act(self, observation: Mapping[str, str], info: Mapping[str, Any]) -> str:
        """Return the next action for the chain env's ``observation`` and ``info``."""
        task_key = self.task_key(info)
        if task_key != self._task_key:
            self._task_key, self._position, self._call = task_key, 0, ""
            self._plan = self.plan(task_key)
        else:
            self._position += int(info.get("primitive_steps", 0))
            if self._call and not info.get("action_valid", True):
                if "disabled" in str(info.get("message", "")):
                    self._skills_off = True
                else:
                    self._broken.add(self._call)
        self._call = ""
        remaining = self._plan[self._position :]
        if not remaining:
            return self.idle_command
        call = None if self._skills_off else self.skill_call(remaining)
        if call is None or call[0] not in self.skills or call[0] in self._broken:
            return remaining[0]
        name, args = call
        self._call = name
        text = f"call {name}({', '.join(args)})"
        library = {entry.get("name") for entry in info.get("skill_library", [])}
        return text if name in library else f"{self.definitions[name]}\n{text}"
