"""SageChain-TextWorld-v0: generated cooking chains, lost games, scores, the walkthrough expert, skills, SKILL.md."""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest

import sage_envs
from sage_envs.chain import SKILL_MODES
from sage_envs.domains.textworld import generator
from sage_envs.domains.textworld.domain import TextworldDomain
from sage_envs.domains.textworld.expert import SKILLS, TextworldExpert, current_task_id, skill_call
from sage_envs.domains.textworld.game import clean_feedback
from sage_envs.error import InvalidConfigError
from sage_envs.skills import SkillLibrary, parse_definition

ENV_ID = "SageChain-TextWorld-v0"
SMALL = {"rooms": 1, "num_chains": 2}
"""One-room houses: the chains test_registered_envs.py plays too, so the cache makes them once."""


def _make(**kwargs):
    return gym.make(ENV_ID, split="valid", **{**SMALL, **kwargs})


def _play(env, agent, chain: int, seed: int = 0, options=None):
    """Play one chain with ``agent``; return the final info and every step's info."""
    obs, info = env.reset(seed=seed, options={"chain": chain, **(options or {})})
    agent.reset()
    infos, done = [info], False
    while not done:
        obs, _, done, _, info = env.step(agent.act(obs, info))
        infos.append(info)
    return info, infos


# ------------------------------------------------------------------ pure parts (no game made)
def test_task_ids_round_trip_and_name_every_setting():
    settings = generator.CookingSettings(rooms=9, ingredients=2)
    chain = generator.chain_tasks(settings, "test", 5, 3, generator_seed=4)
    assert [task.task_id for task in chain] == [f"rooms9-ingredients2/test/seed4/chain5-len3/task{i}" for i in range(3)]
    assert len({task.scenario for task in chain}) == 1
    assert generator.parse_task_id(chain[2].task_id) == (settings, "test", 4, 5, 3, 2)
    with pytest.raises(InvalidConfigError, match="not a TextWorld cooking task id"):
        generator.parse_task_id("valid_seen/trial_1")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"rooms": 5}, "rooms=5"), ({"ingredients": 0}, "ingredients=0"), ({"generator_seed": -1}, "generator_seed")],
)
def test_bad_settings_are_clear_errors(kwargs, match):
    with pytest.raises(InvalidConfigError, match=match):
        TextworldDomain(**kwargs)


def test_splits_are_textworlds_and_a_wrong_one_is_named():
    assert TextworldDomain.splits == ("train", "valid", "test")
    with pytest.raises(InvalidConfigError, match="Did you mean 'valid'"):
        gym.make(ENV_ID, split="vaild", **SMALL)


def test_houses_differ_across_splits_chains_and_seeds():
    seeds = {
        generator.house_seed(split, chain, 0, seed)
        for split in generator.SPLITS
        for chain in range(50)
        for seed in (0, 1)
    }
    assert len(seeds) == 3 * 50 * 2


def test_cache_key_names_the_textworld_version_and_settings(tmp_path):
    import textworld

    root = generator.cache_root(generator.CookingSettings(rooms=12, ingredients=3), tmp_path)
    assert root.name == f"tw{textworld.__version__}-gen{generator.GENERATOR_VERSION}-rooms12-ingredients3"


def test_skill_call_segments_a_walkthrough():
    plan = ["open fridge", "take carrot from fridge", "take knife from counter", "dice carrot with knife", "drop knife"]
    assert skill_call(plan) == ("fetch_from", ("carrot", "fridge"))
    assert skill_call(plan[2:]) == ("cut_with_knife", ("carrot", "dice", "knife", "counter"))
    assert skill_call(["prepare meal", "eat meal"]) == ("serve_meal", ())
    assert skill_call(["open fridge", "go north"]) is None
    assert skill_call(["take knife", "dice carrot with knife", "drop knife"]) is None


def test_current_task_id_moves_on_after_a_task_ends():
    info = {"task_id": "rooms1-ingredients1/valid/seed0/chain0-len2/task0", "chain_successes": []}
    assert current_task_id(info) == info["task_id"]
    assert current_task_id({**info, "chain_successes": [False]}).endswith("/task1")


def test_skill_templates_parse_and_vocabulary_covers_the_words():
    templates = TextworldDomain.skill_templates()
    assert set(templates) == set(SKILLS)
    for name, (text,) in templates.items():
        assert parse_definition(text)[0].name == name
    words = set(" ".join(TextworldDomain.vocabulary()).split())
    assert {"fridge", "knife", "carrot", "kitchen", "slice", "roasted", "meal"} <= words


def test_clean_feedback_drops_the_prompt_and_status_bar():
    raw = "\nYou take the knife.\n\n\n\n>     -= Kitchen =-0/3\n"
    assert clean_feedback(raw) == "You take the knife."


def test_agents_reach_the_domain_without_importing_it():
    assert sage_envs.domain_class(ENV_ID) is TextworldDomain
    assert isinstance(TextworldDomain.expert(use_skills=False), TextworldExpert)


# ------------------------------------------------------------------ games (made once, then cached)
def test_a_chain_is_one_house_with_distinct_recipes():
    games = generator.chain_games(generator.CookingSettings(rooms=1), "valid", 0, 2)
    assert games[0].parent.parent == games[1].parent.parent  # house-<seed>/recipe-<r>/game.z8
    assert generator.recipe(games[0]) != generator.recipe(games[1])
    assert generator.chain_games(generator.CookingSettings(rooms=1), "valid", 0, 2) == games  # read from the index


def test_a_ruined_ingredient_loses_the_task_and_the_chain_moves_on():
    env = _make(skills="none")
    _, info = env.reset(options={"chain": 0})
    plan = generator.walkthrough(generator.game_file(info["task_id"]))
    cook = next(command for command in plan if command.startswith("cook "))
    for command in plan[: plan.index(cook)]:
        _, _, _, _, info = env.step(command)
    food, appliance = cook[len("cook ") :].split(" with ")
    wrong = next(a for a in ("stove", "oven") if a != appliance)  # the other appliance: the wrong cooking
    _, reward, terminated, _, info = env.step(f"cook {food} with {wrong}")
    assert info["task_lost"] and not info["task_success"] and reward == 0.0 and not terminated
    assert info["new_task"] and info["chain_successes"] == [False]
    assert 0.0 < info["task_score"] < 100.0  # the points earned before the ingredient was ruined
    env.close()


@pytest.mark.parametrize("mode", SKILL_MODES)
def test_expert_wins_in_every_skill_mode(mode):
    env = _make(skills=mode)
    info, infos = _play(env, TextworldExpert(use_skills=True), chain=0)
    assert info["chain_successes"] == [True, True]
    assert info["task_score"] == 100.0
    kinds = {i["action_kind"] for i in infos[1:]}
    if mode in ("program", "both"):
        assert {"define", "call"} <= kinds and infos[-1]["skill_reuse"]  # task 2 calls task 1's skills
    else:  # definitions are refused ("skills disabled"), then the walkthrough goes on as commands
        assert "define" not in kinds and "call" not in kinds
        assert sum(not i["action_valid"] for i in infos) == 1
    env.close()


def test_skill_md_round_trip_and_a_bank_is_called_without_defining(tmp_path):
    env = _make()
    _play(env, TextworldExpert(), chain=0)
    library = env.unwrapped.library
    library.save(tmp_path / "lib")
    loaded = SkillLibrary.load(tmp_path / "lib")
    assert sorted(loaded.names()) == sorted(library.names()) == sorted(SKILLS)
    assert {s.name: s.source for s in loaded.programs()} == {s.name: s.source for s in library.programs()}
    info, infos = _play(env, TextworldExpert(), chain=1, options={"skill_library": loaded})
    assert info["chain_successes"] == [True, True]
    assert "define" not in {i["action_kind"] for i in infos[1:]}
    env.close()


def test_same_seed_same_transcript():
    def transcript():
        env = _make()
        rng = np.random.default_rng(3)
        obs, info = env.reset(seed=3)
        out = [obs["observation"]]
        for _ in range(15):
            commands = info["admissible_commands"]
            obs, reward, terminated, _, info = env.step(commands[int(rng.integers(len(commands)))])
            out.append((obs["observation"], reward, info["task_score"], info["task_lost"]))
            if terminated:
                break
        env.close()
        return out

    assert transcript() == transcript()


def test_fuzz_of_random_and_hostile_actions_raises_nothing():
    env = _make(max_steps_per_task=40, skills="both")
    rng = np.random.default_rng(0)
    hostile = [
        "",
        " ",
        "\n\n",
        "x" * 9000,
        "take \x00 from fridge",
        "eat the fridge",
        "restart",
        "quit",
        "save",
        "go north\ngo south",
        "skill broken(:",
        "call serve_meal()",
        "call nothing(a, b)",
        "skill loop():\n    for r in receptacles:\n        call loop()\ncall loop()",
        "cook cookbook with stove",
        "ünïcödé",
        None,
        b"look",
        42,
    ]
    env.reset(seed=0)
    info = {"admissible_commands": ["look"]}
    invalid = valid_steps = 0
    for i in range(150):
        if i % 2:
            action = hostile[int(rng.integers(len(hostile)))]
        else:
            commands = info["admissible_commands"] or ["look"]
            action = commands[int(rng.integers(len(commands)))]
        obs, _, terminated, _, info = env.step(action)
        assert env.observation_space.contains(obs)
        if action in hostile[:4] or action is None or isinstance(action, (bytes, int)):
            assert not info["action_valid"] and info["message"]
        invalid += not info["action_valid"]
        valid_steps += info["action_valid"]
        if terminated:
            _, info = env.reset()
    assert invalid > 0 and valid_steps > 0
    env.close()


def test_entity_names_are_what_commands_examine_and_the_recipe_names():
    texts = [
        "You see a closed fridge. The counter is vast. On the counter you can see a knife.",
        "Directions:\n  slice the orange bell pepper\n  fry the orange bell pepper\n  prepare meal",
        "examine block of cheese",
        "open frosted-glass door",
        "take knife from counter",
    ]
    names = {name for text in texts for name in re.findall(TextworldDomain.entity_pattern, text.lower())}
    assert names == {"counter", "orange bell pepper", "block of cheese", "frosted-glass door"}
