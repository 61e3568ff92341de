"""AlfworldGame: ALFWorld's transcripts through TextWorld's PDDL engine (official games, each reset ~1 s)."""

from __future__ import annotations

import importlib.resources
import json
import sys
from pathlib import Path

import pytest

from sage_envs.domains.alfworld.official import official_tasks
from sage_envs.domains.alfworld.textworld_engine import AlfworldGame, split_listing, task_sentence
from sage_envs.error import DataNotFoundError

from .test_alfworld_official import official_data_dir

WELCOME = "-= Welcome to TextWorld, ALFRED! =-"


def test_task_sentence_and_listing() -> None:
    assert task_sentence("x\n\nYour task is to: put some apple on diningtable.") == "put some apple on diningtable"
    assert task_sentence("no task here") == ""
    assert split_listing("a cabinet 2, a cabinet 1, and a toaster 1") == [
        "cabinet 2",
        "cabinet 1",
        "toaster 1",
    ]
    assert split_listing("a egg 1") == ["egg 1"]
    assert split_listing("nothing") == []


def test_missing_game_file(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match="game.tw-pddl"):
        AlfworldGame(tmp_path)


@pytest.fixture(scope="module")
def heat_game_dir() -> Path:
    tasks = official_tasks(official_data_dir(), "valid_seen")
    return Path(next(t for t in tasks if t.task_type == "pick_heat_then_place_in_recep").extra["game_path"])


@pytest.fixture(scope="module")
def heat_game(heat_game_dir: Path):
    game = AlfworldGame(heat_game_dir)
    yield game
    game.close()


@pytest.mark.official
def test_opening_admissible_entities(heat_game: AlfworldGame) -> None:
    with pytest.raises(RuntimeError, match="reset"):
        heat_game.step("look")
    argv = list(sys.argv)
    opening = heat_game.reset()
    assert sys.argv == argv  # fast-downward overwrites sys.argv while translating
    assert opening.startswith(WELCOME + "\n\nYou are in the middle of a room. Looking quickly around you, you see a ")
    assert opening.endswith(f"\n\nYour task is to: {heat_game.description}.")
    assert heat_game.description == "heat some apple and put it in diningtable"

    entities = heat_game.entities()
    receptacles = entities["receptacles"]
    listed = opening.split("you see ", 1)[1].split(".\n", 1)[0]
    assert ", ".join(f"a {r}" for r in receptacles[:-1]) + f", and a {receptacles[-1]}" == listed
    assert entities["objects"] == [] and entities["inventory"] == []
    admissible = heat_game.admissible_commands()
    assert admissible == sorted(admissible)
    assert {f"go to {r}" for r in receptacles} <= set(admissible)

    result = heat_game.step("fly to the moon")
    assert result.observation == "Nothing happens." and not result.won
    assert heat_game.admissible_commands() == admissible


@pytest.mark.official
def test_walkthrough_wins_and_entities_follow(heat_game: AlfworldGame) -> None:
    heat_game.reset()
    plan = heat_game.expert_plan()
    assert plan and plan[-1].startswith("put ") and " in/on " in plan[-1]  # the official grammar's put form
    results = []
    for command in plan:
        assert heat_game.expert_plan()[0] == command  # the plan advances with its own commands
        assert command in heat_game.admissible_commands()
        results.append(heat_game.step(command))
        if command.startswith("go to"):
            place = command[len("go to ") :]
            takeable = [
                c.split(" from ")[0][len("take ") :] for c in heat_game.admissible_commands() if c.startswith("take ")
            ]
            assert heat_game.entities()["objects"] == list(dict.fromkeys(takeable))
            assert place in results[-1].observation
        if command.startswith("take "):
            assert heat_game.entities()["inventory"] == [command.split(" from ")[0][len("take ") :]]
            assert heat_game.entities()["objects"] == []  # hands full: nothing can be taken
    assert [r.won for r in results] == [False] * (len(plan) - 1) + [True]
    assert heat_game.expert_plan() == []


@pytest.mark.official
def test_reset_after_close_replays_identically(heat_game_dir: Path) -> None:
    game = AlfworldGame(heat_game_dir)
    first = [game.reset()] + [game.step(c).observation for c in ("go to microwave 1", "open microwave 1")]
    game.close()
    second = [game.reset()] + [game.step(c).observation for c in ("go to microwave 1", "open microwave 1")]
    game.close()
    assert first == second


@pytest.mark.official
def test_put_form_follows_the_games_grammar(heat_game_dir: Path, tmp_path: Path) -> None:
    """The same game with the wheel's alfred.twl2 grammar says "move X to Y" instead of "put X in/on Y"."""
    data = json.loads((heat_game_dir / "game.tw-pddl").read_text())
    wheel = (importlib.resources.files("alfworld") / "data" / "alfred.twl2").read_text()
    data["grammar"] = wheel.replace("UNKNOWN GOAL", "heat some apple and put it in diningtable")
    (tmp_path / "game.tw-pddl").write_text(json.dumps(data))
    game = AlfworldGame(tmp_path)
    game.reset()
    plan = game.expert_plan()
    for command in plan:
        result = game.step(command)
        if command.startswith("take "):
            obj = command.split(" from ")[0][len("take ") :]
            puts = [c for c in game.admissible_commands() if obj in c and c.startswith(("put ", "move "))]
            assert puts and all(c.startswith(f"move {obj} to ") for c in puts)
    game.close()
    assert plan[-1].startswith("move apple 1 to diningtable") and result.won
