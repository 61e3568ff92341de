"""Agents are plug-ins: a factory registered under the entry-point group ``sage_agents.agents``.

A third-party package adds an agent with no change here::

    [project.entry-points."sage_agents.agents"]
    my_agent = "my_package.agents:make_my_agent"   # factory(**kwargs) -> agent

An agent has ``act(observation, info) -> str`` (the action text for ``env.step``) and may have ``reset()``
(called at each chain start; given ``seed=`` when its signature takes one), ``act_batch(observations, infos,
slots=None) -> list[str]`` (one action per observation; ``slots`` name the env each comes from, stable while its
chain lasts, so per-env state can follow them; the evaluator's ``batch_size`` uses it), ``train(...)``,
``tokens_generated`` (a running count of generated tokens the evaluator reads; ``last_tokens``, the count of each
observation of the latest ``act_batch``, in batched evaluation; agents without them are charged the
whitespace-separated words of their actions) and ``skill_library`` (a ``sage_envs.SkillLibrary`` the evaluator
starts every chain from: a trained agent's learned skills).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from sage_envs.error import suggest

ENTRY_POINT_GROUP = "sage_agents.agents"


@runtime_checkable
class Agent(Protocol):
    """What the evaluator and the trainers need of an agent."""

    def act(self, observation: dict[str, str], info: dict[str, Any]) -> str:
        """Return the action text for ``env.step`` given the current observation dict and info."""


class UnknownAgentError(KeyError):
    """No agent factory is registered under this name."""

    def __str__(self) -> str:
        return str(self.args[0])


def agent_factories() -> dict[str, Callable[..., Agent]]:
    """All registered agent factories by name (built-in and third-party), loaded lazily on lookup."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}  # type: ignore[misc]


def list_agents() -> list[str]:
    """The names of every registered agent, sorted."""
    return sorted(agent_factories())


def make_agent(name: str, **kwargs: Any) -> Agent:
    """Build the agent registered as ``name`` with ``kwargs`` passed to its factory."""
    factories = agent_factories()
    if name not in factories:
        raise UnknownAgentError(
            f"no agent named {name!r} in entry-point group {ENTRY_POINT_GROUP!r}.{suggest(name, factories)} "
            f"Registered: {sorted(factories)}."
        )
    agent = factories[name].load()(**kwargs)
    if not isinstance(agent, Agent):
        raise TypeError(f"the factory of agent {name!r} returned {type(agent).__name__}, which has no act() method.")
    return agent
