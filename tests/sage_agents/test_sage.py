"""SAGE's skill-integrated reward: the paper's L=2 formulas (all 8 cases), the L-task generalisation."""

import itertools

import pytest
import torch

from sage_agents.algos.sage import (
    chain_rewards,
    group_rewards,
    outcome_rewards,
    position_advantages,
    progress_rewards,
    skill_integrated_rewards,
)
from sage_agents.rollout import ChainRollout


@pytest.mark.parametrize("r1, r2, skill", list(itertools.product([0, 1], repeat=3)))
def test_paper_formulas_for_two_tasks(r1, r2, skill):
    reuse = {(1, 0)} if skill else set()
    R1 = r1 + (r1 == 1) * (r2 == 1) * skill  # arXiv 2512.17102
    R2 = r2 + (r2 == 1) * skill
    assert skill_integrated_rewards([r1, r2], reuse) == [R1, R2]


def test_hand_table_two_tasks():
    assert skill_integrated_rewards([1, 1], {(1, 0)}) == [2.0, 2.0]
    assert skill_integrated_rewards([1, 0], {(1, 0)}) == [1.0, 0.0]  # reuse in a failed task pays nothing
    assert skill_integrated_rewards([0, 1], {(1, 0)}) == [0.0, 2.0]  # task 2 still gets its reuse bonus
    assert skill_integrated_rewards([1, 1], set()) == [1.0, 1.0]


def naive_general(r, reuse):
    n = len(r)
    out = []
    for k in range(n):
        gen = 0
        for j in range(k + 1, n):
            if r[j] == 1 and (j, k) in reuse:
                gen = 1
        used = 1 if any((k, i) in reuse for i in range(k)) else 0
        out.append(r[k] + r[k] * gen + r[k] * used)
    return out


@pytest.mark.parametrize("length", [1, 3, 4])
def test_general_chain_matches_naive_loop(length):
    pairs = [(j, k) for j in range(length) for k in range(j)]
    for r in itertools.product([0, 1], repeat=length):
        for mask in range(2 ** len(pairs)):
            reuse = {p for i, p in enumerate(pairs) if mask >> i & 1}
            got = skill_integrated_rewards(r, reuse)
            assert got == naive_general(list(r), reuse)
            assert all(0 <= x <= 3 for x in got)


def test_middle_task_earns_both_bonuses_and_bad_pairs_are_ignored():
    assert skill_integrated_rewards([1, 1, 1], {(1, 0), (2, 1)}) == [2.0, 3.0, 2.0]
    assert skill_integrated_rewards([1, 1], {(0, 1), (5, 0)}) == [1.0, 1.0]  # not j > k, out of range


def test_outcome_rewards_and_no_action_penalty():
    assert outcome_rewards([True, False]) == [1.0, 0.0]
    r, v = chain_rewards([1, 0], {(1, 0)}, [True, True], [False, True])
    assert (r, v) == ([1.0, -1.0], [True, True])
    r, v = chain_rewards([0, 0], set(), [True, False], [True, False], no_action_penalty=-1.0)
    assert (r, v) == ([-1.0, 0.0], [True, False])  # the chain ended in task 1: task 2 is not played
    r, _ = chain_rewards([0, 0], set(), [True, False], [True, False], no_action_penalty=None)
    assert r == [0.0, 0.0]
    r, _ = chain_rewards([1, 1], {(1, 0)}, [True, True], mode="outcome")
    assert r == [1.0, 1.0]
    with pytest.raises(ValueError, match="reward mode"):
        chain_rewards([1], set(), [True], mode="chain")


def test_group_rewards_and_position_advantages():
    def ro(success, reuse, played=(True, True), no_action=(False, False)):
        return ChainRollout(0, [], list(success), list(played), list(no_action), set(reuse))

    group = [
        ro([1, 1], {(1, 0)}),
        ro([1, 0], set()),
        ro([0, 1], set()),
        ro([0, 0], set(), (True, False), (True, False)),
    ]
    rewards, valid = group_rewards(group)
    assert rewards.tolist() == [[2.0, 2.0], [1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]
    assert valid.tolist() == [[True, True], [True, True], [True, True], [True, False]]
    adv = position_advantages(rewards, valid)
    # position 1: mean(2, 1, 0, -1) = 0.5; position 2: mean over the 3 played = 1.0
    assert adv.tolist() == [[1.5, 1.0], [0.5, -1.0], [-0.5, 0.0], [-1.5, 0.0]]
    assert torch.equal(adv[:, 1], position_advantages(rewards[:, 1:], valid[:, 1:])[:, 0])


def test_progress_reward_is_the_domains_score_share_or_the_outcome():
    # BALROG's progression: max(score / 100, won); no score (ALFWorld, unplayed) = the outcome
    assert progress_rewards([False, True, False, True], [40.0, 80.0, None, None]) == [0.4, 1.0, 0.0, 1.0]
    assert progress_rewards([True, False], []) == [1.0, 0.0]
    r, v = chain_rewards([0, 0], set(), [True, True], [False, True], mode="progress", score=[60.0, 30.0])
    assert (r, v) == ([0.6, -1.0], [True, True])  # the no-action penalty still applies
    r, _ = chain_rewards([1, 0], {(1, 0)}, [True, True], mode="outcome", score=[60.0, 30.0])
    assert r == [1.0, 0.0]  # other modes ignore the score


def test_group_rewards_read_each_rollouts_scores_in_progress_mode():
    group = [ChainRollout(0, [], [False, False], [True, True], [False, False], task_score=[50.0, 0.0]),
             ChainRollout(0, [], [True, False], [True, True], [False, False], task_score=[100.0, 25.0])]  # fmt: skip
    rewards, _ = group_rewards(group, mode="progress")
    assert rewards.tolist() == [[0.5, 0.0], [1.0, 0.25]]
    assert group_rewards(group, mode="outcome")[0].tolist() == [[0.0, 0.0], [1.0, 0.0]]
