"""Choosing the engine that plays an ALFWorld game: ``native`` (default) or ``textworld``.

Both produce identical transcripts (checked step by step in tests/sage_envs/domains/test_native_engine.py); the
native engine is orders of magnitude faster (benchmarks/engine_speed.py). The one thing only TextWorld's engine
offers is ALFWorld's expert walkthrough from the current state, so a native game asked for ``expert_plan()``
replays its own commands on a TextWorld twin, built on first request, and asks that twin.
"""

from __future__ import annotations

from pathlib import Path

from sage_envs.domain import StepResult, TaskGame
from sage_envs.domains.alfworld.native_engine import NativeAlfworldGame
from sage_envs.error import InvalidConfigError, suggest

ENGINES = ("native", "textworld")
"""The engines a game can be played on (the domain's and the env's ``engine`` argument)."""


def check_engine(engine: str) -> None:
    """Raise :class:`InvalidConfigError` naming the choices when ``engine`` is not one of :data:`ENGINES`."""
    if engine not in ENGINES:
        raise InvalidConfigError(f"engine={engine!r} is not one of {ENGINES}.{suggest(engine, ENGINES)}")


class NativeGameWithExpert(NativeAlfworldGame):
    """A native game whose :meth:`expert_plan` comes from ALFWorld's expert on a lazily synced TextWorld twin."""

    def __init__(self, game_path: str | Path) -> None:
        """Load ``game_path`` on the native engine; the TextWorld twin is only built if a plan is requested."""
        super().__init__(game_path)
        self._game_path = game_path
        self._history: list[str] = []
        self._twin: TaskGame | None = None
        self._twin_synced = 0

    def reset(self) -> str:
        """Restart the game (and forget the commands the twin would have to replay)."""
        self._history, self._twin_synced = [], 0
        if self._twin is not None:
            self._twin.reset()
        return super().reset()

    def step(self, command: str) -> StepResult:
        """Play ``command`` natively and remember it for the twin."""
        self._history.append(command)
        return super().step(command)

    def expert_plan(self) -> list[str]:
        """ALFWorld's expert plan from the current state, computed on the synced TextWorld twin."""
        if self._twin is None:
            from sage_envs.domains.alfworld.textworld_engine import AlfworldGame

            self._twin = AlfworldGame(self._game_path)
            self._twin.reset()
        for command in self._history[self._twin_synced :]:
            self._twin.step(command)
        self._twin_synced = len(self._history)
        return self._twin.expert_plan()

    def close(self) -> None:
        """Close the twin too."""
        if self._twin is not None:
            self._twin.close()
            self._twin = None
        super().close()


def make_game(game_path: str | Path, engine: str) -> TaskGame:
    """Open ``game_path`` on ``engine``.

    Raises:
        InvalidConfigError: for an ``engine`` outside :data:`ENGINES`.
    """
    check_engine(engine)
    if engine == "native":
        return NativeGameWithExpert(game_path)
    from sage_envs.domains.alfworld.textworld_engine import AlfworldGame

    return AlfworldGame(game_path)
