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

A name registered by two packages is refused (:class:`AgentNameTakenError` names both entry points), and
:func:`make_agent` refuses keyword arguments the factory does not accept (:class:`UnknownAgentKwargsError` lists
the accepted ones); a factory that passes its ``**kwargs`` on names the callable in ``forwards_kwargs_to``. A
factory that needs the env's domain (its expert, vocabulary, skill templates) takes ``env_id`` and reaches the
domain through :func:`sage_envs.domain_class`, never by importing a domain package; the evaluator passes it. An
agent that raises, or returns a non-``str`` or oversize action, is recorded by the evaluator, never fatal
(``sage_agents.evaluation``); an optional ``given`` attribute says what it was handed (the summary's ``given``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
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


class AgentNameTakenError(ValueError):
    """Two installed packages register an agent under one name."""


class UnknownAgentKwargsError(TypeError):
    """An agent factory was given keyword arguments it does not accept."""


def agent_factories() -> dict[str, EntryPoint]:
    """All registered agent factories by name (built-in and third-party) as entry points, loaded on lookup.

    Raises:
        AgentNameTakenError: two entry points claim one name (the same one installed twice is not a clash).
    """
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        taken = found.get(ep.name)
        if taken is not None and taken.value != ep.value:
            raise AgentNameTakenError(
                f"agent name {ep.name!r} is registered twice in entry-point group {ENTRY_POINT_GROUP!r}: "
                f"{taken.value!r} (package {_package(taken)}) and {ep.value!r} (package {_package(ep)}); "
                "rename one of them in its package's [project.entry-points] table."
            )
        found[ep.name] = ep
    return found


def _package(ep: EntryPoint) -> str:
    """The name of the distribution that declares ``ep`` (``'?'`` when unknown)."""
    return repr(ep.dist.name) if ep.dist is not None else "'?'"


def accepted_kwargs(factory: Callable[..., Any]) -> set[str] | None:
    """The keyword arguments ``factory`` accepts; None when it takes any (a ``**kwargs`` it does not declare).

    A factory that passes its ``**kwargs`` on declares where in ``forwards_kwargs_to`` (a callable whose own
    accepted names with a default are added; those without, e.g. ``LLMPolicy``'s model, the factory supplies).
    """
    return _accepted(factory, required=True)


def _accepted(factory: Callable[..., Any], required: bool) -> set[str] | None:
    """:func:`accepted_kwargs`; ``required=False`` leaves out the parameters without a default."""
    params = inspect.signature(factory).parameters.values()
    names = {
        p.name
        for p in params
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and (required or p.default is not p.empty)
    }
    if any(p.kind == p.VAR_KEYWORD for p in params):
        target = getattr(factory, "forwards_kwargs_to", None)
        forwarded = _accepted(target, required=False) if target is not None else None
        return None if forwarded is None else names | forwarded
    return names


def list_agents() -> list[str]:
    """The names of every registered agent, sorted."""
    return sorted(agent_factories())


def agent_description(name: str) -> str:
    """The first line of the docstring of the factory registered as ``name``; ``""`` when it has none."""
    doc = inspect.getdoc(_factory(name)) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _factory(name: str) -> Callable[..., Any]:
    """The factory registered as ``name``, loaded.

    Raises:
        UnknownAgentError: no agent is registered under ``name`` (the message suggests a near name).
    """
    factories = agent_factories()
    if name not in factories:
        raise UnknownAgentError(
            f"no agent named {name!r} in entry-point group {ENTRY_POINT_GROUP!r}.{suggest(name, factories)} "
            f"Registered: {sorted(factories)}."
        )
    return factories[name].load()


def make_agent(name: str, *, env_id: str | None = None, **kwargs: Any) -> Agent:
    """Build the agent registered as ``name`` with ``kwargs`` passed to its factory.

    ``env_id`` (the env the agent will play) is passed on only to a factory that names an ``env_id`` parameter:
    an agent that needs the env's domain (the expert) declares one; the others never see it.
    """
    factory = _factory(name)
    accepted = accepted_kwargs(factory)
    if env_id is not None and accepted is not None and "env_id" in accepted:
        kwargs["env_id"] = env_id
    unknown = sorted(set(kwargs) - accepted) if accepted is not None else []
    if unknown:
        hints = "".join(suggest(key, accepted) for key in unknown)
        raise UnknownAgentKwargsError(
            f"agent {name!r} does not take the keyword argument(s) {unknown}.{hints} It accepts: {sorted(accepted)}."
        )
    agent = factory(**kwargs)
    if not isinstance(agent, Agent):
        raise TypeError(f"the factory of agent {name!r} returned {type(agent).__name__}, which has no act() method.")
    return agent
