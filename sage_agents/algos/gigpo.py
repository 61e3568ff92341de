"""GiGPO's step-level advantage: turns taken in the same state are compared with each other (arXiv 2505.10978).

GRPO's episode advantage gives every turn of an attempt the same credit, good turns of a failed attempt and
wasted turns of a successful one alike. GiGPO (Feng et al., 2025; verl-agent) adds a second grouping inside the G
rollouts of a group: the turns taken in the same *anchor state* form a step-level group, and each turn's
discounted return is compared with the mean of its step group::

    R_t   = sum_{t' >= t} gamma^(t' - t) r_t'                         (discounted return of turn t)
    A^S_t = (R_t - mean{R_u : turn u acted in the anchor state of t}) / F_norm
    A_t   = A^E + omega * A^S_t                                       (omega = 1 in the paper)

with ``F_norm`` the step group's std or 1 (here: :attr:`TrainConfig.scale_std`, as for the episode advantage).
A turn alone in its state gets ``A^S = 0``. The paper reports ALFWorld 72.8 -> 86.7 over GRPO at 1.5B
(REFERENCE.md, "Other anchors").

What an anchor state is (``TrainConfig.step_anchor``), given by the caller as one hashable key per turn:

* ``observation`` (the paper's): the chain position and the environment's text the turn acted on (a task's first
  turns share its start). States reached by different paths match, as loops and revisits do; states the text
  does not tell apart (what the agent holds, "Nothing happens.") are merged.
* ``prompt``: the chain position and the prompt tokens the policy saw (task, history window, earlier actions,
  skills, observation, admissible commands). Turns with one prompt are one decision for the policy, so nothing is
  merged; with the task's earlier actions in the prompt it matches only turns with one history, mostly a group's
  first turns (measured on the demo's ALFWorld groups: 15-26% of turns shared their prompt with another).

A task's reward arrives at its last turn: the per-turn reward is the position's reward ``R_k`` (SAGE's
skill-integrated one, or the outcome) at the task's last turn and 0 before, so ``R_t = gamma^(T-1-t) R_k`` for a
task of T turns. Of two turns in one state, the one whose path finished the task sooner gets more credit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence

import torch


def task_returns(num_turns: int, reward: float, gamma: float) -> list[float]:
    """Discounted return of each turn of one task whose reward ``reward`` arrives at its last turn.

    ``R_t = gamma^(T - 1 - t) * reward`` for t = 0..T-1 (T = ``num_turns``).
    """
    return [reward * gamma ** (num_turns - 1 - t) for t in range(num_turns)]


def step_advantages(
    returns: Sequence[float], anchors: Sequence[Hashable], *, scale_std: bool = False, eps: float = 1e-4
) -> torch.Tensor:
    """GiGPO's step-level advantage ``A^S``: each return minus the mean return of the turns with its anchor.

    Args:
        returns: (N,) discounted returns of the N turns of one group (every rollout, every chain position).
        anchors: (N,) anchor state of each turn; equal anchors form one step group.
        scale_std: divide by the step group's (unbiased) std, as :func:`sage_agents.algos.grpo.group_advantages`.
        eps: added to the std.

    Returns:
        (N,) advantages; 0 for a turn alone in its step group.
    """
    if len(returns) != len(anchors):
        raise ValueError(f"{len(returns)} returns but {len(anchors)} anchors: one anchor per turn.")
    values = torch.as_tensor(returns, dtype=torch.float)  # (N,)
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, anchor in enumerate(anchors):
        members[anchor].append(i)
    adv = torch.zeros_like(values)
    for idx in members.values():
        if len(idx) < 2:
            continue  # no other turn in this state: nothing to compare with
        group = values[idx]
        centred = group - group.mean()
        adv[idx] = centred / (group.std() + eps) if scale_std else centred
    return adv
