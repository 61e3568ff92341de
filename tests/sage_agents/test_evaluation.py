"""sage_agents.evaluation: chain-resampled ratio intervals, bad agents recorded, one path for the trainer too."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from sage_agents.evaluation import (
    BOOTSTRAP_SAMPLES,
    MAX_STORED_ACTION_CHARS,
    chain_metrics,
    evaluate_policy,
    play_chain,
    play_chains,
    summarize_records,
    wilson_interval,
)
from sage_agents.policy import LLMPolicy
from sage_agents.rollout import rollout_chains, rollout_stats
from sage_envs import SageChainEnv
from tests.sage_agents.fake_env import FakeChainEnv, ScoredFake
from tests.sage_envs.toy_domain import ToyDomain


def _record(chain, success, steps):
    n = len(success)
    return {
        "chain": chain, "seed": 0, "success": success, "steps": steps, "primitive_steps": steps,
        "tokens": [2 * s for s in steps], "task_types": ["t"] * n, "skill_reuse": [False] * n,
        "skills_created": [[] for _ in range(n)], "invalid_actions": [0] * n,
    }  # fmt: skip


RECORDS = [  # unequal chain lengths: per-chain means and the ratio over tasks differ
    _record(0, [True], [3]),
    _record(1, [False, False, False], [9, 9, 9]),
    _record(2, [True, True], [2, 4]),
    _record(3, [False], [7]),
    _record(4, [True, False, True, True], [1, 5, 2, 3]),
]


def test_ratio_bootstrap_matches_a_naive_loop_over_resampled_chains():
    summary = summarize_records(RECORDS)
    index = np.random.default_rng(0).integers(len(RECORDS), size=(BOOTSTRAP_SAMPLES, len(RECORDS)))
    tgc, steps, sgc = [], [], []
    for row in index:  # naive: gather the resampled chains, then divide over all their tasks
        tasks = [s for i in row for s in RECORDS[i]["success"]]
        turns = [t for i in row for t in RECORDS[i]["steps"]]
        tgc.append(sum(tasks) / len(tasks))
        steps.append(sum(turns) / len(turns))
        sgc.append(sum(all(RECORDS[i]["success"]) for i in row) / len(row))
    for name, values in (("tgc", tgc), ("mean_steps", steps), ("sgc", sgc)):
        assert summary["ci95"][name] == pytest.approx(list(np.percentile(values, [2.5, 97.5])))
    assert summary["tgc"] == 6 / 11 and summary["mean_steps"] == 54 / 11
    low, high = summary["ci95"]["tgc"]
    assert low <= summary["tgc"] <= high


def test_chain_length_mix_and_full_length_sgc():
    summary = summarize_records(RECORDS, full_length=2)
    assert summary["chain_length_mix"] == {"1": 2, "2": 1, "3": 1, "4": 1}
    assert summary["n_full_length_chains"] == 1 and summary["sgc_full_length"] == 1.0  # chain 2, solved
    assert summary["ci95"]["sgc_full_length"] == wilson_interval(1, 1)
    assert summary["sgc"] == 2 / 5 and summary["agent_errors"] == 0


def test_all_or_nothing_rates_get_a_wilson_interval_not_a_point():
    failed = [_record(c, [False, False], [3, 3]) for c in range(10)]
    summary = summarize_records(failed)
    assert summary["tgc"] == 0.0 and summary["ci95"]["tgc"] == wilson_interval(0, 20)
    low, high = summary["ci95"]["tgc"]
    assert low == 0.0 and 0.1 < high < 0.2  # Wilson's upper bound for 0 of 20: z^2 / (n + z^2) = 0.161
    assert high == pytest.approx(1.959963984540054**2 / (20 + 1.959963984540054**2))
    solved = summarize_records([_record(c, [True], [1]) for c in range(5)])
    assert solved["ci95"]["sgc"] == wilson_interval(5, 5) and solved["ci95"]["sgc"][0] < 1.0


class _TaggedEnv(FakeChainEnv):
    """FakeChainEnv whose info names its chain, so an agent can misbehave on one."""

    def _info(self, **kwargs):
        return {**super()._info(**kwargs), "chain": self.chain}


class _Looker:
    """Answers "look"; raises on chain 3."""

    def reset(self, seed=None):
        pass

    def act(self, observation, info):
        if info["chain"] == 3:
            raise RuntimeError("broken on chain 3")
        return "look"


def test_an_agent_that_raises_fails_that_chain_only():
    env = _TaggedEnv(max_steps_per_task=2, num_chains=5)
    records = list(play_chains([env], _Looker(), [(0, chain) for chain in range(5)]))
    assert [("agent_error" in r) for r in records] == [False, False, False, True, False]
    error = records[3]["agent_error"]
    assert error == {"type": "RuntimeError", "message": "broken on chain 3", "method": "act", "task_index": 0}
    assert records[3]["success"] == [False, False] and records[3]["steps"] == [0, 0]
    assert len(records[3]["task_types"]) == 2  # tasks never reached are still listed, as failed
    assert [r["steps"] for r in records if r["chain"] != 3] == [[2, 2]] * 4
    assert summarize_records(records)["agent_errors"] == 1


@pytest.mark.parametrize("how", ["int", "huge"])
def test_non_str_and_oversize_actions_are_stored_capped(how):
    class Bad:
        def act(self, observation, info):
            return 42 if how == "int" else "look " * 2_000_000

    env = SageChainEnv(ToyDomain(), max_steps_per_task=2)  # the real env: it flags a non-str action invalid
    record = play_chain(env, Bad(), chain=0, seed=0)
    stored = [a for task in record["actions"] for a in task]
    assert record["invalid_actions"] == [2, 2]
    assert len(stored) == 4 and all(len(a) <= MAX_STORED_ACTION_CHARS for a in stored)
    if how == "int":
        assert stored == ["42"] * 4 and record["tokens"] == [2, 2]
    else:  # words of the capped text, not of the 10 MB
        assert record["tokens"][0] == 2 * len(stored[0].split()) < 2 * MAX_STORED_ACTION_CHARS


class _Batcher:
    """``act_batch`` that raises whenever the observation of chain 1 is in the call."""

    def __init__(self):
        self.last_tokens, self.calls = [], []

    def act_batch(self, observations, infos, slots=None):
        self.calls.append(len(slots))
        if any(info.get("chain") == 1 for info in infos):
            raise ValueError("chain 1 breaks me")
        self.last_tokens = [1] * len(slots)
        return ["look"] * len(slots)


def test_a_raising_batch_call_is_retried_chain_by_chain():
    envs = [_TaggedEnv(max_steps_per_task=2) for _ in range(3)]
    agent = _Batcher()
    records = {r["chain"]: r for r in play_chains(envs, agent, [(0, c) for c in range(4)])}
    assert sorted(records) == [0, 1, 2, 3]
    assert records[1]["agent_error"]["method"] == "act_batch" and records[1]["agent_error"]["type"] == "ValueError"
    assert all("agent_error" not in records[c] and records[c]["steps"] == [2, 2] for c in (0, 2, 3))
    assert agent.calls[:4] == [3, 1, 1, 1]  # the failed call of three, then each of its chains alone


def test_trainer_evaluation_gives_the_numbers_of_the_earlier_rollout_path(tiny):
    """The same greedy policy: the old rollout_chains + rollout_stats figures equal evaluate_policy's."""
    model, tokenizer = tiny
    policy = LLMPolicy(model, tokenizer, constrained=True)
    chains, seeds = [0, 1, 2], [7, 8, 9]
    old = rollout_stats(rollout_chains([FakeChainEnv(easy=True) for _ in chains], policy, chains, seeds, greedy=True))
    records, new = evaluate_policy(policy, [FakeChainEnv(easy=True) for _ in chains], chains, seeds)
    assert len(records) == 3 and set(new) == set(old)
    assert new == pytest.approx(old)
    assert 0 < old["env/steps_per_task"] and old["env/tokens_per_task"] > 0  # it played, not an empty match


class _Cycler:
    """Answers "go to box 1", "look", "go to box 2", ... (ScoredFake: 25 points per ``go to``)."""

    def __init__(self):
        self.turn = 0

    def act(self, observation, info):
        self.turn += 1
        return ["go to box 1", "look", "go to box 2"][(self.turn - 1) % 3]


def test_records_of_a_scored_domain_carry_each_tasks_score_and_the_summary_its_progress():
    scored = list(play_chains([ScoredFake(FakeChainEnv(max_steps_per_task=3))], _Cycler(), [(0, 0), (0, 1)]))
    assert [r["task_score"] for r in scored] == [[50.0, 50.0]] * 2 and not any(any(r["success"]) for r in scored)
    summary = summarize_records(scored)
    assert summary["tgc"] == 0.0 and summary["progress"] == 0.5 and summary["ci95"]["progress"] == [0.5, 0.5]
    assert chain_metrics(scored)["env/task_progress"] == 0.5
    plain = list(play_chains([FakeChainEnv(max_steps_per_task=3)], _Cycler(), [(0, 0)]))
    assert "task_score" not in plain[0] and "progress" not in summarize_records(plain)
    assert chain_metrics(plain)["env/task_progress"] == chain_metrics(plain)["env/task_success"]


def test_textworld_records_carry_its_scores():
    from sage_agents.registry import make_agent

    env = gym.make("SageChain-TextWorld-v0", split="valid", rooms=1, num_chains=2, max_steps_per_task=4)
    expert = gym.make("SageChain-TextWorld-v0", split="valid", rooms=1, num_chains=2)
    won = play_chain(expert, make_agent("expert", env_id="SageChain-TextWorld-v0"), chain=0, seed=0)
    idle = play_chain(env, type("Idle", (), {"act": lambda self, obs, info: "look"})(), chain=0, seed=0)
    assert won["success"] == [True, True] and won["task_score"] == [100.0, 100.0]
    assert idle["steps"] == [4, 4] and idle["success"] == [False, False] and idle["task_score"] == [0.0, 0.0]
    assert summarize_records([won, idle])["progress"] == 0.5
