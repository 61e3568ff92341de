from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from sage_envs.domain import TaskSpec
from sage_envs.domains.alfworld import generator, scenes
from sage_envs.domains.alfworld.official import GAME_FILE, TASK_TYPES, TRAJ_FILE
from sage_envs.error import InvalidConfigError, SageError

ROOT = Path(__file__).resolve().parents[3]


def first_task(split: str, task_type: str, room: str | None = None) -> TaskSpec:
    """The first generated task of ``task_type`` (in ``room``) among the split's chains of length 2."""
    for task in generator.generated_tasks(split, 2, num_chains=200):
        if task.task_type == task_type and room in (None, task.extra["room"]):
            return task
    raise AssertionError(f"no {task_type} task in {split}")


def read_game(game_dir: Path) -> tuple[dict, dict]:
    return json.loads((game_dir / GAME_FILE).read_text()), json.loads((game_dir / TRAJ_FILE).read_text())


# ---------------------------------------------------------------- specs (no engine)


def test_unseen_scenes_cover_official_valid_unseen_and_are_disjoint() -> None:
    assert len(generator.UNSEEN_SCENES) == 24
    assert {"FloorPlan10", "FloorPlan219", "FloorPlan308", "FloorPlan424"} <= set(generator.UNSEEN_SCENES)
    per_room = collections.Counter(scenes.room_type(s) for s in generator.UNSEEN_SCENES)
    assert set(per_room.values()) == {6}
    for split in ("train", "valid_seen", "valid_unseen"):
        used = {t.scenario for t in generator.generated_tasks(split, 2)}
        if split == "valid_unseen":
            assert used <= set(generator.UNSEEN_SCENES)
        else:
            assert not used & set(generator.UNSEEN_SCENES)
    assert generator.scene_split("FloorPlan10") == "valid_unseen"
    assert generator.scene_split("FloorPlan11") == "seen"


@pytest.mark.parametrize("split", ["train", "valid_unseen"])
def test_every_task_type_is_drawn_in_every_partition(split: str) -> None:
    types = {t.task_type for t in generator.generated_tasks(split, 2, num_chains=100)}
    assert types == set(TASK_TYPES)


def test_specs_are_deterministic_and_prefix_consistent() -> None:
    a = generator.chain_tasks("train", 42, 3, seed=7)
    b = generator.chain_tasks("train", 42, 3, seed=7)
    assert a == b and [dict(t.extra) for t in a] == [dict(t.extra) for t in b]
    assert generator.chain_tasks("train", 42, 2, seed=7) == a[:2]
    assert generator.chain_tasks("train", 42, 3, seed=8) != a


def test_chain_shape_and_ids() -> None:
    chain = generator.chain_tasks("valid_seen", 42, 3)
    assert len({t.scenario for t in chain}) == 1
    for position, task in enumerate(chain):
        scene = task.scenario
        assert task.task_id.startswith(f"{scene}/valid_seen-000042-{position}/{task.task_type}-")
        assert task.extra["split"] == "valid_seen" and task.extra["chain"] == "42"
        assert task.extra["position"] == str(position) and task.extra["seed"] == "0"
        assert all(isinstance(v, str) for v in task.extra.values())
        assert task.task_type in TASK_TYPES
    tasks = generator.generated_tasks("valid_seen", 3, num_chains=5)
    assert len(tasks) == 15 and len({t.task_id for t in tasks}) == 15


def test_chains_are_related() -> None:
    same_type = related = pairs = 0
    for index in range(300):
        first, second = generator.chain_tasks("train", index, 2)
        a = scenes.TaskParams(first.task_type, *(first.extra[k] for k in generator._PARAM_KEYS))
        b = scenes.TaskParams(second.task_type, *(second.extra[k] for k in generator._PARAM_KEYS))
        assert a != b  # every household has more than one valid task
        pairs += 1
        same_type += a.task_type == b.task_type
        related += a.task_type == b.task_type or bool(generator._touches(a) & generator._touches(b))
    # Same type with probability SAME_TYPE_PROB (more only in a room with a single valid type).
    assert 0.4 <= same_type / pairs <= 0.65
    assert related / pairs >= 0.9


def test_train_and_valid_seen_draw_different_chains() -> None:
    train = [generator.chain_tasks("train", i, 2) for i in range(50)]
    valid = [generator.chain_tasks("valid_seen", i, 2) for i in range(50)]
    key = lambda chain: [(t.scenario, t.task_type, t.extra["object_target"]) for t in chain]  # noqa: E731
    assert sum(key(a) == key(b) for a, b in zip(train, valid, strict=True)) < 5


@pytest.mark.parametrize(
    "call",
    [
        lambda: generator.chain_tasks("test", 0, 2),
        lambda: generator.chain_tasks("train", -1, 2),
        lambda: generator.chain_tasks("train", "3", 2),
        lambda: generator.chain_tasks("train", True, 2),
        lambda: generator.chain_tasks("train", 0, 0),
        lambda: generator.chain_tasks("train", 0, 2, seed=-1),
        lambda: generator.generated_tasks("valid", 2),
        lambda: generator.generated_tasks("train", 2, num_chains=-5),
        lambda: generator.scene_split("FloorPlan31"),
        lambda: generator.generate_game(TaskSpec("x", "pick_and_place_simple", "FloorPlan1")),
    ],
)
def test_bad_arguments_raise_invalid_config(call) -> None:
    with pytest.raises(InvalidConfigError):
        call()


def test_split_error_suggests_a_name() -> None:
    with pytest.raises(InvalidConfigError, match="valid_seen"):
        generator.chain_tasks("valid_sen", 0, 2)


def test_valid_tasks_follow_alfred_rules() -> None:
    for name in scenes.ALL_SCENES:
        scene = scenes.load_scene(name)
        assert len({r.id for r in scene.receptacles}) == len(scene.receptacles)
        for params in scenes.valid_tasks(name):
            assert scene.room in scenes.constants.GOALS_VALID[params.task_type]
            if params.task_type == "look_at_obj_in_light":
                assert scene.has_lamp and params.toggle_target == "DeskLamp"
                continue
            assert params.object_target in scenes.CAN_CONTAIN[params.parent_target]
            assert params.parent_target != scenes.APPLIANCE.get(params.task_type)
            if params.task_type in scenes.APPLIANCE:
                assert scenes.APPLIANCE[params.task_type] in scene.receptacle_types


def test_household_never_starts_won() -> None:
    rng = np.random.default_rng(0)
    for name in ("FloorPlan1", "FloorPlan205", "FloorPlan301", "FloorPlan401"):
        scene = scenes.load_scene(name)
        for params in scenes.valid_tasks(name)[::7]:
            household = scenes.sample_household(scene, params, rng)
            targets = [o for o in household.objects if o.otype == params.object_target]
            assert len(targets) >= (2 if params.task_type == "pick_two_obj_and_place" else 1)
            assert all(o.receptacle.rtype != params.parent_target for o in targets)
            assert len({o.id for o in household.objects}) == len(household.objects)
            assert household.agent_location not in {r.location for r in scene.receptacles}


def test_game_files_do_not_depend_on_the_process() -> None:
    # String hashing is salted per process: a set iterated unsorted somewhere would change the bytes.
    task = first_task("train", "pick_heat_then_place_in_recep")
    params = scenes.TaskParams(task.task_type, *(task.extra[k] for k in generator._PARAM_KEYS))
    script = textwrap.dedent(
        f"""
        import json
        from sage_envs.domains.alfworld import generator, scenes
        task = generator.chain_tasks("train", {task.extra["chain"]}, 2)[{task.extra["position"]}]
        params = scenes.TaskParams(task.task_type, *(task.extra[k] for k in generator._PARAM_KEYS))
        print(json.dumps(generator._game_files(task, params, 0)))
        """
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == json.dumps(generator._game_files(task, params, 0))


# ---------------------------------------------------------------- games (engine)


def test_game_bytes_are_deterministic(tmp_path: Path) -> None:
    task = first_task("valid_unseen", "pick_and_place_simple", room="Bathroom")
    a = generator.generate_game(task, tmp_path / "a")
    b = generator.generate_game(task, tmp_path / "b")
    assert a.relative_to(tmp_path / "a") == b.relative_to(tmp_path / "b")
    for name in (GAME_FILE, TRAJ_FILE):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert a == generator.cache_root(tmp_path / "a") / "seed-0" / task.task_id


def test_cache_is_reused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = first_task("valid_unseen", "pick_two_obj_and_place", room="Bathroom")
    game_dir = generator.generate_game(task, tmp_path)
    stamps = {name: (game_dir / name).stat().st_mtime_ns for name in (GAME_FILE, TRAJ_FILE)}

    def no_engine(*args, **kwargs):
        raise AssertionError("the cached game was regenerated")

    monkeypatch.setattr(generator, "play_walkthrough", no_engine)
    assert generator.generate_game(task, tmp_path) == game_dir
    assert stamps == {name: (game_dir / name).stat().st_mtime_ns for name in (GAME_FILE, TRAJ_FILE)}
    monkeypatch.setenv(generator.CACHE_ENV_VAR, str(tmp_path))
    assert generator.generate_game(task) == game_dir


def test_failed_placement_is_redrawn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = first_task("train", "pick_and_place_simple")
    verdicts = iter([False, True])
    monkeypatch.setattr(generator, "play_walkthrough", lambda game_dir, walkthrough: next(verdicts))
    _, traj = read_game(generator.generate_game(task, tmp_path))
    assert traj["generator"]["attempt"] == 1

    other = first_task("train", "pick_two_obj_and_place")
    monkeypatch.setattr(generator, "play_walkthrough", lambda game_dir, walkthrough: False)
    with pytest.raises(SageError, match="no winnable game"):
        generator.generate_game(other, tmp_path)
    leftovers = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert not leftovers and not (generator.cache_root(tmp_path) / "seed-0" / other.task_id).exists()


def test_concurrent_generation_yields_one_valid_game(tmp_path: Path) -> None:
    task = first_task("valid_unseen", "look_at_obj_in_light")
    script = textwrap.dedent(
        f"""
        from sage_envs.domains.alfworld import generator
        task = generator.chain_tasks("valid_unseen", {task.extra["chain"]}, 2)[{task.extra["position"]}]
        print(generator.generate_game(task, {str(tmp_path)!r}))
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=120)[0].strip() for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0]
    assert outputs[0] == outputs[1]
    game_dir = Path(outputs[0])
    assert sorted(p.name for p in game_dir.iterdir()) == sorted([GAME_FILE, TRAJ_FILE])
    assert not [p for p in game_dir.parent.iterdir() if p.name.endswith(".tmp")]
    _, traj = read_game(game_dir)
    assert generator.play_walkthrough(game_dir, traj["walkthrough"])


@pytest.mark.slow  # ~45 s: kitchen games take 4-6 s per engine play, and each is played twice
@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_every_task_type_is_won_by_its_stored_walkthrough(tmp_path: Path, task_type: str) -> None:
    task = first_task("valid_seen", task_type)
    game_dir = generator.generate_game(task, tmp_path)
    game, traj = read_game(game_dir)

    assert set(game) == {"pddl_domain", "grammar", "pddl_problem", "solvable"} and game["solvable"] is True
    assert game["pddl_domain"] == scenes.PDDL_DOMAIN_PATH.read_text()
    assert f"Your task is to: {task.extra['description']}." in game["grammar"]
    assert "UNKNOWN GOAL" not in game["grammar"]
    assert traj["task_type"] == task_type and traj["scene"]["floor_plan"] == task.scenario
    assert traj["pddl_params"]["object_target"] == task.extra["object_target"]
    assert traj["generator"]["seed"] == 0 and traj["walkthrough"]
    assert "movable" not in str(game_dir) and "Sliced" not in str(game_dir)
    assert generator.play_walkthrough(game_dir, traj["walkthrough"])


# ---------------------------------------------------------------------------------------------- command grammar
def test_the_grammar_changes_the_put_command_and_nothing_else(tmp_path: Path) -> None:
    from sage_envs.domains.alfworld.native_engine import NativeAlfworldGame

    task = first_task("valid_seen", "pick_and_place_simple")
    index, position = int(task.extra["chain"]), int(task.extra["position"])
    games = {}
    for grammar in ("wheel", "official"):
        spec = generator.chain_tasks("valid_seen", index, position + 1, command_grammar=grammar)[position]
        assert spec.extra["command_grammar"] == grammar and spec.task_id == task.task_id
        assert {k: v for k, v in spec.extra.items() if k != "command_grammar"} == {
            k: v for k, v in task.extra.items() if k != "command_grammar"
        }
        game_dir = generator.generate_game(spec, tmp_path)
        games[grammar] = json.loads((game_dir / GAME_FILE).read_text())
        walkthrough = json.loads((game_dir / TRAJ_FILE).read_text())["walkthrough"]
        game = NativeAlfworldGame(game_dir)
        game.reset()
        for command in walkthrough[:-1]:
            game.step(command)
        puts = [c for c in game.admissible_commands() if c.startswith(("move ", "put "))]
        form = {"wheel": "move {} to {}", "official": "put {} in/on {}"}[grammar]
        assert puts and all(c.startswith(form.split(" {}")[0]) and form.split("{}")[1] in c for c in puts)
        assert walkthrough[-1] in puts and game.step(walkthrough[-1]).won
        game.close()
    assert games["wheel"]["pddl_problem"] == games["official"]["pddl_problem"]  # the same household
    assert games["official"]["pddl_domain"] == scenes.OFFICIAL_PDDL_DOMAIN_PATH.read_text()
    assert games["wheel"]["pddl_domain"] == scenes.PDDL_DOMAIN_PATH.read_text()


def test_mixed_gives_both_grammars_deterministically_and_changes_no_draw() -> None:
    drawn = [generator.chain_grammar("mixed", "train", index) for index in range(200)]
    assert drawn == [generator.chain_grammar("mixed", "train", index) for index in range(200)]
    assert 70 < drawn.count("official") < 130 and set(drawn) == {"wheel", "official"}
    assert drawn != [generator.chain_grammar("mixed", "train", index, seed=1) for index in range(200)]
    for index in range(20):
        mixed = generator.chain_tasks("train", index, 3, command_grammar="mixed")
        wheel = generator.chain_tasks("train", index, 3)
        assert {t.extra["command_grammar"] for t in mixed} == {drawn[index]}  # one grammar per chain
        assert [t.task_id for t in mixed] == [t.task_id for t in wheel]
    assert generator.chain_grammar("official", "train", 0) == "official"
    assert generator.chain_grammar("wheel", "train", 0) == "wheel"


def test_cache_folders_are_keyed_by_grammar(tmp_path: Path) -> None:
    index = next(i for i in range(50) if generator.chain_grammar("mixed", "valid_unseen", i) == "official")
    folders = {
        grammar: generator.game_folder(generator.chain_tasks("valid_unseen", index, 1, command_grammar=grammar)[0])
        for grammar in generator.COMMAND_GRAMMAR_CHOICES
    }
    assert folders["wheel"] != folders["official"] == folders["mixed"]  # mixed: this chain speaks official
    assert (
        folders["wheel"]
        == generator.cache_root() / "seed-0" / generator.chain_tasks("valid_unseen", index, 1)[0].task_id
    )
    assert folders["official"].parent.parent.parent.name == "seed-0-official"


def test_a_bad_grammar_is_a_clear_error() -> None:
    with pytest.raises(
        InvalidConfigError, match=r"command_grammar='offical' is not one of .* Did you mean 'official'\?"
    ):
        generator.chain_tasks("train", 0, 2, command_grammar="offical")
    with pytest.raises(InvalidConfigError, match="command_grammar"):
        generator.generated_tasks("train", 2, num_chains=1, command_grammar="put")
    task = generator.chain_tasks("train", 0, 1)[0]
    for grammar in ("mixed", None):
        extra = {k: v for k, v in task.extra.items() if k != "command_grammar"}
        if grammar:
            extra["command_grammar"] = grammar
        with pytest.raises(InvalidConfigError, match="command_grammar"):
            generator.game_folder(TaskSpec(task.task_id, task.task_type, task.scenario, extra))


@pytest.mark.official
def test_the_shipped_official_grammar_is_the_official_games_own() -> None:
    from .test_alfworld_official import official_data_dir

    game = next((official_data_dir() / "json_2.1.1" / "valid_seen").glob("*/*/game.tw-pddl"))
    data = json.loads(game.read_text())
    goal = data["grammar"].split('"rhs": "Your task is to: ', 1)[1].split('."', 1)[0]
    assert data["grammar"].replace(goal, "UNKNOWN GOAL", 1) == scenes.OFFICIAL_GRAMMAR_PATH.read_text()
    assert data["pddl_domain"] == scenes.OFFICIAL_PDDL_DOMAIN_PATH.read_text()


def test_the_domain_and_the_env_pass_the_grammar_on(tmp_path: Path) -> None:
    import gymnasium as gym

    import sage_envs  # noqa: F401  (registers the envs)
    from sage_envs.domains.alfworld.domain import AlfworldDomain

    domain = AlfworldDomain(cache_dir=tmp_path, command_grammar="mixed")
    chains = domain.chains("valid_seen", 2)
    assert {c[0].extra["command_grammar"] for c in chains} == {"wheel", "official"}
    assert [t.extra["command_grammar"] for t in domain.tasks("valid_seen")[:2]] == [
        chains[0][0].extra["command_grammar"]
    ] * 2
    assert {t.extra["command_grammar"] for c in AlfworldDomain().chains("valid_seen", 2) for t in c} == {"wheel"}
    env = gym.make("SageChain-ALFWorld-v0", split="valid_seen", command_grammar="official", cache_dir=str(tmp_path))
    assert env.unwrapped.domain.command_grammar == "official"
    env.close()
    with pytest.raises(InvalidConfigError, match="did you mean|Did you mean"):
        AlfworldDomain(command_grammar="mixd")
    with pytest.raises(InvalidConfigError, match="official games speak their own"):
        AlfworldDomain(source="official", command_grammar="official")
