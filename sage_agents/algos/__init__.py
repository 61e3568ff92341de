"""Algorithms as pure functions.

GRPO losses and advantages (:mod:`.grpo`), SAGE rewards (:mod:`.sage`), GiGPO's step-level advantage (:mod:`.gigpo`).
"""

from sage_agents.algos.gigpo import step_advantages, task_returns
from sage_agents.algos.grpo import (
    LOSS_TYPES,
    BatchCounts,
    batch_counts,
    clipped_surrogate,
    group_advantages,
    kl_k3,
    merge_counts,
    policy_loss,
    row_weights,
)
from sage_agents.algos.sage import (
    chain_rewards,
    group_rewards,
    outcome_rewards,
    position_advantages,
    skill_integrated_rewards,
)

__all__ = [
    "LOSS_TYPES",
    "BatchCounts",
    "batch_counts",
    "chain_rewards",
    "clipped_surrogate",
    "group_advantages",
    "group_rewards",
    "kl_k3",
    "merge_counts",
    "outcome_rewards",
    "policy_loss",
    "position_advantages",
    "row_weights",
    "skill_integrated_rewards",
    "step_advantages",
    "task_returns",
]
