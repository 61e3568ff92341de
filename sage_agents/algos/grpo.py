"""GRPO for multi-turn agents: group-relative advantages, loss-variant token weights, clipped loss, KL.

Pure functions first (each cites its paper), then the one function the trainer calls per micro-batch.

Notation: a *row* is one agent turn (prompt, completion); a *sequence* is what a loss variant averages over:
by default all turns of one task attempt (a trajectory), like TRL's multi-turn completions whose environment
tokens are masked out; with ``sequence_unit="turn"`` every row is its own sequence (verl-agent style). Only
completion tokens (the policy's own) carry loss: prompt tokens (task, history, observations = environment
tokens) are never gathered.

The loss of one optimisation step is ``sum_b w_b * sum_t mask[b, t] * loss[b, t]`` where the row weight
``w_b`` comes from :func:`row_weights` and is computed over the whole batch before it is cut into
micro-batches, so gradient accumulation gives exactly the full-batch gradient. With several processes each
holds part of the batch: the counts a variant divides by (:class:`BatchCounts`) are merged over processes
(:func:`merge_counts`) before the weights are made, so every loss variant is still the full-batch gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

LOSS_TYPES = ("grpo", "dr_grpo", "dapo")


# ---------------------------------------------------------------------------------------------- ADVANTAGES
def group_advantages(
    rewards: torch.Tensor, valid: torch.Tensor | None = None, *, scale_std: bool = False, eps: float = 1e-4
) -> torch.Tensor:
    """Group-relative advantages along dim 0 (the group): ``A = R - mean(R)`` (optionally ``/ (std + eps)``).

    GRPO, DeepSeekMath arXiv 2402.03300 Sec. 4.1.2 (outcome supervision): ``(r_i - mean(r)) / std(r)``.
    SAGE (arXiv 2512.17102) and Dr. GRPO (arXiv 2503.20783 Sec. 3.2) drop the division by the std, hence the
    default ``scale_std=False``. The std is the unbiased one (as ``torch.std`` and TRL).

    Args:
        rewards: (G, ...) rewards; column ``[:, k]`` is compared only with itself (e.g. chain position k).
        valid: (G, ...) bool; invalid entries (an unplayed task) are left out of the statistics and get A=0.
        scale_std: divide by the group's std.
        eps: added to the std.

    Returns:
        (G, ...) advantages.
    """
    rewards = rewards.float()
    valid = torch.ones_like(rewards, dtype=torch.bool) if valid is None else valid.bool()
    w = valid.float()
    n = w.sum(0)  # (...)
    mean = (rewards * w).sum(0) / n.clamp(min=1)  # (...)
    adv = (rewards - mean) * w  # (G, ...)
    if scale_std:
        var = (adv**2).sum(0) / (n - 1).clamp(min=1)  # (...) unbiased
        adv = adv / (var.sqrt() + eps)
    return adv


# ---------------------------------------------------------------------------------------------- LOSS WEIGHTS
@dataclass(frozen=True)
class BatchCounts:
    """The batch sizes the loss variants divide by (of one process's rows, or merged over processes)."""

    sequences: int
    """``S``: sequences (trajectories or turns) in the batch."""
    tokens: int
    """``sum_s |o_s|``: completion tokens in the batch."""
    longest: int
    """``max_s |o_s|``: completion tokens of the longest sequence."""


def _dense_sequences(lengths: torch.Tensor, seq_ids: Sequence[int] | torch.Tensor | None) -> torch.Tensor:
    """``(seq_len, seq)``: (S,) tokens of each sequence and (B,) each row's dense sequence id (0..S-1)."""
    if seq_ids is None:
        seq_ids = torch.arange(len(lengths))
    _, seq = torch.unique(torch.as_tensor(seq_ids), return_inverse=True)  # (B,) dense ids 0..S-1
    n_seq = int(seq.max()) + 1 if len(seq) else 0
    return torch.zeros(n_seq).index_add_(0, seq, lengths), seq


def batch_counts(
    lengths: Sequence[int] | torch.Tensor, seq_ids: Sequence[int] | torch.Tensor | None = None
) -> BatchCounts:
    """The :class:`BatchCounts` of a batch of rows.

    Args:
        lengths: (B,) completion tokens per row.
        seq_ids: (B,) sequence of each row; None = one row per sequence.

    Returns:
        Sequences, tokens and the longest sequence's tokens.
    """
    seq_len, _ = _dense_sequences(torch.as_tensor(lengths, dtype=torch.float), seq_ids)  # (S,)
    return BatchCounts(len(seq_len), int(seq_len.sum()), int(seq_len.max()) if len(seq_len) else 0)


def merge_counts(parts: Sequence[BatchCounts]) -> BatchCounts:
    """Counts of a batch split into ``parts`` (one per process; a sequence never spans two parts)."""
    return BatchCounts(
        sum(p.sequences for p in parts), sum(p.tokens for p in parts), max((p.longest for p in parts), default=0)
    )


def row_weights(
    lengths: Sequence[int] | torch.Tensor,
    loss_type: str = "grpo",
    seq_ids: Sequence[int] | torch.Tensor | None = None,
    max_len: int | None = None,
    totals: BatchCounts | None = None,
) -> torch.Tensor:
    """Per-row token weight ``w_b`` of each loss variant; every completion token of row b gets ``w_b``.

    * ``grpo`` (arXiv 2402.03300 eq. 3): mean over a sequence's tokens, then mean over sequences:
      ``w_b = 1 / (|o_s(b)| * S)``.
    * ``dr_grpo`` (arXiv 2503.20783 eq. 5-6): sum over tokens divided by a constant ``L_max``, mean over
      sequences: ``w_b = 1 / (S * L_max)``; ``L_max`` = ``max_len`` or, when None, the longest sequence.
    * ``dapo`` (arXiv 2503.14476 eq. 8, token-level loss): mean over all tokens of the batch:
      ``w_b = 1 / sum_s |o_s|``.

    ``S``, ``sum_s |o_s|`` and the longest sequence are those of ``totals`` (the whole batch when these rows are
    one process's part of it) or, when None, of these rows; ``|o_s(b)|`` is always the row's own sequence's.

    Args:
        lengths: (B,) completion tokens per row.
        loss_type: ``grpo``, ``dr_grpo`` or ``dapo``.
        seq_ids: (B,) sequence of each row (rows of one trajectory share an id); None = one row per sequence.
        max_len: the constant ``L_max`` of dr_grpo.
        totals: the whole batch's counts (:func:`merge_counts` of every process's :func:`batch_counts`).

    Returns:
        (B,) float weights.
    """
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type={loss_type!r} is not one of {LOSS_TYPES}.")
    lengths = torch.as_tensor(lengths, dtype=torch.float)  # (B,)
    seq_len, seq = _dense_sequences(lengths, seq_ids)  # (S,), (B,)
    if totals is None:
        totals = batch_counts(lengths, seq_ids)
    if loss_type == "grpo":
        return 1.0 / (seq_len[seq].clamp(min=1) * totals.sequences)  # (B,)
    if loss_type == "dr_grpo":
        l_max = float(max_len) if max_len else float(max(totals.longest, 1))
        return torch.full_like(lengths, 1.0 / (totals.sequences * l_max))  # (B,)
    return torch.full_like(lengths, 1.0 / max(totals.tokens, 1))  # (B,) dapo


# ------------------------------------------------------------------------------------------ PER-TOKEN LOSS
def clipped_surrogate(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, eps_low: float = 0.2, eps_high: float = 0.2
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO clipped surrogate as a loss (to minimise), per token.

    ``-min(rho * A, clip(rho, 1 - eps_low, 1 + eps_high) * A)`` with ``rho = exp(logp - old_logp)``:
    PPO arXiv 1707.06347 eq. 7, as used by GRPO (arXiv 2402.03300 eq. 3); ``eps_high > eps_low`` is DAPO's
    clip-higher (arXiv 2503.14476 eq. 10).

    Args:
        logp: (B, T) current log-probs.
        old_logp: (B, T) log-probs of the sampling policy.
        adv: (B, T) or (B, 1) advantages.
        eps_low: lower clip range.
        eps_high: upper clip range.

    Returns:
        ``(loss, clipped)``: (B, T) loss and (B, T) bool, True where the clipped branch was taken.
    """
    ratio = torch.exp(logp - old_logp)  # (B, T)
    unclipped = ratio * adv
    clipped_obj = torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * adv
    return -torch.min(unclipped, clipped_obj), clipped_obj < unclipped


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token KL(pi || pi_ref) estimate ``exp(d) - d - 1`` with ``d = ref_logp - logp`` (always >= 0).

    The "k3" estimator of J. Schulman, "Approximating KL divergence" (2020), used by GRPO arXiv 2402.03300
    eq. 4.
    """
    d = ref_logp - logp
    return torch.exp(d) - d - 1


# ---------------------------------------------------------------------------------------- MICRO-BATCH LOSS
def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    mask: torch.Tensor,
    weights: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    beta: float = 0.0,
    ref_logp: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The GRPO objective of one micro-batch: ``sum_b w_b sum_t mask * (surrogate + beta * KL)``.

    Args:
        logp: (B, T) current log-probs of the completion tokens.
        old_logp: (B, T) sampling-time log-probs.
        adv: (B,) advantage of each row (its trajectory's).
        mask: (B, T) 1 on completion tokens, 0 on padding.
        weights: (B,) row weights from :func:`row_weights` (computed over the whole batch).
        eps_low: lower clip range.
        eps_high: upper clip range.
        beta: KL coefficient (0 = no reference model, as in SAGE).
        ref_logp: (B, T) reference log-probs, needed when ``beta > 0``.

    Returns:
        ``(loss, stats)``; stats are weighted sums (summing them over micro-batches gives batch means).
    """
    per_token, clipped = clipped_surrogate(logp, old_logp, adv[:, None], eps_low, eps_high)  # (B, T)
    tw = weights[:, None] * mask  # (B, T) token weights
    stats = {"policy_loss": (per_token * tw).sum().detach(), "clip_ratio": (clipped.float() * tw).sum()}
    if beta > 0:
        if ref_logp is None:
            raise ValueError("beta > 0 needs ref_logp (the frozen reference model's log-probs).")
        kl = kl_k3(logp, ref_logp)  # (B, T)
        per_token = per_token + beta * kl
        stats["kl"] = (kl * tw).sum().detach()
    loss = (per_token * tw).sum()
    return loss, stats
