"""What the ALFWorld expert's next command is for, in words: the domain half of guidance-conditioning SFT data.

ReSkill (docs/reskill.md) shows the policy guidance skills; a policy learns to act on them only if its SFT prompts
held guidance that applies to the turn (issue 21). :func:`advise` says, for one expert command in the situation
the task's earlier commands left, which command to send and why (``the microwave can heat the egg``), so that a
guidance skill naming it can be written for that turn. Writing the skill (its trigger, its ``## When to Use`` /
``## Action`` text) is the agent side's job (``sage_agents.sft``); this module knows only the household.

:class:`ShadowExpert` is the observation-only expert made to follow another agent's path, so that the command
it would send can be advised on every turn of that agent's episode (an evaluation with the expert's guidance).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sage_envs.domain import Advice
from sage_envs.domains.alfworld.expert import APPLIANCES, AlfworldExpert, kind_of, parse_task

_COMMANDS = (
    ("go", re.compile(r"go to (?P<recep>.+)")),
    ("take", re.compile(r"take (?P<obj>.+?) from (?P<recep>.+)")),
    ("treat", re.compile(r"(?P<verb>heat|cool|clean) (?P<obj>.+?) with (?P<recep>.+)")),
    ("put", re.compile(r"(?:move|put) (?P<obj>.+?) (?:to|in/on|in|on) (?P<recep>.+)")),
    ("open", re.compile(r"open (?P<recep>.+)")),
    ("examine", re.compile(r"examine (?P<recep>.+)")),
    ("use", re.compile(r"use (?P<obj>.+)")),
)
"""The commands the expert sends, by role (``put`` covers both put forms of the generated and official games)."""


def _slug(*words: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"[^a-z0-9]+", "_", "_".join(words).lower())).strip("_")[:64]


def _parse(command: str) -> tuple[str, re.Match[str]] | None:
    """``(role, match)`` of a command of :data:`_COMMANDS`, or None."""
    for role, pattern in _COMMANDS:
        match = pattern.fullmatch(command.strip())
        if match is not None:
            return role, match
    return None


def _held(earlier: Sequence[str]) -> tuple[str, bool]:
    """``(object in hand or "", whether it was cleaned / heated / cooled)`` after the task's ``earlier`` commands."""
    holding, treated = "", False
    for role, match in filter(None, map(_parse, earlier)):
        if role == "take":
            holding, treated = match["obj"], False
        elif role == "put":
            holding, treated = "", False
        elif role == "treat" and holding:
            treated = True
    return holding, treated


def advise(task: str, earlier: Sequence[str], command: str) -> Advice | None:
    """What ``command`` does for ``task`` after the task's ``earlier`` commands (oldest first), or None.

    None for a task sentence that is not an ALFWorld task, and for commands that move no task on (``look``,
    ``inventory``, a skill definition or call): guidance names plain commands only.
    """
    goal = parse_task(task)
    if goal is None:
        return None
    command, parsed = command.strip(), _parse(command)
    if parsed is None:
        return None
    (role, match), (holding, treated), obj = parsed, _held(earlier), goal.obj
    recep = match.groupdict().get("recep") or ""
    rtype = kind_of(recep)
    appliance = goal.action and any(kind in rtype for kind in APPLIANCES[goal.action])
    if role == "go":
        if holding and goal.action and not treated and appliance:
            then = f"then {goal.action} {holding} with {recep}"
            return Advice(
                _slug(goal.action, "with", rtype), command, f"the {rtype} can {goal.action} the {obj}; {then}"
            )
        if holding and goal.task_type == "look_at_obj_in_light":
            return Advice(_slug("find", goal.lamp), command, f"the {goal.lamp} may be at the {rtype}")
        if holding and rtype == goal.place:
            return Advice(_slug("bring", obj, "to", rtype), command, f"the task puts the {obj} in the {rtype}")
        return Advice(_slug("find", obj), command, f"the {obj} may be at the {rtype}")
    if role == "take":
        return Advice(_slug("take", kind_of(match["obj"])), command, f"the task needs the {obj}")
    if role == "treat":
        verb = match["verb"]
        return Advice(_slug(verb, "with", rtype), command, f"the {rtype} can {verb} the {obj}")
    if role == "put":
        return Advice(_slug("place", obj), command, f"the task puts the {obj} in the {rtype}")
    if role == "open":
        if holding and rtype == goal.place:
            return Advice(_slug("open", rtype), command, f"the {rtype} is closed: open it to put the {obj} in")
        return Advice(_slug("open", rtype), command, f"the {rtype} is closed: the {obj} may be in it")
    if role == "examine":
        return Advice(_slug("examine", rtype), command, f"see what the {rtype} holds")
    lamp = kind_of(match["obj"])
    return Advice(_slug("use", lamp), command, f"the {lamp} lights the {obj}")


class ShadowExpert(AlfworldExpert):
    """The observation-only expert (plain commands) on another agent's path.

    Each turn, :meth:`act` says what the expert would send; :meth:`follow` then tells it what was sent instead, so
    that it reads the next observation as the answer to that command (its world model follows the real path).
    """

    def __init__(self) -> None:
        super().__init__(use_skills=False)

    def follow(self, action: str) -> None:
        """Record ``action`` as the command sent this turn (call after :meth:`act`, before the next one)."""
        self._last_action = action
