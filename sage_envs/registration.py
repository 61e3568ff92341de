"""Every env id of the project, registered in one place (``import sage_envs`` runs this)."""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

ENV_IDS = ("SageChain-ALFWorld-v0",)


def register_envs() -> None:
    """Register the project's env ids with Gymnasium; idempotent."""
    if "SageChain-ALFWorld-v0" not in registry:
        register(
            id="SageChain-ALFWorld-v0",
            entry_point="sage_envs.domains.alfworld.env:AlfworldChainEnv",
            # The chain env ends its own episodes (every task has a turn budget): no TimeLimit wrapper.
            max_episode_steps=None,
        )
