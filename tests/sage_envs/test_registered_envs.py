"""Every registered env id: Gymnasium's checker, same-seed determinism, random strings never raise."""

from __future__ import annotations

import importlib.util
import shutil

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import sage_envs

# Small games for the domains whose games are made on demand (a TextWorld game takes seconds to make).
MAKE_KWARGS = {"SageChain-TextWorld-v0": {"rooms": 1, "num_chains": 2}}
OPTIONAL_ENGINES = {"SageChain-ScienceWorld-v0": "scienceworld"}
"""Env ids whose engine is an optional package: their tests skip without it (ScienceWorld also needs Java)."""
RANDOM_STRINGS = {"SageChain-TextWorld-v0": 500, "SageChain-ScienceWorld-v0": 200}
"""Random strings per env where 10,000 would take minutes: a string that is no skill action is a command its engine
runs (TextWorld: ~20 ms each; ScienceWorld parses each in its JVM: ~0.1 s)."""


def missing_engine(env_id: str) -> str | None:
    """Why ``env_id`` cannot run on this machine, or None when it can."""
    package = OPTIONAL_ENGINES.get(env_id)
    if package is not None and importlib.util.find_spec(package) is None:
        return f"no `{package}` package"
    if package == "scienceworld" and shutil.which("java") is None:
        return "ScienceWorld needs Java: apt-get install default-jre-headless (make java)"
    return None


@pytest.fixture(scope="module", params=sage_envs.ENV_IDS)
def env_id(request):
    reason = missing_engine(request.param)
    if reason is not None:
        pytest.skip(reason)
    return request.param


def make_env(env_id: str, **kwargs):
    """The env on its domain's second declared split (ALFWorld valid_seen, ScienceWorld dev), with MAKE_KWARGS."""
    split = sage_envs.domain_class(env_id).splits[1]
    return gym.make(env_id, split=split, **MAKE_KWARGS.get(env_id, {}), **kwargs)


def test_check_env(env_id):
    env = make_env(env_id)
    check_env(env.unwrapped)
    env.close()


def rollout(env_id: str, seed: int, steps: int = 12):
    env = make_env(env_id)
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    transitions = [(obs, info["task_id"], info["admissible_commands"])]
    for _ in range(steps):
        commands = info["admissible_commands"]
        obs, reward, terminated, truncated, info = env.step(commands[int(rng.integers(len(commands)))])
        transitions.append((obs, reward, terminated, info["admissible_commands"]))
        if terminated:
            break
    env.close()
    return transitions


def test_same_seed_two_copies_identical(env_id):
    first, second = rollout(env_id, seed=7), rollout(env_id, seed=7)
    # On a difference, name the first transition and part that differ (a whole transcript is too long to read).
    for turn, (a, b) in enumerate(zip(first, second, strict=True)):
        for part, (x, y) in enumerate(zip(a, b, strict=True)):
            assert x == y, f"turn {turn}, part {part} (0: observation, last: admissible commands):\n{x!r}\n!=\n{y!r}"


def random_strings(env_id: str, n: int) -> int:
    env = make_env(env_id, max_steps_per_task=10**9)
    env.action_space.seed(0)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    invalid = 0
    for i in range(n):
        # Mix fully random printable strings with near-misses of the action grammar.
        text = env.action_space.sample()[: int(rng.integers(0, 80))]
        text = ("skill ", "call ", "go to ", "", "")[i % 5] + text
        obs, _, terminated, _, info = env.step(text)
        assert env.observation_space.contains(obs)
        invalid += not info["action_valid"]
        if terminated:
            env.reset()
    env.close()
    return invalid


def test_random_strings_are_invalid_actions_not_exceptions(env_id):
    n = RANDOM_STRINGS.get(env_id, 10_000)
    assert random_strings(env_id, n) == n


def test_native_expert_plan_matches_textworld_engine():
    """The native engine's expert plan (from its synced TextWorld twin) equals the TextWorld engine's own."""
    plans = {}
    for engine in ("native", "textworld"):
        env = gym.make("SageChain-ALFWorld-v0", split="valid_seen", expert_plan=True, engine=engine)
        _, info = env.reset(options={"chain": 0})
        trace = [info["expert_plan"]]
        for _ in range(3):
            _, _, _, _, info = env.step(info["expert_plan"][0])
            trace.append(info["expert_plan"])
        plans[engine] = trace
        env.close()
    assert plans["native"] == plans["textworld"] and plans["native"][0]


@pytest.mark.parametrize("vector_cls", [gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv])
def test_vector_envs(env_id, vector_cls):
    kwargs = {"shared_memory": False} if vector_cls is gym.vector.AsyncVectorEnv else {}
    envs = vector_cls([lambda: make_env(env_id) for _ in range(2)], **kwargs)
    obs, info = envs.reset(seed=[0, 1])
    assert len(obs["observation"]) == 2 and all(isinstance(o, str) for o in obs["task"])
    actions = tuple(commands[0] for commands in info["admissible_commands"])
    obs, reward, terminated, truncated, info = envs.step(actions)
    assert reward.shape == (2,) and all(info["action_valid"])
    envs.close()
