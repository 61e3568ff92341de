"""Official ALFWorld game listing (ALFWorld's filters) and the AlfworldDomain plug-in."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from alfworld.agents.environment.alfred_tw_env import TASK_TYPES as ALFWORLD_TASK_TYPES

from sage_envs.domains.alfworld.domain import TASK_TYPES, AlfworldDomain
from sage_envs.domains.alfworld.official import official_games, official_tasks
from sage_envs.domains.alfworld.textworld_engine import AlfworldGame
from sage_envs.error import DataNotFoundError, InvalidConfigError

SHARED_DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "alfworld"


def official_data_dir() -> Path:
    """The folder holding json_2.1.1/ ($ALFWORLD_DATA, else ../shared/alfworld); skips when absent."""
    for candidate in (os.environ.get("ALFWORLD_DATA"), SHARED_DATA):
        if candidate and (Path(candidate) / "json_2.1.1" / "valid_seen").is_dir():
            return Path(candidate)
    pytest.skip("official ALFWorld games not found (set $ALFWORLD_DATA or provide ../shared/alfworld)")


def write_game(root: Path, split: str, task_dir: str, task_type: str = "pick_and_place_simple", **game) -> Path:
    """A fake official game folder: traj_data.json + game.tw-pddl (``game`` = its JSON fields)."""
    folder = root / "json_2.1.1" / split / task_dir / "trial_T0"
    folder.mkdir(parents=True)
    traj = {"task_type": task_type, "scene": {"floor_plan": f"FloorPlan{task_dir.rsplit('-', 1)[-1]}"}}
    (folder / "traj_data.json").write_text(json.dumps(traj))
    if game:
        (folder / "game.tw-pddl").write_text(json.dumps(game))
    return folder


@pytest.fixture
def fake_data(tmp_path: Path) -> Path:
    write_game(tmp_path, "valid_seen", "pick_and_place_simple-Apple-None-Fridge-2", solvable=True)
    write_game(tmp_path, "valid_seen", "pick_and_place_simple-Book-None-Desk-3", solvable=True)
    write_game(
        tmp_path,
        "valid_seen",
        "look_at_obj_in_light-Pen-None-DeskLamp-2",
        "look_at_obj_in_light",
        solvable=True,
    )
    write_game(tmp_path, "valid_seen", "pick_heat_then_place_in_recep-Egg-None-Fridge-2", solvable=False)
    write_game(tmp_path, "valid_seen", "pick_clean_then_place_in_recep-Cup-None-Sink-2")  # no game file
    write_game(tmp_path, "valid_seen", "pick_and_place_with_movable_recep-Pen-Mug-Desk-2", solvable=True)
    write_game(tmp_path, "valid_seen", "pick_and_place_simple-AppleSliced-None-Fridge-2", solvable=True)
    write_game(tmp_path, "valid_seen", "pick_three_obj_and_place-Pen-None-Desk-2", "pick_three_obj", solvable=True)
    write_game(tmp_path, "valid_seen", "pick_cool_then_place_in_recep-Egg-None-Pot-2", other=1)  # no "solvable"
    return tmp_path


def test_task_types_are_alfworlds() -> None:
    assert TASK_TYPES == tuple(ALFWORLD_TASK_TYPES[i] for i in sorted(ALFWORLD_TASK_TYPES))


def test_filters_match_alfworlds_loader(fake_data: Path) -> None:
    names = [game.parent.name for game in official_games(fake_data, "valid_seen")]
    assert names == [
        "look_at_obj_in_light-Pen-None-DeskLamp-2",
        "pick_and_place_simple-Apple-None-Fridge-2",
        "pick_and_place_simple-Book-None-Desk-3",
    ]


def test_tasks_fields(fake_data: Path) -> None:
    tasks = official_tasks(fake_data, "valid_seen")
    assert [t.task_id for t in tasks][0] == "look_at_obj_in_light-Pen-None-DeskLamp-2/trial_T0"
    assert [t.task_type for t in tasks] == [
        "look_at_obj_in_light",
        "pick_and_place_simple",
        "pick_and_place_simple",
    ]
    assert [t.scenario for t in tasks] == ["FloorPlan2", "FloorPlan2", "FloorPlan3"]
    assert all(Path(t.extra["game_path"], "game.tw-pddl").is_file() for t in tasks)


def test_missing_split_names_the_expected_path(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match="ALFWORLD_DATA") as error:
        official_games(tmp_path, "valid_unseen")
    assert str(tmp_path / "json_2.1.1" / "valid_unseen") in str(error.value)


def test_domain_official_tasks_chains_and_load(fake_data: Path) -> None:
    domain = AlfworldDomain(source="official", data_dir=fake_data)
    assert [t.task_id for t in domain.tasks("valid_seen")] == [
        t.task_id for t in official_tasks(fake_data, "valid_seen")
    ]
    chains = domain.chains("valid_seen", 2)
    assert [[t.scenario for t in chain] for chain in chains] == [["FloorPlan2", "FloorPlan2"], ["FloorPlan3"]]
    with pytest.raises(DataNotFoundError):  # a missing split fails when it is first used, not before
        domain.tasks("valid_unseen")
    with pytest.raises(InvalidConfigError, match="valid_seen"):
        domain.tasks("valid_sen")


def test_domain_data_dir_defaults_to_env_var(fake_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALFWORLD_DATA", str(fake_data))
    assert len(AlfworldDomain(source="official").tasks("valid_seen")) == 3
    monkeypatch.delenv("ALFWORLD_DATA")
    with pytest.raises(DataNotFoundError, match="ALFWORLD_DATA"):
        AlfworldDomain(source="official").tasks("valid_seen")


def test_domain_rejects_unknown_source() -> None:
    with pytest.raises(InvalidConfigError, match="official"):
        AlfworldDomain(source="oficial")


@pytest.mark.official
def test_valid_seen_has_140_games() -> None:
    data_dir = official_data_dir()
    games = official_games(data_dir, "valid_seen")
    assert len(games) == 140
    assert games == sorted(games) == official_games(data_dir, "valid_seen")
    tasks = AlfworldDomain(source="official", data_dir=data_dir).tasks("valid_seen")
    assert {t.task_type for t in tasks} == set(TASK_TYPES)
    assert all(t.scenario.startswith("FloorPlan") for t in tasks)
    assert tasks[0].task_id.count("/") == 1


@pytest.mark.official
@pytest.mark.parametrize("engine", ["native", "textworld"])
def test_domain_loads_official_game(engine: str) -> None:
    from sage_envs.domains.alfworld.native_engine import NativeAlfworldGame

    domain = AlfworldDomain(source="official", data_dir=official_data_dir(), engine=engine)
    task = domain.tasks("valid_seen")[0]
    game = domain.load(task)
    assert isinstance(game, {"native": NativeAlfworldGame, "textworld": AlfworldGame}[engine])
    assert game.description  # read from the game file: no engine start needed


def test_domain_generated_delegates_to_the_generator(tmp_path: Path) -> None:
    from sage_envs.domains.alfworld import generator

    domain = AlfworldDomain(cache_dir=tmp_path)  # source="generated" is the default
    chains = domain.chains("valid_seen", 2)
    assert len(chains) == generator.NUM_CHAINS["valid_seen"]
    assert chains[3] == generator.chain_tasks("valid_seen", 3, 2, seed=0)
    assert all(len({task.scenario for task in chain}) == 1 for chain in chains)
    assert domain.tasks("valid_seen")[:2] == list(chains[0])
    assert AlfworldDomain(cache_dir=tmp_path, generator_seed=1).chains("valid_seen", 2)[0] != chains[0]


def test_generator_seed_keyword_and_its_deprecated_name_seed(tmp_path: Path) -> None:
    import gymnasium as gym

    import sage_envs  # noqa: F401 - registers the env ids

    new = AlfworldDomain(cache_dir=tmp_path, generator_seed=1)
    with pytest.warns(DeprecationWarning, match="generator_seed=") as caught:
        old = AlfworldDomain(cache_dir=tmp_path, seed=1)
    assert caught[0].filename == __file__  # the warning points at the caller's line
    assert old.generator_seed == new.generator_seed == 1
    assert old.chains("valid_seen", 2) == new.chains("valid_seen", 2)
    with pytest.raises(InvalidConfigError, match="generator_seed only"):
        AlfworldDomain(seed=1, generator_seed=2)

    env = gym.make("SageChain-ALFWorld-v0", split="valid_seen", cache_dir=tmp_path, generator_seed=1)
    assert env.unwrapped.domain.generator_seed == 1
    with pytest.warns(DeprecationWarning, match="generator_seed="):
        env = gym.make("SageChain-ALFWorld-v0", split="valid_seen", cache_dir=tmp_path, seed=1)
    assert env.unwrapped.chains == new.chains("valid_seen", 2)
