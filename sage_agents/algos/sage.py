"""SAGE: skill-integrated reward over task chains and per-position group advantages (arXiv 2512.17102).

A SAGE rollout is a *chain* of L related tasks played in order by one policy with one skill library that
starts empty (sequential rollout, :func:`sage_agents.rollout.rollout_chains`). A group is G rollouts of the
same chain.

Skill-integrated reward, exactly as in the paper for L = 2 (r_k in {0, 1}; skill(2|1) = task 2 called a skill
created in task 1)::

    R1 = r1 + 1[r1=1] * 1[r2=1] * skill(2|1)
    R2 = r2 + 1[r2=1] * skill(2|1)

Generalisation to L tasks (0-based k here; s(j|k) = task j called a skill created in task k, j > k)::

    R_k = r_k + 1[r_k=1] * max_{j>k} 1[r_j=1] * s(j|k)        (generation bonus: a later success reused
                                                                k's skill)
              + 1[r_k=1] * max_{i<k} s(k|i)                    (reuse bonus: k succeeded reusing an earlier
                                                                skill)

For L = 2 the first bonus exists only for task 1 and the second only for task 2, which gives the two formulas
above (tested for all 8 cases of (r1, r2, skill)). Each bonus is an indicator ("any later reuser", "any
earlier skill") rather than a count, so every R_k stays in {0, 1, 2, 3} whatever L is: rewards of different
chain positions and chain lengths stay on one scale, and a skill is not paid again for each extra reuse. A
middle task can earn both bonuses: it reused an earlier skill *and* made one that a later task reused.

"No parseable action": the paper gives -1 to a reply with no code and ends the episode. With
``no_action_penalty = -1.0`` (the paper's value, the default of :class:`sage_agents.config.TrainConfig`) the
rollout stops the chain at the first completion with no command / definition / call; that task's reward is the
penalty and the tasks after it are unplayed (left out of the advantage statistics and of the loss).

Advantages are computed per chain position across the group (position-k rollouts against position-k rollouts),
``A[g, k] = R[g, k] - mean_{g' played k} R[g', k]`` without std division (the paper's GRPO variant).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import torch

from sage_agents.algos.grpo import group_advantages

REWARD_MODES = ("skill", "outcome", "progress")


# ---------------------------------------------------------------------------------------------- REWARDS
def outcome_rewards(success: Sequence[bool | int]) -> list[float]:
    """Outcome-only reward ``R_k = r_k`` (the paper's "outcome-only" ablation and plain GRPO)."""
    return [1.0 if s else 0.0 for s in success]


def progress_rewards(success: Sequence[bool | int], score: Sequence[float | None]) -> list[float]:
    """Progress reward ``R_k = max(score_k / 100, r_k)``: BALROG's progression, for domains that score their tasks.

    ``score_k`` is the latest 0-100 score the domain reported for task k (TextWorld's share of the recipe's points,
    ScienceWorld's task score); a task without one (ALFWorld, or a position not played) gets its outcome ``r_k``.
    A sparse domain's groups then differ by how far each rollout got, not only by whether it won.
    """
    scores = list(score) or [None] * len(success)
    return [max(float(v or 0.0) / 100, 1.0 if s else 0.0) for s, v in zip(success, scores, strict=True)]


def skill_integrated_rewards(success: Sequence[bool | int], reuse: Collection[tuple[int, int]]) -> list[float]:
    """SAGE's skill-integrated reward for a chain of any length (arXiv 2512.17102; see the module docstring).

    Args:
        success: (L,) task outcomes r_k (truthy = task k completed).
        reuse: pairs ``(j, k)`` meaning "task j called a skill created in task k" (0-based, j > k).

    Returns:
        (L,) rewards R_k.
    """
    r = [1 if s else 0 for s in success]
    n = len(r)
    s = {(j, k) for j, k in reuse if 0 <= k < j < n}
    rewards = []
    for k in range(n):
        generation = max((r[j] for j in range(k + 1, n) if (j, k) in s), default=0)
        reused = 1 if any((k, i) in s for i in range(k)) else 0
        rewards.append(float(r[k] + r[k] * generation + r[k] * reused))
    return rewards


def chain_rewards(
    success: Sequence[bool | int],
    reuse: Collection[tuple[int, int]],
    played: Sequence[bool],
    no_action: Sequence[bool] = (),
    *,
    mode: str = "skill",
    no_action_penalty: float | None = -1.0,
    score: Sequence[float | None] = (),
) -> tuple[list[float], list[bool]]:
    """Rewards of one chain rollout and which positions count (were played).

    Args:
        success: (L,) task outcomes.
        reuse: ``(j, k)`` reuse pairs.
        played: (L,) whether the policy acted in task k.
        no_action: (L,) True at the task where a completion had no parseable action (the chain stopped there).
        mode: ``skill`` (skill-integrated), ``outcome`` or ``progress`` (:func:`progress_rewards`).
        no_action_penalty: reward of the task with no parseable action; None = no penalty (plain reward).
        score: (L,) the domain's latest 0-100 score of task k, None where it reports none (``progress`` mode).

    Returns:
        ``(R, valid)``, both of length L.
    """
    if mode not in REWARD_MODES:
        raise ValueError(f"reward mode {mode!r} is not one of {REWARD_MODES}.")
    if mode == "skill":
        rewards = skill_integrated_rewards(success, reuse)
    else:
        rewards = progress_rewards(success, score) if mode == "progress" else outcome_rewards(success)
    valid = [bool(p) for p in played]
    if no_action_penalty is not None:
        for k, flag in enumerate(no_action):
            if flag:
                rewards[k] = float(no_action_penalty)
    return rewards, valid


# ---------------------------------------------------------------------------------------------- ADVANTAGES
def position_advantages(
    rewards: torch.Tensor, valid: torch.Tensor | None = None, *, scale_std: bool = False
) -> torch.Tensor:
    """Per-position group advantages: column k of (G, L) ``rewards`` is normalised only against column k."""
    return group_advantages(rewards, valid, scale_std=scale_std)  # (G, L)


def group_rewards(
    rollouts: Sequence[Any], *, mode: str = "skill", no_action_penalty: float | None = -1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rewards of a group of :class:`sage_agents.rollout.ChainRollout` of one chain.

    Returns:
        ``(R, valid)``: (G, L) float rewards and (G, L) bool of played positions.
    """
    rows, valid = [], []
    for ro in rollouts:
        r, v = chain_rewards(
            ro.task_success, ro.reuse, ro.played, ro.no_action, mode=mode, no_action_penalty=no_action_penalty,
            score=ro.task_score,
        )  # fmt: skip
        rows.append(r)
        valid.append(v)
    return torch.tensor(rows, dtype=torch.float), torch.tensor(valid, dtype=torch.bool)  # (G, L), (G, L)
