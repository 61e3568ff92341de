"""Every env id of the project, registered in one place (``import sage_envs`` runs this)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator, register, registry

from sage_envs.error import InvalidConfigError, NoDomainError, suggest

if TYPE_CHECKING:
    from sage_envs.domain import Domain

ENTRY_POINTS = {
    "SageChain-ALFWorld-v0": "sage_envs.domains.alfworld.env:AlfworldChainEnv",
    "SageChain-TextWorld-v0": "sage_envs.domains.textworld.env:TextworldChainEnv",
    "SageChain-ScienceWorld-v0": "sage_envs.domains.scienceworld.env:ScienceWorldChainEnv",
}
"""Each env id of the project and the chain env class behind it."""
ENV_IDS = tuple(ENTRY_POINTS)
DEFAULT_ENV_ID = "SageChain-ALFWorld-v0"
"""The env id tools and agents use when none is given."""


def register_envs() -> None:
    """Register the project's env ids with Gymnasium; idempotent."""
    for env_id, entry_point in ENTRY_POINTS.items():
        if env_id not in registry:
            # The chain env ends its own episodes (every task has a turn budget): no TimeLimit wrapper.
            register(id=env_id, entry_point=entry_point, max_episode_steps=None)


def domain_class(env_id: str) -> type[Domain]:
    """The :class:`~sage_envs.domain.Domain` subclass behind a registered env id, without making the env.

    Agents reach a domain's expert, vocabulary, skill templates and entity pattern through it (they are
    class-level), so that no agent imports a domain package. The env id's entry point must be a
    :class:`~sage_envs.chain.SageChainEnv` subclass that names its domain in ``domain_class``.

    Raises:
        InvalidConfigError: the id is not registered.
        NoDomainError: its entry point names no domain class.
    """
    if env_id not in registry:
        raise InvalidConfigError(
            f"env id {env_id!r} is not registered.{suggest(env_id, registry)} Registered SageChain ids: "
            f"{[name for name in registry if name.startswith('SageChain')]}."
        )
    entry_point = gym.spec(env_id).entry_point
    creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
    found = getattr(creator, "domain_class", None)
    if found is None:
        raise NoDomainError(
            f"env id {env_id!r} has entry point {entry_point!r}, which names no domain class; register a "
            "SageChainEnv subclass whose class attribute domain_class is its Domain subclass."
        )
    return found
