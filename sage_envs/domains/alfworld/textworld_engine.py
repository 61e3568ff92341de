"""One ALFWorld game played through TextWorld's PDDL engine, set up the way ALFWorld itself sets it up.

ALFWorld (``alfworld.agents.environment.alfred_tw_env``) plays a ``game.tw-pddl`` file with TextWorld's
:class:`~textworld.envs.pddl.PddlEnv` wrapped in ``AlfredDemangler`` (ids such as ``Apple_bar_...`` become
"apple 1") and asks for ``won`` and ``admissible_commands``. :class:`AlfworldGame` does the same, so its
transcripts are ALFWorld's. Command forms come from the grammar embedded in each game file: the official
json_2.1.1 games say "put X in/on Y", games built from the wheel's ``alfred.twl2`` say "move X to Y"; nothing
here assumes either.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import textworld
from alfworld.agents.environment.alfred_tw_env import AlfredDemangler

from sage_envs.domain import StepResult, TaskGame
from sage_envs.domains.alfworld.official import resolve_game_file

TASK_PREFIX = "Your task is to: "
_TASK_RE = re.compile(re.escape(TASK_PREFIX) + r"([^\"\n]*)")
_ROOM_RE = re.compile(r"Looking quickly around you, you see (.*?)\.(?:\n|$)")
_TAKE_RE = re.compile(r"^take (.+?) from (.+)$")


@contextlib.contextmanager
def _keep_argv() -> Iterator[None]:
    """Undo fast-downward's habit of overwriting ``sys.argv`` whenever it translates a PDDL problem."""
    argv = list(sys.argv)
    try:
        yield
    finally:
        sys.argv = argv


# Each TextWorld PDDL engine loads a private 34 MB copy of fast-downward's library, and unloading one
# (dlclose) crashes the interpreter at exit. So engines are never unloaded: closed games park theirs here.
_IDLE_ENGINES: list[textworld.core.Environment] = []
_POOL_LOCK = threading.Lock()


def _acquire_engine(game_file: Path) -> textworld.core.Environment:
    """An engine with ``game_file`` loaded: a parked one if any, else a new one set up as ALFWorld does."""
    with _POOL_LOCK:
        env = _IDLE_ENGINES.pop() if _IDLE_ENGINES else None
    if env is None:
        infos = textworld.EnvInfos(won=True, admissible_commands=True)
        # shuffle=False is ALFWorld's evaluation setting (no domain randomisation): "apple 1", "apple 2", ...
        wrappers = [AlfredDemangler(shuffle=False)]
        return textworld.start(str(game_file), request_infos=infos, wrappers=wrappers)
    env.load(str(game_file))
    return env


def _release_engine(env: textworld.core.Environment) -> None:
    """Free the engine's planning task and park the engine for the next game."""
    env.unwrapped.downward_lib.cleanup()
    with _POOL_LOCK:
        _IDLE_ENGINES.append(env)


def task_sentence(text: str) -> str:
    """Extract the task sentence from ``"Your task is to: heat some egg and put it in garbagecan."``.

    The prefix and the final period are dropped (``heat some egg and put it in garbagecan``); "" when ``text``
    has no task line.
    """
    match = _TASK_RE.search(text)
    return match.group(1).strip().rstrip(".") if match else ""


def opening_receptacles(opening: str) -> list[str]:
    """The receptacles of an opening text's "Looking quickly around you, you see ..." line, in order."""
    match = _ROOM_RE.search(opening)
    return split_listing(match.group(1)) if match else []


def split_listing(text: str) -> list[str]:
    """Split an engine listing such as ``a cabinet 2, a cabinet 1, and a toaster 1`` into names, in order."""
    names = []
    for item in re.split(r",\s*", text.strip()):
        item = re.sub(r"^(?:and\s+)?(?:an?\s+)?", "", item.strip())
        if item and item != "nothing":
            names.append(item)
    return names


class AlfworldGame(TaskGame):
    """One ALFWorld task on TextWorld's PDDL engine, the engine of ALFWorld's own text environment.

    The engine starts at the first :meth:`reset`, so building a game is cheap; :meth:`close` hands the engine
    back to a process-wide pool that later games reuse. Observations are the engine's text verbatim (with
    ALFWorld's "-= Welcome to TextWorld, ALFRED! =-" opening); a command the engine does not accept gets its
    "Nothing happens." and never raises.
    """

    def __init__(self, game_path: str | Path) -> None:
        """Prepare the game stored at ``game_path`` (a ``game.tw-pddl`` file or the folder holding it).

        Raises:
            DataNotFoundError: when the game file does not exist.
        """
        self.game_file = resolve_game_file(game_path)
        # The task sentence is part of the game's own grammar, so it is known before the (slow) engine starts.
        grammar = json.loads(self.game_file.read_text())["grammar"]
        self._description = task_sentence(grammar)
        self._env: textworld.core.Environment | None = None
        self._state: textworld.core.GameState | None = None
        self._receptacles: list[str] = []
        self._plan: list[str] | None = None  # the planner's plan from the current state, while still valid

    @property
    def description(self) -> str:
        """The task sentence, e.g. ``heat some apple and put it in diningtable`` (no prefix, no period)."""
        return self._description

    def reset(self) -> str:
        """Start (or restart) the game and return ALFWorld's opening text."""
        with _keep_argv():
            if self._env is None:
                self._env = _acquire_engine(self.game_file)
            self._state = self._env.reset()
        self._plan = None
        self._receptacles = opening_receptacles(self._state.feedback)
        return self._state.feedback

    def step(self, command: str) -> StepResult:
        """Apply one command; one the engine does not accept gives "Nothing happens."."""
        env = self._running()
        # The engine is deterministic: after the plan's first command, or a command that changes nothing, the
        # rest of the cached plan is still an optimal plan and expert_plan() need not call the planner again.
        if self._plan and command.strip() == self._plan[0]:
            self._plan = self._plan[1:]
        elif command.strip() in self._state["admissible_commands"]:
            self._plan = None
        with _keep_argv():
            self._state, _, _ = env.step(command)
        return StepResult(observation=self._state.feedback, won=bool(self._state["won"]))

    def admissible_commands(self) -> list[str]:
        """The commands the engine accepts now, in the engine's (sorted) order."""
        self._running()
        return list(self._state["admissible_commands"])

    def entities(self) -> Mapping[str, Sequence[str]]:
        """What a skill program may iterate over: ``receptacles``, ``objects`` and ``inventory``.

        ``receptacles`` are those the opening text lists, in its order; ``objects`` are the objects that can
        be taken here and now (from the admissible ``take X from Y`` commands, in their order); ``inventory``
        is what the agent holds.
        """
        self._running()
        objects = []
        for command in self._state["admissible_commands"]:
            match = _TAKE_RE.match(command)
            if match and match.group(1) not in objects:
                objects.append(match.group(1))
        return {"receptacles": list(self._receptacles), "objects": objects, "inventory": self._inventory()}

    def expert_plan(self) -> list[str]:
        """The reference walkthrough from the current state: TextWorld's fast-downward planner (privileged).

        It is the engine's optimal plan and reads the hidden PDDL state; it is not the observation-only
        :class:`~sage_envs.domains.alfworld.expert.AlfworldExpert`. ALFWorld's handcoded TextWorld expert is
        not used: it hard-codes "move X to Y" and so cannot finish the official games, whose grammar says
        "put X in/on Y" (docs/alfworld.md). Returns [] once the task is won.
        """
        env = self._running()
        if self._state["won"]:
            return []
        if self._plan is None:
            pddl_env = env.unwrapped
            with _keep_argv():
                self._plan = list(pddl_env._pddl_state.replan(pddl_env._entity_infos))
        return list(self._plan)

    def close(self) -> None:
        """Hand the engine back to the process-wide pool; a later :meth:`reset` takes one again."""
        if self._env is not None:
            _release_engine(self._env)
            self._env = None
            self._state = None
            self._plan = None

    def _running(self) -> textworld.core.Environment:
        if self._env is None or self._state is None:
            raise RuntimeError("AlfworldGame: call reset() before step(), admissible_commands() or entities().")
        return self._env

    def _inventory(self) -> list[str]:
        """Names of the objects the agent holds, from the engine's ``holds(agent, object)`` facts."""
        infos = self._env.unwrapped._entity_infos
        return [infos[fact.arguments[1].name].name for fact in self._state["_facts"] if fact.name == "holds"]
