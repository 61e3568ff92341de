"""The official ALFWorld games (``json_2.1.1/<split>/<task-dir>/<trial>/``), filtered as ALFWorld does.

ALFWorld's loader (``AlfredTWEnv.collect_game_files``) keeps a game folder when it holds ``traj_data.json``,
its path has neither "movable" nor "Sliced", its ``task_type`` is one of the six task types, ``game.tw-pddl``
exists and the game file says ``"solvable": true``. :func:`official_games` applies the same rules, with two
deliberate differences: the path test looks only below the split folder (ALFWorld's looks at the whole path,
so a data folder named e.g. ``/data/movable`` would hide every game), and the result is sorted (ALFWorld
keeps ``os.walk`` order, which depends on the file system).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from sage_envs.domain import TaskSpec
from sage_envs.error import DataNotFoundError

DATA_FOLDER = "json_2.1.1"
GAME_FILE = "game.tw-pddl"
TRAJ_FILE = "traj_data.json"
DATA_ENV_VAR = "ALFWORLD_DATA"
TASK_TYPES = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)
"""The six ALFWorld task types (``alfred_tw_env.TASK_TYPES``), in ALFWorld's numbering order."""


def split_dir(data_dir: str | os.PathLike[str], split: str) -> Path:
    """The folder of ``split`` under ``data_dir`` (the folder holding ``json_2.1.1/``).

    Raises:
        DataNotFoundError: when that folder does not exist; the message says which path was expected.
    """
    folder = Path(data_dir).expanduser() / DATA_FOLDER / split
    if not folder.is_dir():
        raise DataNotFoundError(
            f"ALFWorld split {split!r} not found: expected the folder {folder}. Set ${DATA_ENV_VAR} (or pass "
            f"data_dir=) to the folder that holds {DATA_FOLDER}/, e.g. "
            f"`export {DATA_ENV_VAR}=~/.cache/alfworld` after running `alfworld-download` once."
        )
    return folder


def official_games(data_dir: str | os.PathLike[str], split: str) -> list[Path]:
    """The game folders of ``split`` that ALFWorld's own loader would play, sorted.

    Args:
        data_dir: the folder holding ``json_2.1.1/`` (what ``$ALFWORLD_DATA`` names).
        split: a folder name under ``json_2.1.1``, e.g. ``valid_seen``, ``valid_unseen``, ``train``.

    Returns:
        Folders holding ``game.tw-pddl`` and ``traj_data.json`` (140 for ``valid_seen``).

    Raises:
        DataNotFoundError: when the split folder does not exist.
    """
    return [game_dir for game_dir, _ in _collect(split_dir(data_dir, split))]


def official_tasks(data_dir: str | os.PathLike[str], split: str) -> list[TaskSpec]:
    """The tasks of :func:`official_games`, in the same order.

    ``task_id`` is the game folder relative to the split folder
    (``pick_heat_then_place_in_recep-Apple-None-DiningTable-26/trial_T2019...``), ``task_type`` comes from
    ``traj_data.json`` and ``scenario`` is its AI2-THOR floor plan (``FloorPlan26``), so that the chains of
    :meth:`sage_envs.domain.Domain.chains` stay in one household. ``extra["game_path"]`` is the game folder.

    Raises:
        DataNotFoundError: when the split folder does not exist.
    """
    root = split_dir(data_dir, split)
    return [
        TaskSpec(
            task_id=game_dir.relative_to(root).as_posix(),
            task_type=traj["task_type"],
            scenario=traj["scene"]["floor_plan"],
            extra={"game_path": str(game_dir)},
        )
        for game_dir, traj in _collect(root)
    ]


def _collect(root: Path) -> list[tuple[Path, dict]]:
    """(game folder, traj_data) of every game under ``root`` that passes ALFWorld's filters, sorted."""
    games = []
    for folder, _, files in os.walk(root):
        if TRAJ_FILE not in files:
            continue
        relative = os.path.relpath(folder, root)
        if "movable" in relative or "Sliced" in relative:
            continue
        game_dir = Path(folder)
        traj = json.loads((game_dir / TRAJ_FILE).read_text())
        if traj["task_type"] not in TASK_TYPES or not (game_dir / GAME_FILE).is_file():
            continue
        if json.loads((game_dir / GAME_FILE).read_text()).get("solvable") is not True:
            continue
        games.append((game_dir, traj))
    return sorted(games, key=lambda game: game[0])


def resolve_game_file(path: str | Path) -> Path:
    """Return the ``game.tw-pddl`` file for ``path`` (the file itself or the game folder holding it).

    Raises:
        DataNotFoundError: when there is no such file.
    """
    path = Path(path)
    game_file = path / GAME_FILE if path.is_dir() else path
    if not game_file.is_file():
        raise DataNotFoundError(f"no ALFWorld game at {game_file}: expected a {GAME_FILE} file or its folder.")
    return game_file
