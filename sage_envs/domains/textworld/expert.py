"""The TextWorld cooking expert: each game's own walkthrough, sent as plain commands or program skill calls.

``tw-cooking`` writes a walkthrough into every game it makes (read the cookbook, fetch, cook and cut each
ingredient, prepare and eat the meal). Each task of a chain is a fresh game of the same house, so the walkthrough
wins from the task's opening state; the expert is privileged (it reads the game's metadata, not only the
observations), like ALFWorld's planner behind ``expert_plan``.

With skills it plays as SAGE intends: the walkthrough's routines (fetching an ingredient from a container,
cutting it with the knife, serving the meal) are sent as calls of :data:`SKILLS`, each defined the first time the
chain needs it; the later recipes of the house call the stored skills.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sage_envs.domains.plan_expert import PlanExpert
from sage_envs.domains.textworld.generator import game_file, walkthrough

SKILLS = {
    "fetch_from": """skill fetch_from(food, container):
    # open the container that holds the food and take the food out of it
    open {container}
    take {food} from {container}""",
    "cut_with_knife": """skill cut_with_knife(food, how, knife, place):
    # pick up the knife from where it lies, cut the food as the recipe says (chop, slice or dice), put it down
    take {knife} from {place}
    {how} {food} with {knife}
    drop {knife}""",
    "serve_meal": """skill serve_meal():
    # once every ingredient is ready: prepare the meal and eat it
    prepare meal
    eat meal""",
}
"""The expert's skill definitions (the DSL), by name."""

CUTS = ("chop", "slice", "dice")
_TASK_POSITION_RE = re.compile(r"task\d+$")


def skill_call(commands: Sequence[str]) -> tuple[str, tuple[str, ...]] | None:
    """The skill call of :data:`SKILLS` that sends the first commands of ``commands``, or None.

    ``["open fridge", "take carrot from fridge", ...]`` gives ``("fetch_from", ("carrot", "fridge"))``.
    """
    first = commands[0] if commands else ""
    if first == "prepare meal" and commands[1:2] == ["eat meal"]:
        return "serve_meal", ()
    if first.startswith("open ") and len(commands) > 1:
        container = first[len("open ") :]
        match = re.fullmatch(rf"take (.+) from {re.escape(container)}", commands[1])
        if match:
            return "fetch_from", (match.group(1), container)
    match = re.fullmatch(r"take (.+) from (.+)", first)
    if match and len(commands) > 2:
        knife, place = match.groups()
        cut = re.fullmatch(rf"({'|'.join(CUTS)}) (.+) with {re.escape(knife)}", commands[1])
        if cut and commands[2] == f"drop {knife}":
            return "cut_with_knife", (cut.group(2), cut.group(1), knife, place)
    return None


def current_task_id(info: Mapping[str, Any]) -> str:
    """The id of the task the next action goes to.

    ``info["task_id"]`` names the task the last action was applied to; when that task has ended
    (``new_task``), the next one is the chain's task number ``len(chain_successes)`` (one per ended task).
    """
    return _TASK_POSITION_RE.sub(f"task{len(info.get('chain_successes', []))}", str(info["task_id"]))


class TextworldExpert(PlanExpert):
    """Follows each game's walkthrough; with skills, sends its routines as calls of :data:`SKILLS`.

    The loop is :class:`~sage_envs.domains.plan_expert.PlanExpert`'s: skills defined on first use, plain commands
    where a skill cannot be used.
    """

    definitions = SKILLS
    given = "each game's walkthrough (privileged: it reads the game's metadata)"
    """What it is handed, in words (the leaderboard's "given")."""

    def __init__(
        self,
        use_skills: bool = True,
        skills: Sequence[str] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        """Create the agent.

        Args:
            use_skills: send skill definitions and calls; False sends plain commands only (``skills="none"``).
            skills: the names of :data:`SKILLS` it may use (None = all).
            cache_dir: the game cache the env uses (default ``$SAGE_CACHE_DIR``, else ``~/.cache/sage_envs``);
                a game missing there is made again.

        Raises:
            ValueError: an unknown skill name.
        """
        self.cache_dir = cache_dir
        super().__init__(use_skills, skills)

    def task_key(self, info: Mapping[str, Any]) -> str:
        """The game the next action goes to (:func:`current_task_id`)."""
        return current_task_id(info)

    def plan(self, task_key: str) -> list[str]:
        """The game's walkthrough."""
        return walkthrough(game_file(task_key, self.cache_dir))

    skill_call = staticmethod(skill_call)
