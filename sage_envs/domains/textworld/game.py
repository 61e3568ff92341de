"""One compiled TextWorld cooking game played through ``textworld.start`` (its Z-machine backend)."""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

from sage_envs.domain import StepResult, TaskGame
from sage_envs.error import DataNotFoundError

# The Z-machine echoes a prompt and a status bar ("> ... -= Kitchen =-0/1") after each reply: not game text.
_PROMPT_RE = re.compile(r"\n>[^\n]*$")
_BLANK_LINES_RE = re.compile(r"\n{3,}")
# The Z-machine's interpreter (dumb-frotz, via jericho) reads "\" as the start of its own escape commands and a
# newline as the end of a command, and crashes the process on some sequences of them: a command reaches it as
# plain words only. No admissible command holds other characters, so an agent's command keeps its meaning.
_UNSAFE_RE = re.compile(r"[^A-Za-z0-9 ',.!?-]+")
# The interpreter's own verbs (quit, restart, save, ...) would stop, restart or suspend the Z-machine behind
# TextWorld's back; they never reach it and get the game's reply to a word it does not know.
META_VERBS = frozenset(
    "quit q restart save restore script unscript transcript undo verbose brief superbrief notify version".split()
)
UNKNOWN_VERB = "That's not a verb I recognise."
MAX_COMMAND_CHARS = 200
"""Longest command passed to the Z-machine (the longest admissible command is far shorter)."""


def engine_command(command: str) -> str:
    """``command`` as the Z-machine gets it: other characters than words and punctuation become one space."""
    return " ".join(_UNSAFE_RE.sub(" ", command[:MAX_COMMAND_CHARS]).split())


def clean_feedback(text: str) -> str:
    """The game's reply without its trailing prompt and status bar, runs of blank lines cut to one."""
    return _BLANK_LINES_RE.sub("\n\n", _PROMPT_RE.sub("", text.rstrip())).strip()


class TextworldGame(TaskGame):
    """A cooking game: TextWorld reports ``won``, ``lost``, the score and the admissible commands each turn.

    The engine starts at the first :meth:`reset`, so building a game is cheap. Observations are the engine's
    text (:func:`clean_feedback`); a command the game does not know gets its reply ("That's not a verb I
    recognise.") and never raises. The score is reported as a percentage of the game's maximum (0-100).
    """

    def __init__(self, game_path: str | os.PathLike[str], objective: str | None = None) -> None:
        """Prepare the compiled game at ``game_path`` (a ``game.z8`` with its ``game.json``).

        Raises:
            DataNotFoundError: the game file or its metadata is missing.
        """
        self.game_file = Path(game_path)
        if not self.game_file.is_file() or not self.game_file.with_suffix(".json").is_file():
            raise DataNotFoundError(
                f"TextWorld game {str(self.game_file)!r} (or its .json) does not exist; delete its cache folder "
                "so that the generator makes it again."
            )
        self._objective = objective
        self._env = None
        self._state = None

    @property
    def description(self) -> str:
        """The game's objective (the cooking games say: cook the cookbook's recipe in the kitchen, then eat it)."""
        if self._objective is None:
            self._objective = json.loads(self.game_file.with_suffix(".json").read_text())["objective"]
        return self._objective

    def reset(self) -> str:
        """Start (or restart) the game and return its opening text."""
        import textworld

        if self._env is None:
            infos = textworld.EnvInfos(
                admissible_commands=True, won=True, lost=True, score=True, max_score=True, policy_commands=True
            )
            with warnings.catch_warnings():
                # jericho does not know TextWorld's games and disables its own score tracking; TextWorld keeps its own.
                warnings.filterwarnings("ignore", message=".*is not fully supported", module="jericho")
                self._env = textworld.start(str(self.game_file), request_infos=infos)
        self._state = self._env.reset()
        return clean_feedback(self._state.feedback)

    def step(self, command: str) -> StepResult:
        """Apply one command (:func:`engine_command`); won, lost and the score (0-100) come from TextWorld's state."""
        if self._env is None:
            raise RuntimeError("TextworldGame: call reset() before step().")
        command = engine_command(command)
        if command.split(" ", 1)[0].lower() in META_VERBS:
            return StepResult(UNKNOWN_VERB, won=False)
        self._state, _, _ = self._env.step(command)
        state = self._state
        score = 100.0 * state["score"] / state["max_score"] if state["max_score"] else None
        return StepResult(clean_feedback(state.feedback), won=bool(state["won"]), lost=bool(state["lost"]), score=score)

    def admissible_commands(self) -> list[str]:
        """The commands TextWorld lists as admissible now (sorted, as it lists them)."""
        if self._state is None:
            raise RuntimeError("TextworldGame: call reset() before admissible_commands().")
        return list(self._state["admissible_commands"])

    def expert_plan(self) -> list[str]:
        """TextWorld's ``policy_commands``: the commands that win from the current state (privileged); []."""
        if self._state is None:
            raise RuntimeError("TextworldGame: call reset() before expert_plan().")
        return list(self._state["policy_commands"] or [])

    def close(self) -> None:
        """Stop the Z-machine."""
        if self._env is not None:
            self._env.close()
            self._env = None
            self._state = None
