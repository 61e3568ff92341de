"""Seeded, engine-checked ALFWorld games built from the 120 scene layouts shipped in the ``alfworld`` wheel.

Two stages, so that listing a split is cheap and the engine runs only for games that are actually played:

1. :func:`chain_tasks` / :func:`generated_tasks` draw task *specs* (household, task type, object, receptacle,
   task sentence) with :class:`numpy.random.Generator` seeded from ``(seed, split, chain)``; no engine, no
   disk.
2. :func:`generate_game` turns one spec into a game folder (``game.tw-pddl`` + ``traj_data.json``, the layout
   of the official ``json_2.1.1`` games), places the objects with a generator seeded from
   ``(seed, split, chain, position, attempt)``, plays a walkthrough on the native engine
   (:class:`~sage_envs.domains.alfworld.native_engine.NativeAlfworldGame`, whose transcripts equal TextWorld's
   PDDL engine's step by step: tests/sage_envs/domains/test_native_engine.py) and keeps the game only when the
   engine reports the win. The folder is cached and written atomically.

Splits are by scene: :data:`UNSEEN_SCENES` are used by ``valid_unseen`` only; ``train`` and ``valid_seen``
share the other scenes with different seeds. See docs/alfworld_generation.md.

``command_grammar`` chooses the words of the games (:data:`COMMAND_GRAMMAR_CHOICES`): the wheel's grammar
("move X to Y", the default), the official games' ("put X in/on Y"), or a mix, each chain drawing one. The
grammar changes no draw: a chain has the same tasks and households whatever its grammar.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from sage_envs.domain import SPLITS, TaskSpec
from sage_envs.domains.alfworld import scenes
from sage_envs.domains.alfworld.official import GAME_FILE, TASK_TYPES, TRAJ_FILE
from sage_envs.domains.alfworld.scenes import TaskParams
from sage_envs.error import GameGenerationError, InvalidConfigError, suggest

__all__ = [
    "COMMAND_GRAMMAR_CHOICES",
    "GENERATOR_VERSION",
    "NUM_CHAINS",
    "SAME_TYPE_PROB",
    "UNSEEN_SCENES",
    "chain_grammar",
    "chain_tasks",
    "check_command_grammar",
    "game_folder",
    "generate_game",
    "generated_tasks",
    "scene_split",
]

GENERATOR_VERSION = "1"
"""Bumped whenever the games written for the same spec change; it names the cache folder."""

NUM_CHAINS = {"train": 2000, "valid_seen": 200, "valid_unseen": 200}
"""Default number of chains per split (an index range: chains are drawn on demand)."""

# Every fifth scene of each room type, except that ALFWorld's own valid_unseen households
# (FloorPlan10/219/308/424, the 134 official valid_unseen games) replace their neighbour (220, 310, 425): a
# model trained on generated games can then still be evaluated on the official valid_unseen split without
# having seen its households.
UNSEEN_SCENES = tuple(
    f"FloorPlan{n}"
    for n in (5, 10, 15, 20, 25, 30)
    + (205, 210, 215, 219, 225, 230)
    + (305, 308, 315, 320, 325, 330)
    + (405, 410, 415, 420, 424, 430)
)
"""The 24 scenes of ``valid_unseen`` (6 per room type), never used by ``train`` or ``valid_seen``."""

SAME_TYPE_PROB = 0.5
"""Chance that a chain's next task has the previous task's type (with a different object or receptacle)."""

MAX_ATTEMPTS = 5
"""Placements tried per task before :func:`generate_game` gives up."""

COMMAND_GRAMMAR_CHOICES = (*scenes.COMMAND_GRAMMARS, "mixed")
"""Values of ``command_grammar``: a grammar of :data:`~sage_envs.domains.alfworld.scenes.COMMAND_GRAMMARS`
for every chain (``wheel``: "move X to Y"; ``official``: "put X in/on Y"), or ``mixed``: each chain draws one
(:func:`chain_grammar`)."""

CACHE_ENV_VAR = "SAGE_CACHE_DIR"
DEFAULT_CACHE_DIR = "~/.cache/sage_envs"
CACHE_SUBDIR = "alfworld-generated"

_SPLIT_CODE = {split: code for code, split in enumerate(SPLITS)}
# The last entry of the seed of a mixed chain's grammar draw: its own stream, apart from the chain's draws
# (seeded by 3 numbers) and the placements' (5). Not 0: numpy pads a short seed with zeros, so a trailing 0
# would give the chain's own stream.
_GRAMMAR_STREAM = 0x6772616D
_PARAM_KEYS = ("object_target", "parent_target", "toggle_target")
T = TypeVar("T")


def scene_split(scene: str) -> str:
    """``"valid_unseen"`` for a scene of :data:`UNSEEN_SCENES`, else ``"seen"`` (``train``, ``valid_seen``).

    Raises:
        InvalidConfigError: for a name that is not one of the 120 shipped scenes.
    """
    if scene not in scenes.ALL_SCENES:
        raise InvalidConfigError(
            f"scene={scene!r} is not a shipped ALFWorld layout (FloorPlan1-30, 201-230, 301-330, 401-430)."
            + suggest(scene, scenes.ALL_SCENES)
        )
    return "valid_unseen" if scene in UNSEEN_SCENES else "seen"


@functools.cache
def _scenes_for(split: str, task_type: str) -> tuple[str, ...]:
    """The split's scenes where ``task_type`` has at least one valid task."""
    partition = "valid_unseen" if split == "valid_unseen" else "seen"
    return tuple(
        s
        for s in scenes.ALL_SCENES
        if scene_split(s) == partition and any(p.task_type == task_type for p in scenes.valid_tasks(s))
    )


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise InvalidConfigError(f"split={split!r} is not one of {SPLITS}.{suggest(str(split), SPLITS)}")


def _check_count(name: str, value: object, minimum: int) -> None:
    # bool is an int subclass; chain True would silently mean chain 1.
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        raise InvalidConfigError(f"{name}={value!r} must be an integer >= {minimum}.")


def check_command_grammar(command_grammar: str) -> None:
    """Raise :class:`InvalidConfigError` unless ``command_grammar`` is one of :data:`COMMAND_GRAMMAR_CHOICES`."""
    if command_grammar not in COMMAND_GRAMMAR_CHOICES:
        raise InvalidConfigError(
            f"command_grammar={command_grammar!r} is not one of {COMMAND_GRAMMAR_CHOICES}: 'wheel' (move X to Y, "
            "the default), 'official' (put X in/on Y, as the official games) or 'mixed' (each chain draws one)."
            + suggest(str(command_grammar), COMMAND_GRAMMAR_CHOICES)
        )


def chain_grammar(command_grammar: str, split: str, index: int, seed: int = 0) -> str:
    """The grammar (a key of ``scenes.COMMAND_GRAMMARS``) that chain ``index`` of ``split`` speaks.

    ``command_grammar`` itself, except ``mixed``: then one grammar drawn uniformly for the whole chain from
    ``(seed, split, index)``, so the same chain always speaks the same grammar. One grammar per chain, not per
    game: a skill written in a chain's first task is called in its later ones, as in an official chain (one
    household), where every game speaks the official grammar.

    Raises:
        InvalidConfigError: for an unknown ``command_grammar`` or split, or a bad index or seed.
    """
    check_command_grammar(command_grammar)
    _check_split(split)
    _check_count("index", index, 0)
    _check_count("seed", seed, 0)
    if command_grammar != "mixed":
        return command_grammar
    rng = np.random.default_rng([int(seed), _SPLIT_CODE[split], int(index), _GRAMMAR_STREAM])
    return _pick(rng, tuple(scenes.COMMAND_GRAMMARS))


def _pick(rng: np.random.Generator, items: Sequence[T]) -> T:
    return items[int(rng.integers(len(items)))]


def _touches(params: TaskParams) -> set[str]:
    """The object and receptacle types a task handles: shared ones make two tasks' routines overlap."""
    touched = {params.object_target, params.parent_target, params.toggle_target}
    touched.add(scenes.APPLIANCE.get(params.task_type, ""))
    return touched - {""}


def _next_params(rng: np.random.Generator, scene: str, chain: list[TaskParams]) -> TaskParams:
    """The next task of a chain in ``scene``: related to the previous one, new to the chain when possible.

    With probability :data:`SAME_TYPE_PROB` it keeps the previous task type; otherwise it switches type and
    prefers a task that shares an object, goal receptacle or appliance type with the previous task.
    """
    everything = scenes.valid_tasks(scene)
    fresh = [p for p in everything if p not in chain] or list(everything)
    previous = chain[-1]
    same = [p for p in fresh if p.task_type == previous.task_type]
    other = [p for p in fresh if p.task_type != previous.task_type]
    if same and (not other or rng.random() < SAME_TYPE_PROB):
        return _pick(rng, same)
    overlapping = [p for p in other if _touches(p) & _touches(previous)]
    return _pick(rng, overlapping or other)


def chain_tasks(
    split: str, index: int, chain_length: int, seed: int = 0, command_grammar: str = "wheel"
) -> tuple[TaskSpec, ...]:
    """Chain ``index`` of ``split``: ``chain_length`` related tasks in one household, without the engine.

    The first task's type is uniform over the six types, its scene uniform over the split's scenes that
    support it, its object/receptacle uniform over that scene's valid tasks; later tasks follow
    :func:`_next_params`. Draws are sequential, so a longer chain extends a shorter one with the same
    arguments.

    Args:
        split: ``train``, ``valid_seen`` or ``valid_unseen``.
        index: the chain number, >= 0 (any index is valid; :data:`NUM_CHAINS` only sets the default range).
        chain_length: tasks per chain, >= 1.
        seed: the base seed; another seed gives other chains (and other game folders).
        command_grammar: the words of the chain's games (:data:`COMMAND_GRAMMAR_CHOICES`); it changes no draw.

    Returns:
        TaskSpecs with ``task_id``
        ``<scene>/<split>-<index:06d>-<position>/<type>-<object>-None-<receptacle>``, ``scenario`` the scene,
        and ``extra`` holding strings: ``split``, ``chain``, ``position``, ``seed``, ``scene``, ``room``,
        ``task_type``, ``object_target``, ``parent_target``, ``toggle_target``, ``description`` (the task
        sentence the game will show) and ``command_grammar`` (the chain's grammar, :func:`chain_grammar`).

    Raises:
        InvalidConfigError: for an unknown split or grammar, or a negative / non-integer index, length or seed.
    """
    grammar = chain_grammar(command_grammar, split, index, seed)
    _check_count("chain_length", chain_length, 1)
    return _drawn_chain(split, int(index), chain_length, int(seed), grammar)


@functools.cache  # every env lists all chains of its split (the 2,000 train chains took ~1.4 s each time)
def _drawn_chain(split: str, index: int, chain_length: int, seed: int, grammar: str) -> tuple[TaskSpec, ...]:
    """:func:`chain_tasks` once its arguments are checked (``grammar``: the chain's own, resolved)."""
    rng = np.random.default_rng([seed, _SPLIT_CODE[split], index])

    task_type = _pick(rng, TASK_TYPES)
    scene = _pick(rng, _scenes_for(split, task_type))
    chain = [_pick(rng, [p for p in scenes.valid_tasks(scene) if p.task_type == task_type])]
    while len(chain) < chain_length:
        chain.append(_next_params(rng, scene, chain))

    specs = []
    for position, params in enumerate(chain):
        template = int(rng.integers(2))
        extra = {
            "split": split,
            "chain": str(index),
            "position": str(position),
            "seed": str(seed),
            "scene": scene,
            "room": scenes.room_type(scene),
            "task_type": params.task_type,
            **{key: getattr(params, key) for key in _PARAM_KEYS},
            "description": params.sentence(template),
            "command_grammar": grammar,
        }
        task_id = f"{scene}/{split}-{int(index):06d}-{position}/{params.name}"
        specs.append(TaskSpec(task_id=task_id, task_type=params.task_type, scenario=scene, extra=extra))
    return tuple(specs)


def generated_tasks(
    split: str, chain_length: int, seed: int = 0, num_chains: int | None = None, command_grammar: str = "wheel"
) -> list[TaskSpec]:
    """All tasks of the split's first ``num_chains`` chains (default :data:`NUM_CHAINS`), chain after chain.

    Raises:
        InvalidConfigError: for an unknown split or grammar, or a bad length, seed or ``num_chains``.
    """
    _check_split(split)
    check_command_grammar(command_grammar)
    count = NUM_CHAINS[split] if num_chains is None else num_chains
    _check_count("num_chains", count, 0)
    return [task for index in range(count) for task in chain_tasks(split, index, chain_length, seed, command_grammar)]


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where this generator version keeps its games: ``<cache>/alfworld-generated/<GENERATOR_VERSION>``.

    ``<cache>`` is ``cache_dir``, else ``$SAGE_CACHE_DIR``, else ``~/.cache/sage_envs``.
    """
    base = cache_dir if cache_dir is not None else os.environ.get(CACHE_ENV_VAR, DEFAULT_CACHE_DIR)
    return Path(base).expanduser() / CACHE_SUBDIR / GENERATOR_VERSION


def game_folder(task: TaskSpec, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where :func:`generate_game` keeps ``task``'s game: one folder per seed and grammar.

    The grammar is part of the key, so games of two grammars never share a folder; the wheel's games keep the
    folder they had before grammars could be chosen (``seed-<seed>``), so existing caches stay valid.

    Raises:
        InvalidConfigError: when ``task`` was not made by :func:`chain_tasks`.
    """
    *_, seed, _, grammar = _spec_fields(task)
    suffix = "" if grammar == "wheel" else f"-{grammar}"
    return cache_root(cache_dir) / f"seed-{seed}{suffix}" / task.task_id


def _spec_fields(task: TaskSpec) -> tuple[str, int, int, int, TaskParams, str]:
    """``(split, chain, position, seed, params, grammar)`` from a spec made by :func:`chain_tasks`."""
    try:
        split, extra = task.extra["split"], task.extra
        fields = int(extra["chain"]), int(extra["position"]), int(extra["seed"])
        params = TaskParams(task.task_type, *(extra[key] for key in _PARAM_KEYS))
        grammar = extra["command_grammar"]
    except (KeyError, ValueError) as err:
        raise InvalidConfigError(
            f"task {task.task_id!r} was not made by chain_tasks(): its extra lacks {err}; build generated "
            "tasks with chain_tasks() or generated_tasks()."
        ) from None
    _check_split(split)
    if grammar not in scenes.COMMAND_GRAMMARS:
        raise InvalidConfigError(
            f"task {task.task_id!r} has command_grammar={grammar!r}, not one of {tuple(scenes.COMMAND_GRAMMARS)} "
            "(a chain's resolved grammar); build generated tasks with chain_tasks() or generated_tasks()."
        )
    return (split, *fields, params, grammar)


def _game_files(task: TaskSpec, params: TaskParams, attempt: int) -> tuple[dict, dict, list[str]]:
    """The game file, the traj_data (walkthrough still unverified) and the walkthrough for one attempt."""
    split, chain, position, seed, _, grammar_name = _spec_fields(task)
    scene = scenes.load_scene(task.extra["scene"])
    rng = np.random.default_rng([seed, _SPLIT_CODE[split], chain, position, attempt])
    household = scenes.sample_household(scene, params, rng)
    files = scenes.COMMAND_GRAMMARS[grammar_name]
    grammar = files.grammar.read_text().replace("UNKNOWN GOAL", task.extra["description"])
    game = {
        "pddl_domain": files.pddl_domain.read_text(),
        "grammar": grammar,
        "pddl_problem": scenes.problem_pddl(household, params, f"plan_{split}_{chain:06d}_{position}"),
        "solvable": True,
    }
    walkthrough = scenes.walkthrough(household, params, grammar)
    traj = {
        "task_id": task.task_id,
        "task_type": params.task_type,
        "pddl_params": {
            "mrecep_target": "",
            "object_sliced": False,
            "object_target": params.object_target,
            "parent_target": params.parent_target,
            "toggle_target": params.toggle_target,
        },
        "scene": {"floor_plan": scene.name, "scene_num": int(scene.name.removeprefix("FloorPlan"))},
        # ALFWorld's loader may draw the sentence from the annotations; this is the one in the grammar.
        "turk_annotations": {"anns": [{"task_desc": task.extra["description"]}]},
        "walkthrough": walkthrough,
        "generator": {
            "version": GENERATOR_VERSION,
            "seed": seed,
            "split": split,
            "chain": chain,
            "position": position,
            "attempt": attempt,
            "command_grammar": grammar_name,
        },
    }
    return game, traj, walkthrough


def play_walkthrough(game_dir: Path, walkthrough: Sequence[str]) -> bool:
    """Whether the engine accepts every command of ``walkthrough`` and reports the win after the last only."""
    # The native engine plays the same transcript as TextWorld's (differential tests) in milliseconds, not seconds.
    from sage_envs.domains.alfworld.native_engine import NativeAlfworldGame

    game = NativeAlfworldGame(game_dir)
    try:
        game.reset()
        for step, command in enumerate(walkthrough, start=1):
            if command not in game.admissible_commands():
                return False
            if game.step(command).won != (step == len(walkthrough)):
                return False
        return bool(walkthrough)
    finally:
        game.close()


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=1) + "\n")


def generate_game(task: TaskSpec, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder of ``task``'s game, written and verified on first use, then read from the cache.

    The folder is ``cache_root(cache_dir)/seed-<seed>/<task_id>`` for the wheel's grammar and
    ``cache_root(cache_dir)/seed-<seed>-<grammar>/<task_id>`` for another (:func:`game_folder`), holding
    ``game.tw-pddl`` and ``traj_data.json``. It is built in a private temporary folder and renamed into place,
    so readers never see a half-written game and concurrent callers (threads or processes) agree: the first
    rename wins, the others discard their copy. A placement whose walkthrough the engine does not win is redrawn
    (attempt 1, 2, ...).

    Raises:
        InvalidConfigError: when ``task`` was not made by :func:`chain_tasks`.
        GameGenerationError: when no attempt out of :data:`MAX_ATTEMPTS` gives a game the engine wins.
    """
    split, chain, position, seed, params, _ = _spec_fields(task)
    game_dir = game_folder(task, cache_dir)
    if (game_dir / GAME_FILE).is_file() and (game_dir / TRAJ_FILE).is_file():
        return game_dir

    game_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = game_dir.parent / f".{game_dir.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    tmp.mkdir()
    try:
        for attempt in range(MAX_ATTEMPTS):
            game, traj, walkthrough = _game_files(task, params, attempt)
            _write_json(tmp / GAME_FILE, game)
            if play_walkthrough(tmp, walkthrough):
                _write_json(tmp / TRAJ_FILE, traj)
                break
        else:
            raise GameGenerationError(
                f"generate_game: no winnable game for {task.task_id!r} in {MAX_ATTEMPTS} placements "
                f"(split={split}, chain={chain}, position={position}, seed={seed}); this is a generator bug."
            )
        try:
            os.rename(tmp, game_dir)
        except OSError:
            # Another caller renamed its (identical, deterministic) copy first.
            if not (game_dir / TRAJ_FILE).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return game_dir
