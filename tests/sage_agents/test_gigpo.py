"""GiGPO's step-level advantage (sage_agents/algos/gigpo.py) and how the trainer adds it to each turn."""

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sage_agents.algos.gigpo import step_advantages, task_returns
from sage_agents.config import ConfigError, TrainConfig
from sage_agents.rollout import ChainRollout, Turn
from sage_agents.trainer import Trainer
from tests.sage_agents.fake_env import FAST_TRAIN, FakeChainEnv
from tests.sage_agents.test_update_direction import LR, MIN_CHANGE, make_trainer, rewarded, sequence_logprobs


def test_a_tasks_reward_is_discounted_back_from_its_last_turn():
    assert task_returns(3, 2.0, 0.5) == [0.5, 1.0, 2.0]
    assert task_returns(2, 0.0, 0.9) == [0.0, 0.0]
    assert task_returns(0, 1.0, 0.9) == []


def test_each_return_is_compared_with_the_turns_in_its_own_state_only():
    returns = [1.0, 0.0, 0.5, 3.0, 0.25, 0.75]
    anchors = ["a", "a", "b", "a", "c", "c"]
    adv = step_advantages(returns, anchors)
    # state a: mean 4/3; state b: alone (no comparison); state c: mean 0.5
    expected = torch.tensor([1 - 4 / 3, -4 / 3, 0.0, 3 - 4 / 3, -0.25, 0.25])
    assert torch.allclose(adv, expected)
    scaled = step_advantages(returns, anchors, scale_std=True)
    std_a = torch.tensor([1.0, 0.0, 3.0]).std()
    assert torch.isclose(scaled[0], (1 - 4 / 3) / (std_a + 1e-4)) and scaled[2] == 0.0


def test_one_anchor_per_return():
    with pytest.raises(ValueError, match="one anchor per turn"):
        step_advantages([1.0, 0.0], ["a"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(-3, 3, allow_nan=False)), max_size=30))
def test_step_advantages_sum_to_zero_in_every_state_and_ignore_other_states(turns):
    anchors, returns = [a for a, _ in turns], [r for _, r in turns]
    adv = step_advantages(returns, anchors)
    for anchor in set(anchors):
        idx = [i for i, a in enumerate(anchors) if a == anchor]
        assert abs(float(adv[idx].sum())) < 1e-4
        # shifting the returns of another state changes nothing here
        shifted = [r + 5.0 if a != anchor else r for a, r in zip(anchors, returns, strict=True)]
        assert torch.allclose(step_advantages(shifted, anchors)[idx], adv[idx], atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, pieces",
    [
        ({"step_advantage_weight": -1.0}, ["step_advantage_weight=-1.0", ">= 0", "use 0"]),
        ({"step_discount": 0.0}, ["step_discount=0.0", "(0, 1]", "0.95"]),
        ({"step_anchor": "state"}, ["step_anchor='state'", "one of", "observation"]),
        ({"backend": "trl", "step_advantage_weight": 1.0}, ["step_advantage_weight=1.0", "backend='trl'"]),
    ],
)
def test_config_errors(kwargs, pieces):
    with pytest.raises(ConfigError) as err:
        TrainConfig(**kwargs)
    assert all(p in str(err.value) for p in pieces), str(err.value)


# ------------------------------------------------------------------------------------------------ the trainer
def turn(k, prompt, completion, observation, reward=0.0):
    return Turn(
        task_index=k,
        prompt_ids=list(prompt),
        completion_ids=list(completion),
        logprobs=[-1.0] * len(completion),
        action="look",
        parsed_kind="command",
        env_kind="command",
        valid=True,
        reward=reward,
        primitive_steps=1,
        observation=observation,
    )


def rollout(turns, success):
    ro = ChainRollout(chain=0, turns=turns)
    ro.task_success, ro.played, ro.no_action = list(success), [True] * len(success), [False] * len(success)
    return ro


GAMMA, OMEGA = 0.5, 2.0
# Task 0: both rollouts start in one state; the first reaches the drawer and wins there (2 turns), the second
# looks at a shelf, reaches the drawer (by another path: another prompt, the same observation) and fails there
# (3 turns). Task 1: both win in one turn, from its start (other prompts: the library differs).
FAST = rollout(
    [
        turn(0, [1, 2], [5], "You arrive at drawer 1."),
        turn(0, [1, 3], [6], "You take the pen.", 1.0),
        turn(1, [7], [8], "You put the pen.", 1.0),
    ],
    [True, True],
)
SLOW = rollout(
    [
        turn(0, [1, 2], [9], "You see a shelf."),
        turn(0, [1, 4], [5], "You arrive at drawer 1."),
        turn(0, [1, 5], [6], "Nothing happens."),
        turn(1, [7, 1], [8], "You put the pen.", 1.0),
    ],
    [False, True],
)
EPISODE = [0.5, 0.5, 0.0, -0.5, -0.5, -0.5, 0.0]  # R - mean per position: task 0 (1 vs 0), task 1 (1 vs 1)


@pytest.mark.parametrize("algo", ["grpo", "sage", "reskill"])  # every arm (sage demo's rl_step_advantage_weight)
@pytest.mark.parametrize(
    "anchor, step, grouped",
    [
        # only the shared first prompt: returns gamma^1 * 1 vs 0
        ("prompt", [GAMMA / 2, 0, 0, -GAMMA / 2, 0, 0, 0], 2),
        # also "at the drawer" (1 vs 0) and task 1's start (1 vs 1: no difference)
        ("observation", [GAMMA / 2, 1 / 2, 0, -GAMMA / 2, 0, -1 / 2, 0], 6),
    ],
)
def test_build_rows_adds_the_weighted_step_advantage_to_each_turns_episode_advantage(
    tiny, tmp_path, algo, anchor, step, grouped
):
    trainer = make_trainer(
        tiny, tmp_path, algo=algo, group_size=2, step_advantage_weight=OMEGA, step_discount=GAMMA, step_anchor=anchor
    )
    rows, stats = trainer.build_rows([FAST, SLOW])
    assert [row["adv"] for row in rows] == pytest.approx([e + OMEGA * s for e, s in zip(EPISODE, step, strict=True)])
    assert stats["losses/step_grouped_share"] == grouped / 7
    assert stats["losses/step_advantage_abs_mean"] == pytest.approx(OMEGA * sum(map(abs, step)) / 7)
    trainer.close()


def test_without_the_step_level_each_turn_gets_its_episode_advantage(tiny, tmp_path):
    plain = make_trainer(tiny, tmp_path, algo="grpo", group_size=2)  # the env is not played: hand-made rollouts
    rows, stats = plain.build_rows([FAST, SLOW])
    assert [row["adv"] for row in rows] == pytest.approx(EPISODE) and "losses/step_grouped_share" not in stats
    assert stats["losses/zero_advantage_turns"] == 2 / 7  # task 1's turns: both rollouts won it
    plain.close()


class TwoTurnEnv(FakeChainEnv):
    """One task of at most two turns: a rewarded first action wins at once, any second action wins too.

    Every rollout succeeds, so the episode advantage is 0 for all of them and plain GRPO has nothing to learn;
    only the step level, where the first turns share one state, tells the fast path from the slow one.
    """

    def __init__(self):
        super().__init__(chain_length=1, max_steps_per_task=2, num_chains=1)

    def _command(self, cmd: str) -> tuple[str, bool]:
        return "Nothing happens.", self.turn >= 2 or rewarded(cmd)


@pytest.mark.parametrize("weight", [0.0, 1.0])
def test_the_step_level_alone_makes_the_shorter_path_more_likely(tiny, tmp_path, weight):
    model, tokenizer = tiny
    cfg = TrainConfig(
        **{
            **FAST_TRAIN,
            "output_dir": str(tmp_path / "run"),
            "algo": "grpo",
            "lr": LR,
            "group_size": 8,
            "constrained": False,  # free generation: the env's reward sees exactly the sampled token
            "max_new_tokens": 1,
            "no_action_penalty": None,
            "total_steps": 1,
            "step_advantage_weight": weight,
        }
    )
    trainer = Trainer(cfg, model=copy.deepcopy(model), tokenizer=tokenizer, env_fn=TwoTurnEnv)
    start = copy.deepcopy(trainer.policy.model)
    trainer.train_step()
    firsts = [ro.turns[0] for ro in trainer.last_rollouts]
    assert all(ro.task_success == [True] for ro in trainer.last_rollouts)
    fast = torch.tensor([rewarded(t.action) for t in firsts])
    assert fast.any() and not fast.all(), f"the group needs both paths to carry a signal, got {fast.tolist()}"
    prompt, completions = firsts[0].prompt_ids, [t.completion_ids for t in firsts]
    before, _ = sequence_logprobs(start, prompt, completions, trainer.policy.pad_id)
    after, _ = sequence_logprobs(trainer.policy.model, prompt, completions, trainer.policy.pad_id)
    change = after - before  # (G,)
    if weight == 0.0:
        assert change.abs().max() < 1e-6, change  # every episode advantage is 0: GRPO leaves the policy alone
    else:
        assert change[fast].mean() > MIN_CHANGE and change[~fast].mean() < -MIN_CHANGE, change
    trainer.close()
