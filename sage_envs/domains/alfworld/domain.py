"""The ALFWorld domain plug-in: official json_2.1.1 games or games generated from the wheel's 120 layouts."""

from __future__ import annotations

import os
from pathlib import Path

from sage_envs.domain import SPLITS, Domain, TaskSpec
from sage_envs.domains.alfworld.official import DATA_ENV_VAR, TASK_TYPES, official_tasks
from sage_envs.error import DataNotFoundError, InvalidConfigError, suggest

__all__ = ["SOURCES", "TASK_TYPES", "AlfworldDomain"]

SOURCES = ("generated", "official")
CACHE_ENV_VAR = "SAGE_CACHE_DIR"
DEFAULT_CACHE_DIR = "~/.cache/sage_envs"


class AlfworldDomain(Domain):
    """ALFWorld household tasks (the six :data:`TASK_TYPES`), played on TextWorld's PDDL engine.

    ``source="official"`` lists ALFWorld's own games under ``data_dir/json_2.1.1/<split>`` with ALFWorld's
    filters (:mod:`sage_envs.domains.alfworld.official`); chains group them by floor plan (one household).
    ``source="generated"`` delegates tasks, chains and game files to
    :mod:`sage_envs.domains.alfworld.generator`, which builds seeded games from the scene layouts shipped in the
    alfworld wheel and caches them under ``cache_dir``.
    """

    name = "alfworld"

    def __init__(
        self,
        source: str = "generated",
        data_dir: str | os.PathLike[str] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        seed: int = 0,
    ) -> None:
        """Configure the domain; nothing is read from disk until a split is first used.

        Args:
            source: ``"generated"`` or ``"official"``.
            data_dir: the folder holding ``json_2.1.1/`` (official games); default ``$ALFWORLD_DATA``.
            cache_dir: where generated games are written; default ``$SAGE_CACHE_DIR`` or ``~/.cache/sage_envs``.
            seed: the generator seed, which fixes the generated splits (unused for official games).

        Raises:
            InvalidConfigError: for an unknown ``source``.
        """
        if source not in SOURCES:
            raise InvalidConfigError(f"source={source!r} is not one of {SOURCES}.{suggest(source, SOURCES)}")
        self.source = source
        self.data_dir = data_dir if data_dir is not None else os.environ.get(DATA_ENV_VAR)
        cache = cache_dir if cache_dir is not None else os.environ.get(CACHE_ENV_VAR, DEFAULT_CACHE_DIR)
        self.cache_dir = Path(cache).expanduser()
        self.seed = seed
        self._tasks: dict[str, list[TaskSpec]] = {}

    def tasks(self, split: str) -> list[TaskSpec]:
        """All tasks of ``split`` in a fixed order (read once, then cached).

        Raises:
            InvalidConfigError: for a split outside ``train`` / ``valid_seen`` / ``valid_unseen``.
            DataNotFoundError: official source, when ``data_dir`` is unset or lacks the split's folder.
        """
        if split not in SPLITS:
            raise InvalidConfigError(f"split={split!r} is not one of {SPLITS}.{suggest(split, SPLITS)}")
        if split not in self._tasks:
            if self.source == "official":
                self._tasks[split] = official_tasks(self._official_data_dir(), split)
            else:
                self._tasks[split] = list(self._generator().generated_tasks(split, self.seed))
        return list(self._tasks[split])

    def load(self, task: TaskSpec):
        """Build the playable :class:`~sage_envs.domains.alfworld.textworld_engine.AlfworldGame` of ``task``.

        Official tasks (and generated ones already on disk) carry ``extra["game_path"]``; otherwise the
        generator writes the game first, from the ``split`` and ``index`` it put in ``extra``.
        """
        from sage_envs.domains.alfworld.textworld_engine import AlfworldGame

        game_path = task.extra.get("game_path")
        if game_path is None or not Path(game_path).exists():
            if self.source == "official":
                raise DataNotFoundError(f"task {task.task_id!r}: no game at {game_path!r}.")
            split, index = task.extra["split"], int(task.extra["index"])
            game_path = self._generator().generate_game(split, index, self.seed, self.cache_dir)
        return AlfworldGame(game_path)

    def chains(self, split: str, chain_length: int) -> list[tuple[TaskSpec, ...]]:
        """Chains of tasks from one household.

        Official games: the base class grouping by floor plan (``scenario``), in listing order. Generated games:
        the generator's own chains.
        """
        if self.source == "official":
            return super().chains(split, chain_length)
        return list(self._generator().generated_chains(split, self.seed, chain_length))

    def _official_data_dir(self) -> str | os.PathLike[str]:
        if self.data_dir is None:
            raise DataNotFoundError(
                f"official ALFWorld games need a data folder: set ${DATA_ENV_VAR} (or pass data_dir=) to the "
                "folder that holds json_2.1.1/."
            )
        return self.data_dir

    @staticmethod
    def _generator():
        # Imported on first use: the official source must not depend on the generator (or its layouts).
        from sage_envs.domains.alfworld import generator

        return generator
