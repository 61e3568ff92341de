"""Seeded, cached TextWorld cooking games (``tw-cooking``), grouped into chains of recipes in one house.

TextWorld's cooking challenge (:func:`textworld.challenges.tw_cooking.make`) builds a game from seeds and
settings. Its ``recipe_seed`` setting is how TextWorld itself varies the recipe while keeping the world: with a
positive ``recipe_seed`` the recipe is redrawn among the house's ingredients and distractor foods, and the map,
furniture and food placement (fixed by the world seeds of :class:`textworld.GameOptions`) stay the same. A chain
is one house (one world seed) and its tasks are recipe seeds 1, 2, ... whose recipes differ.

Listing a split is cheap: :func:`chain_tasks` returns task specs only. The first time a chain's task is loaded,
:func:`chain_games` resolves the chain: it draws house seeds from ``(generator_seed, split, chain, attempt)``,
makes the games of recipe seeds ``1 .. RECIPE_TRIES`` and keeps the first ``chain_length`` distinct recipes (a
house whose foods allow fewer is skipped); the kept games are compiled (Inform 7) into the cache and the chain's
resolution is written as a small index file. Later loads, in any process, read the cache. Every write is atomic
(a temporary folder or file renamed into place), so parallel processes may resolve the same chain.

Splits are TextWorld's own food splits (``split`` setting: train / valid / test foods and preparations) with house
seeds drawn from each split's own stream, so the three splits hold distinct games.

Cache layout (``<cache>`` is ``cache_dir``, else ``$SAGE_CACHE_DIR``, else ``~/.cache/sage_envs``)::

    <cache>/textworld-cooking/<settings key>/<split>/house-<seed>/recipe-<r>/game.z8 (+ game.json, game.ni)
    <cache>/textworld-cooking/<settings key>/<split>/chains-seed<generator_seed>/chain-<i>-len<L>.json

The settings key names the textworld version, :data:`GENERATOR_VERSION` and every generator setting, so a cached
game is never reused by another configuration.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sage_envs.domain import TaskSpec
from sage_envs.error import GameGenerationError, InvalidConfigError, suggest

SPLITS = ("train", "valid", "test")
"""The splits: TextWorld's cooking food splits (``tw-cooking --split``)."""
NUM_CHAINS = {"train": 1000, "valid": 100, "test": 100}
"""Chains per split (an index range: chains are resolved on demand)."""
ROOM_CHOICES = (1, 6, 9, 12)
"""Room counts ``tw-cooking`` builds (``--go``)."""
MAX_INGREDIENTS = 5
"""Most ingredients a ``tw-cooking`` recipe may have (``--recipe``)."""
RECIPE_TRIES = 8
"""Recipe seeds tried per house (1 .. RECIPE_TRIES) to find a chain's distinct recipes."""
HOUSE_ATTEMPTS = 20
"""Houses tried per chain before :func:`chain_games` gives up."""
GENERATOR_VERSION = "1"
"""Bumped whenever the games or chains made for the same settings change; it is part of the cache key."""
CACHE_ENV_VAR = "SAGE_CACHE_DIR"
DEFAULT_CACHE_DIR = "~/.cache/sage_envs"
CACHE_SUBDIR = "textworld-cooking"
GAME_FILE = "game.z8"
TASK_TYPE = "cook_meal"
"""The task type of every cooking task (the leaderboard's per-type metrics have one row)."""

_SPLIT_CODE = {split: code for code, split in enumerate(SPLITS)}
_TASK_ID_RE = re.compile(
    r"^(?P<settings>rooms\d+-ingredients\d+)/(?P<split>[a-z]+)/seed(?P<seed>\d+)/chain(?P<chain>\d+)"
    r"-len(?P<length>\d+)/task(?P<position>\d+)$"
)


@dataclass(frozen=True)
class CookingSettings:
    """The ``tw-cooking`` settings of a domain's games (all games need opening, cooking and cutting)."""

    rooms: int = 6
    """Locations in the house (``--go``): one of :data:`ROOM_CHOICES`."""
    ingredients: int = 1
    """Ingredients per recipe (``--recipe`` and ``--take``: every one must be found), 1 to :data:`MAX_INGREDIENTS`."""

    def __post_init__(self) -> None:
        if self.rooms not in ROOM_CHOICES or isinstance(self.rooms, bool):
            raise InvalidConfigError(
                f"rooms={self.rooms!r} is not one of {ROOM_CHOICES} (the houses tw-cooking builds)."
            )
        if isinstance(self.ingredients, bool) or self.ingredients not in range(1, MAX_INGREDIENTS + 1):
            raise InvalidConfigError(
                f"ingredients={self.ingredients!r} must be an integer from 1 to {MAX_INGREDIENTS} (tw-cooking recipes)."
            )

    @property
    def key(self) -> str:
        """The settings part of a task id: ``rooms6-ingredients1``."""
        return f"rooms{self.rooms}-ingredients{self.ingredients}"

    def challenge_settings(self, split: str, recipe_seed: int) -> dict[str, Any]:
        """The settings dict :func:`textworld.challenges.tw_cooking.make` takes."""
        return {
            "recipe": self.ingredients,
            "take": self.ingredients,
            "go": self.rooms,
            "open": True,
            "cook": True,
            "cut": True,
            "drop": False,  # with drop, tw-cooking sets no walkthrough (a noted bug in its make())
            "recipe_seed": recipe_seed,
            "split": split,
        }


def check_split(split: str) -> None:
    """Raise :class:`InvalidConfigError` unless ``split`` is one of :data:`SPLITS`."""
    if split not in SPLITS:
        raise InvalidConfigError(f"split={split!r} is not one of {SPLITS}.{suggest(str(split), SPLITS)}")


def cache_root(settings: CookingSettings, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder of ``settings``' games: ``<cache>/textworld-cooking/tw<version>-gen<N>-<settings key>``."""
    import textworld

    base = cache_dir if cache_dir is not None else os.environ.get(CACHE_ENV_VAR, DEFAULT_CACHE_DIR)
    key = f"tw{textworld.__version__}-gen{GENERATOR_VERSION}-{settings.key}"
    return Path(base).expanduser() / CACHE_SUBDIR / key


def chain_tasks(
    settings: CookingSettings, split: str, index: int, chain_length: int, generator_seed: int = 0
) -> tuple[TaskSpec, ...]:
    """The task specs of chain ``index`` of ``split`` (no game is made: :func:`chain_games` does that on load).

    Raises:
        InvalidConfigError: an unknown split, or a chain index or length out of range.
    """
    check_split(split)
    check_count("chain", index, 0)
    check_count("chain_length", chain_length, 1)
    check_count("generator_seed", generator_seed, 0)
    if chain_length > RECIPE_TRIES:
        raise InvalidConfigError(
            f"chain_length={chain_length} is above {RECIPE_TRIES}, the recipes tried per house; use a shorter chain."
        )
    scenario = f"{settings.key}/{split}/seed{generator_seed}/chain{index}"
    return tuple(
        TaskSpec(
            task_id=f"{scenario}-len{chain_length}/task{position}",
            task_type=TASK_TYPE,
            scenario=scenario,
            extra={"split": split, "chain": str(index), "length": str(chain_length), "position": str(position)},
        )
        for position in range(chain_length)
    )


def parse_task_id(task_id: str) -> tuple[CookingSettings, str, int, int, int, int]:
    """``(settings, split, generator_seed, chain, chain_length, position)`` of a task id of :func:`chain_tasks`.

    Raises:
        InvalidConfigError: ``task_id`` is not one.
    """
    match = _TASK_ID_RE.match(task_id)
    if match is None:
        raise InvalidConfigError(
            f"task id {task_id!r} is not a TextWorld cooking task id "
            "(rooms<R>-ingredients<I>/<split>/seed<S>/chain<C>-len<L>/task<P>, as chain_tasks() makes)."
        )
    rooms, ingredients = map(int, re.findall(r"\d+", match["settings"]))
    settings = CookingSettings(rooms=rooms, ingredients=ingredients)
    check_split(match["split"])
    fields = (int(match[name]) for name in ("seed", "chain", "length", "position"))
    return (settings, match["split"], *fields)


def game_file(task_id: str, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The compiled game of a task id of :func:`chain_tasks`, made (and cached) on first use."""
    settings, split, seed, chain, length, position = parse_task_id(task_id)
    return chain_games(settings, split, chain, length, seed, cache_dir)[position]


def walkthrough(game_path: str | os.PathLike[str]) -> list[str]:
    """The walkthrough ``tw-cooking`` wrote into a game's metadata (``game.json`` next to ``game.z8``)."""
    return _metadata(str(Path(game_path).with_suffix(".json")))["walkthrough"]


def recipe(game_path: str | os.PathLike[str]) -> list[list[str]]:
    """The game's recipe as ``[food, cooking, cutting]`` triples (``["red apple", "roasted", "diced"]``)."""
    return [list(item) for item in _metadata(str(Path(game_path).with_suffix(".json")))["ingredients"]]


@functools.lru_cache(maxsize=1024)
def _metadata(json_path: str) -> dict[str, Any]:
    return json.loads(Path(json_path).read_text())["metadata"]


def chain_games(
    settings: CookingSettings,
    split: str,
    index: int,
    chain_length: int,
    generator_seed: int = 0,
    cache_dir: str | os.PathLike[str] | None = None,
) -> list[Path]:
    """The compiled games of chain ``index``: one house, ``chain_length`` distinct recipes (cached).

    Raises:
        GameGenerationError: no house of :data:`HOUSE_ATTEMPTS` offers ``chain_length`` distinct recipes.
    """
    chain_tasks(settings, split, index, chain_length, generator_seed)  # validates the arguments
    root = cache_root(settings, cache_dir) / split
    index_file = root / f"chains-seed{generator_seed}" / f"chain-{index}-len{chain_length}.json"
    if index_file.is_file():
        found = json.loads(index_file.read_text())
        games = [root / f"house-{found['house']}" / f"recipe-{r}" / GAME_FILE for r in found["recipe_seeds"]]
        if all(game.is_file() for game in games):
            return games
    for attempt in range(HOUSE_ATTEMPTS):
        house = house_seed(split, index, attempt, generator_seed)
        recipe_seeds = _distinct_recipes(settings, split, house, chain_length, root)
        if recipe_seeds is not None:
            _write_json(index_file, {"house": house, "recipe_seeds": recipe_seeds})
            return [root / f"house-{house}" / f"recipe-{r}" / GAME_FILE for r in recipe_seeds]
    raise GameGenerationError(
        f"chain {index} of split {split!r} ({settings.key}): none of {HOUSE_ATTEMPTS} houses offers {chain_length} "
        f"distinct recipes among recipe seeds 1..{RECIPE_TRIES}; use a shorter chain_length."
    )


def house_seed(split: str, index: int, attempt: int, generator_seed: int = 0) -> int:
    """The world seed of chain ``index``'s ``attempt``-th house, from the split's own stream."""
    state = np.random.SeedSequence([generator_seed, _SPLIT_CODE[split], index, attempt]).generate_state(1)
    return int(state[0] % 2**31)


def _distinct_recipes(settings: CookingSettings, split: str, house: int, count: int, root: Path) -> list[int] | None:
    """The first ``count`` recipe seeds of ``house`` whose recipes differ, their games compiled; None if too few."""
    kept: list[int] = []
    recipes: list[list[list[str]]] = []
    for recipe_seed in range(1, RECIPE_TRIES + 1):
        folder = root / f"house-{house}" / f"recipe-{recipe_seed}"
        if (folder / GAME_FILE).is_file():
            dish = recipe(folder / GAME_FILE)
            game = None
        else:
            game = _make_game(settings, split, house, recipe_seed)
            dish = [list(item) for item in game.metadata["ingredients"]]
        if dish in recipes:
            continue
        if game is not None:
            _compile(game, folder)
        kept.append(recipe_seed)
        recipes.append(dish)
        if len(kept) == count:
            return kept
    return None


def _make_game(settings: CookingSettings, split: str, house: int, recipe_seed: int) -> Any:
    import textworld
    from textworld.challenges.tw_cooking import cooking

    options = textworld.GameOptions()
    options.seeds = house  # one int: TextWorld derives the map, objects, quest and grammar seeds from it
    return cooking.make(settings.challenge_settings(split, recipe_seed), options)


def _compile(game: Any, folder: Path) -> None:
    """Compile ``game`` into ``folder`` atomically (a private temporary folder renamed into place)."""
    import textworld

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    tmp.mkdir()
    try:
        options = textworld.GameOptions()
        options.path = str(tmp / GAME_FILE)
        options.force_recompile = True
        textworld.generator.compile_game(game, options)
        try:
            os.rename(tmp, folder)
        except OSError:
            if not (folder / GAME_FILE).is_file():  # another process won the race only if its game is there
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def check_count(name: str, value: object, minimum: int) -> None:
    """Raise :class:`InvalidConfigError` unless ``value`` is an integer (not a bool) of at least ``minimum``."""
    # bool is an int subclass; chain True would silently mean chain 1.
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        raise InvalidConfigError(f"{name}={value!r} must be an integer >= {minimum}.")
