"""Each pure function of sage_agents.algos.grpo against a naive loop and hand-computed numbers."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sage_agents.algos.grpo import (
    BatchCounts,
    batch_counts,
    clipped_surrogate,
    group_advantages,
    kl_k3,
    merge_counts,
    policy_loss,
    row_weights,
)


def naive_advantages(rewards, valid, scale_std, eps=1e-4):
    g, length = len(rewards), len(rewards[0])
    out = [[0.0] * length for _ in range(g)]
    for k in range(length):
        vals = [rewards[i][k] for i in range(g) if valid[i][k]]
        if not vals:
            continue
        mean = sum(vals) / len(vals)
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / max(1, len(vals) - 1))
        for i in range(g):
            if valid[i][k]:
                out[i][k] = (rewards[i][k] - mean) / (std + eps if scale_std else 1.0)
    return out


def test_group_advantages_hand_numbers():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0])
    assert group_advantages(r).tolist() == [0.5, -0.5, -0.5, 0.5]
    std = math.sqrt(1 / 3)  # unbiased std of [1, 0, 0, 1]
    expected = [0.5 / (std + 1e-4), -0.5 / (std + 1e-4)]
    assert group_advantages(r, scale_std=True)[:2].tolist() == pytest.approx(expected)
    r2 = torch.tensor([[2.0, 1.0], [0.0, -1.0], [1.0, 0.0]])
    valid = torch.tensor([[True, True], [True, False], [True, True]])
    assert group_advantages(r2, valid).tolist() == [[1.0, 0.5], [-1.0, 0.0], [0.0, -0.5]]


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 6).flatmap(
        lambda g: st.tuples(
            st.lists(
                st.lists(st.sampled_from([-1.0, 0.0, 1.0, 2.0, 3.0]), min_size=3, max_size=3),
                min_size=g,
                max_size=g,
            ),
            st.lists(st.lists(st.booleans(), min_size=3, max_size=3), min_size=g, max_size=g),
        )
    ),
    st.booleans(),
)
def test_group_advantages_matches_naive_loop(data, scale_std):
    rewards, valid = data
    got = group_advantages(torch.tensor(rewards), torch.tensor(valid), scale_std=scale_std)
    assert torch.allclose(got, torch.tensor(naive_advantages(rewards, valid, scale_std)), atol=1e-5)
    if not scale_std:
        assert got.sum(0).abs().max() < 1e-5  # advantages of each position sum to zero over the group


def naive_weights(lengths, loss_type, seq_ids, max_len=None):
    seqs = sorted(set(seq_ids))
    seq_tokens = {s: sum(n for n, t in zip(lengths, seq_ids, strict=True) if t == s) for s in seqs}
    out = []
    for s in seq_ids:
        if loss_type == "grpo":
            out.append(1 / seq_tokens[s] / len(seqs))
        elif loss_type == "dr_grpo":
            out.append(1 / (len(seqs) * (max_len or max(seq_tokens.values()))))
        else:
            out.append(1 / sum(lengths))
    return out


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo"])
@pytest.mark.parametrize("max_len", [None, 50])
def test_row_weights_match_naive_loop(loss_type, max_len):
    lengths, seq_ids = [3, 5, 2, 7, 1], [0, 0, 1, 2, 2]
    got = row_weights(lengths, loss_type, seq_ids, max_len)
    assert got.tolist() == pytest.approx(naive_weights(lengths, loss_type, seq_ids, max_len))
    # total weight on tokens: grpo/dapo are means (sum of all token weights = 1)
    if loss_type != "dr_grpo":
        assert float((got * torch.tensor(lengths, dtype=torch.float)).sum()) == pytest.approx(1.0)


def test_row_weights_hand_numbers():
    # two sequences: rows of 2+2 tokens and one row of 4 tokens
    assert row_weights([2, 2, 4], "grpo", [0, 0, 1]).tolist() == [0.125, 0.125, 0.125]
    assert row_weights([2, 2, 4], "grpo", None).tolist() == pytest.approx([1 / 6, 1 / 6, 1 / 12])
    assert row_weights([2, 2, 4], "dr_grpo", [0, 0, 1], max_len=8).tolist() == [1 / 16] * 3
    assert row_weights([2, 2, 4], "dapo").tolist() == [0.125] * 3
    with pytest.raises(ValueError, match="loss_type"):
        row_weights([1], "ppo")


def test_batch_counts_hand_numbers_and_merge():
    # sequences 0: 3+5 tokens, 1: 2 tokens, 2: 7+1 tokens
    assert batch_counts([3, 5, 2, 7, 1], [0, 0, 1, 2, 2]) == BatchCounts(sequences=3, tokens=18, longest=8)
    assert batch_counts([3, 5]) == BatchCounts(2, 8, 5)
    assert batch_counts([]) == BatchCounts(0, 0, 0)
    parts = [BatchCounts(3, 18, 8), BatchCounts(2, 4, 3), BatchCounts(0, 0, 0)]
    assert merge_counts(parts) == BatchCounts(5, 22, 8)


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo"])
@pytest.mark.parametrize("split", [1, 2, 3])
def test_row_weights_of_split_batch_with_merged_counts_equal_full_batch(loss_type, split):
    # a batch cut between processes (a sequence never spans two): each part's weights with the merged counts
    # are the full batch's weights, whatever the parts' sizes
    lengths, seq_ids = [3, 5, 2, 7, 1, 4], [0, 0, 1, 2, 2, 3]
    full = row_weights(lengths, loss_type, seq_ids)
    cut = [0, 2, 3, 5, 6][split]
    parts = [(lengths[:cut], seq_ids[:cut]), (lengths[cut:], seq_ids[cut:])]
    totals = merge_counts([batch_counts(n, s) for n, s in parts])
    got = torch.cat([row_weights(n, loss_type, s, totals=totals) for n, s in parts])
    assert got.tolist() == pytest.approx(full.tolist())
    if loss_type != "grpo":  # per-part normalisation (the old per-process behaviour) gives other weights
        assert torch.cat([row_weights(n, loss_type, s) for n, s in parts]).tolist() != pytest.approx(full.tolist())


def test_clipped_surrogate_matches_naive_loop():
    torch.manual_seed(0)
    logp, old = torch.randn(4, 6) * 0.3 - 1, torch.randn(4, 6) * 0.3 - 1
    adv = torch.tensor([[1.0], [-1.0], [0.5], [-2.0]])
    loss, clipped = clipped_surrogate(logp, old, adv, 0.2, 0.28)
    for b in range(4):
        for t in range(6):
            ratio = math.exp(logp[b, t] - old[b, t])
            a = float(adv[b, 0])
            obj = min(ratio * a, min(max(ratio, 0.8), 1.28) * a)
            assert float(loss[b, t]) == pytest.approx(-obj, rel=1e-5, abs=1e-6)
            assert bool(clipped[b, t]) == (min(max(ratio, 0.8), 1.28) * a < ratio * a)


def test_clipped_surrogate_hand_numbers():
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.0]]))  # ratios 1.5, 0.5, 1.0 against old = 0
    loss, clipped = clipped_surrogate(logp, torch.zeros(1, 3), torch.tensor([[2.0]]), 0.2, 0.2)
    assert loss[0].tolist() == pytest.approx([-2.4, -1.0, -2.0])  # min(3, 2.4), min(1, 1.6), 2
    assert clipped.tolist() == [[True, False, False]]
    loss, _ = clipped_surrogate(logp, torch.zeros(1, 3), torch.tensor([[-1.0]]), 0.2, 0.2)
    assert loss[0].tolist() == pytest.approx([1.5, 0.8, 1.0])  # min(-1.5, -1.2), min(-0.5, -0.8), -1


def test_kl_k3_hand_numbers_and_loop():
    assert kl_k3(torch.tensor(0.3), torch.tensor(0.3)).item() == 0.0
    d = math.log(0.5)  # ref/pi = 0.5
    assert kl_k3(torch.tensor(0.0), torch.tensor(d)).item() == pytest.approx(0.5 - d - 1)
    torch.manual_seed(0)
    logp, ref = torch.randn(3, 4), torch.randn(3, 4)
    got = kl_k3(logp, ref)
    for b in range(3):
        for t in range(4):
            dd = float(ref[b, t] - logp[b, t])
            assert float(got[b, t]) == pytest.approx(math.exp(dd) - dd - 1, rel=1e-5, abs=1e-6)
    assert (got >= 0).all()


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo"])
@pytest.mark.parametrize("beta", [0.0, 0.1])
def test_policy_loss_micro_batches_sum_to_full_batch(loss_type, beta):
    torch.manual_seed(1)
    lengths = [3, 5, 2, 4]
    mask = torch.zeros(4, 5)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
    logp = torch.randn(4, 5) * 0.2 - 1
    old, ref = logp.detach() + 0.05 * torch.randn(4, 5), logp.detach() + 0.1 * torch.randn(4, 5)
    adv = torch.tensor([1.0, -0.5, 0.25, -0.75])
    w = row_weights(lengths, loss_type, [0, 0, 1, 2])
    full, _ = policy_loss(logp, old, adv, mask, w, beta=beta, ref_logp=ref, eps_high=0.28)
    parts = [
        policy_loss(logp[s], old[s], adv[s], mask[s], w[s], beta=beta, ref_logp=ref[s], eps_high=0.28)[0]
        for s in (slice(0, 1), slice(1, 3), slice(3, 4))
    ]
    assert float(sum(parts)) == pytest.approx(float(full), rel=1e-6)
    # naive loop over tokens
    naive = 0.0
    for b in range(4):
        for t in range(lengths[b]):
            ratio = math.exp(logp[b, t] - old[b, t])
            a = float(adv[b])
            term = -min(ratio * a, min(max(ratio, 0.8), 1.28) * a)
            dd = float(ref[b, t] - logp[b, t])
            term += beta * (math.exp(dd) - dd - 1)
            naive += float(w[b]) * term
    assert float(full) == pytest.approx(naive, rel=1e-5)


def test_policy_loss_needs_reference_when_beta_positive():
    x = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="ref_logp"):
        policy_loss(x, x, torch.zeros(1), torch.ones(1, 2), torch.ones(1), beta=0.1)
