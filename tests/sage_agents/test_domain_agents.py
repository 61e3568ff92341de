"""Agents reach a domain through its env id: the expert, the tokenizer's words and the entity pattern."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import sage_envs
from sage_agents.config import TrainConfig, domain_argument_kwargs
from sage_agents.models import build_tokenizer
from sage_agents.policy import argument_options
from sage_agents.registry import make_agent
from sage_envs.domain import ENTITY_PATTERN
from tests.sage_envs.toy_domain import RiskyToyChainEnv, RiskyToyDomain, ToyChainEnv, ToyExpert

ROOT = Path(__file__).resolve().parents[2]
TOY_ID, RISKY_ID = "SageChain-Toy-v0", "SageChain-RiskyToy-v0"


@pytest.fixture(scope="module", autouse=True)
def toy_ids():
    gym.register(TOY_ID, entry_point=ToyChainEnv)
    gym.register(RISKY_ID, entry_point=RiskyToyChainEnv)
    yield
    del gym.registry[TOY_ID], gym.registry[RISKY_ID]


# Run in a fresh interpreter, so that sys.modules shows what this path imports and nothing a test before did.
EXPERT_ON_TOY = f"""
import json, sys
import gymnasium as gym
import sage_envs
from sage_agents.evaluation import play_chain
from sage_agents.registry import make_agent
from tests.sage_envs.toy_domain import ToyChainEnv

gym.register("{TOY_ID}", entry_point=ToyChainEnv)
env = gym.make("{TOY_ID}", split="valid_seen")
agent = make_agent("expert", env_id="{TOY_ID}", use_skills=False)
records = [play_chain(env, agent, chain=i, seed=0) for i in range(env.unwrapped.num_chains)]
alfworld = sorted(m for m in sys.modules if m.startswith(("alfworld", "sage_envs.domains.alfworld")))
print(json.dumps({{"agent": type(agent).__name__, "successes": [r["success"] for r in records], "alfworld": alfworld}}))
"""


def test_the_expert_baseline_plays_a_toy_env_id_without_importing_alfworld():
    out = subprocess.run(
        [sys.executable, "-c", EXPERT_ON_TOY], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["agent"] == "ToyExpert" and result["alfworld"] == []
    assert result["successes"] == [[True, True], [True], [True, True], [True]]  # 2 households x 3 tasks, chains of 2


def test_make_agent_passes_the_env_id_only_to_factories_that_take_it():
    assert isinstance(make_agent("expert", env_id=TOY_ID), ToyExpert)
    assert type(make_agent("expert")).__name__ == "AlfworldExpert"  # the default env id
    assert type(make_agent("random", env_id=TOY_ID)).__name__ == "RandomAgent"  # random takes no env_id


def test_the_tiny_tokenizer_knows_the_env_domains_words():
    toy = build_tokenizer(env_id=TOY_ID).get_vocab()
    bare = build_tokenizer(env_id=None).get_vocab()
    assert "zorblax" in toy and "▁zorblax" in toy  # a word only the toy domain's vocabulary holds
    assert "zorblax" not in bare
    alfworld = build_tokenizer().get_vocab()  # the default: ALFWorld's words, as before domains offered them
    assert "sinkbasin" in alfworld and "sinkbasin" not in bare


def test_the_entity_pattern_comes_from_the_env_domain():
    assert TrainConfig(env_id=RISKY_ID).policy_kwargs["entity_pattern"] == RiskyToyDomain.entity_pattern
    assert "entity_pattern" not in TrainConfig().policy_kwargs  # ALFWorld's is the default pattern
    admissible, task, pattern = ["go to box 2", "smash bin"], "put the key in the bin", RiskyToyDomain.entity_pattern
    # "bin" is an entity of this domain (no number): task-named values first, then "box 2" and its type
    assert argument_options(task, "", admissible, entity_pattern=pattern) == ["bin", "put", "key", "box 2", "box"]
    assert argument_options(task, "", admissible, entity_pattern=ENTITY_PATTERN) == [
        "put",
        "key",
        "bin",
        "box 2",
        "box",
    ]


def test_textworlds_task_sentence_names_no_skill_arguments():
    textworld = sage_envs.domain_class("SageChain-TextWorld-v0")
    assert not textworld.task_names_entities  # the same sentence for every recipe
    kwargs = {
        "entity_pattern": textworld.entity_pattern,
        "task_arguments": False,
        "argument_values": {"how": ["chop", "slice", "dice"]},  # cut_with_knife's verb, which names no thing
    }
    assert domain_argument_kwargs("SageChain-TextWorld-v0") == kwargs
    assert TrainConfig(env_id="SageChain-TextWorld-v0").policy_kwargs.items() >= kwargs.items()
    assert domain_argument_kwargs(RISKY_ID) == {"entity_pattern": RiskyToyDomain.entity_pattern}  # tasks name
    task = "You are hungry! Let's cook a delicious meal. Check the cookbook in the kitchen for the recipe."
    admissible, pattern = ["examine knife", "open fridge"], textworld.entity_pattern
    assert {"you", "hungry"} <= set(argument_options(task, "", admissible, entity_pattern=pattern))
    assert argument_options(task, "", admissible, entity_pattern=pattern, task_words=False) == [
        "cookbook", "kitchen", "recipe", "knife", "fridge"
    ]  # fmt: skip
