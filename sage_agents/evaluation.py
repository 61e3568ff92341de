"""The one evaluation path: play chains with an agent, record each episode, and summarize the records.

The leaderboard (``leaderboard.evaluate``), the trainer's periodic evaluation (``Trainer.evaluate``) and
``sage eval`` all play through :func:`play_chains` and compute their figures from its records, so the three
report the same numbers for the same agent and chains.

A bad agent is recorded, never fatal: an agent that raises in ``reset``, ``act`` or ``act_batch`` ends its chain
there (its record holds ``agent_error``: the exception type, message and the method), and play goes on with the
next chain. In batched play a raising ``act_batch`` call is retried once per chain of that call, each alone
(``act_batch`` with one observation and its slot), so that one bad chain does not fail the others; a chain whose
solo call raises too is failed. The retry means the agent saw that turn twice: an agent whose per-slot state
took in the failed call may carry it into the retry. Actions are stored as the env would see them at most: a
non-``str`` action is stored as its ``repr`` (the env flags it invalid), and every stored action is cut to
:data:`MAX_STORED_ACTION_CHARS` (the env's action space maximum); agents without a token count are charged the
words of the stored text.

Intervals: every figure is a ratio of per-chain sums (TGC: successes / tasks; SGC: successful chains / chains;
steps, tokens: totals / tasks), so the bootstrap resamples chains (the tasks of one chain together) and
recomputes the same ratio over the resampled chains (:func:`ratio_bootstrap_ci`). A success rate of exactly 0 or
1 gives identical resamples; its interval is then the Wilson score interval of the count (:func:`wilson_interval`).
"""

from __future__ import annotations

import hashlib
import inspect
import math
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from sage_agents.algos.sage import progress_rewards
from sage_envs.chain import MAX_ACTION_CHARS, truncate

BOOTSTRAP_SAMPLES = 2000
"""Chain resamples drawn for each 95% interval."""
MAX_STORED_ACTION_CHARS = MAX_ACTION_CHARS
"""Longest action text stored in an episode record (the env's ``MAX_ACTION_CHARS``, its action space's bound)."""
MAX_ERROR_CHARS = 1_000
"""Longest agent error message stored in an episode record."""
WILSON_Z = 1.959963984540054
"""Normal quantile of a two-sided 95% interval."""


def stored_action(action: Any) -> str:
    """The text an episode record keeps of ``action``: its ``repr`` when not a ``str``, cut to the env's maximum."""
    return truncate(action if isinstance(action, str) else repr(action), MAX_STORED_ACTION_CHARS)


def play_chain(env: Any, agent: Any, chain: int, seed: int) -> dict[str, Any]:
    """Play one chain to its end and return its episode record."""
    return next(play_chains([env], agent, [(seed, chain)]))


def play_chains(envs: Sequence[Any], agent: Any, todo: Iterable[tuple[int, int]]) -> Iterator[dict[str, Any]]:
    """Play the ``(seed, chain)`` pairs of ``todo``, ``len(envs)`` at a time, yielding each record as its chain ends.

    With one env the agent's ``act`` is called, and ``reset`` at each chain start (with ``seed=`` when its
    signature takes one, so results do not depend on the order in which workers play the chains). With several
    envs one ``act_batch(observations, infos, slots=...)`` call per turn covers every env still playing (an LLM
    agent generates for all of them at once) and a finished env starts the next chain at once; ``slots`` are the
    env indices, so the agent can keep per-env state, which it starts afresh on ``info["new_task"]`` (set by every
    ``reset``). ``reset()`` is then called once, before the first turn. Agent errors: see the module docstring.
    """
    queue, batched = deque(todo), len(envs) > 1
    reset_error = None
    if batched and hasattr(agent, "reset"):
        try:
            agent.reset()
        except Exception as error:  # noqa: BLE001  (any agent failure is recorded, see the module docstring)
            reset_error = error
    playing: dict[int, _Episode] = {}

    def start(slot: int) -> _Episode:
        seed, chain = queue.popleft()
        options: dict[str, Any] = {"chain": chain}
        if getattr(agent, "skill_library", None) is not None:  # an agent that brings its learned skills
            options["skill_library"] = agent.skill_library
        obs, info = envs[slot].reset(seed=seed, options=options)
        episode = _Episode(envs[slot], chain, seed, obs, info)
        if reset_error is not None:
            episode.fail(reset_error, "reset")
        elif not batched and hasattr(agent, "reset"):
            try:
                if "seed" in inspect.signature(agent.reset).parameters:
                    agent.reset(seed=seed * 1_000_003 + chain)
                else:
                    agent.reset()
            except Exception as error:  # noqa: BLE001
                episode.fail(error, "reset")
        return episode

    def fill(slot: int) -> Iterator[dict[str, Any]]:
        """Start chains in ``slot`` until one is playing (a chain failed at its start is yielded at once)."""
        while queue:
            episode = start(slot)
            if not episode.done:
                playing[slot] = episode
                return
            yield episode.record

    for slot in range(len(envs)):
        yield from fill(slot)
    while playing:
        slots = list(playing)
        turns = _turn(agent, slots, [playing[s].obs for s in slots], [playing[s].info for s in slots], batched)
        for slot, turn in zip(slots, turns, strict=True):
            episode = playing[slot]
            if isinstance(turn, BaseException):
                episode.fail(turn, "act_batch" if batched else "act")
            else:
                episode.step(*turn)
            if episode.done:
                yield episode.record
                del playing[slot]
                yield from fill(slot)


def _turn(
    agent: Any, slots: list[int], observations: list[dict[str, str]], infos: list[dict[str, Any]], batched: bool
) -> list[tuple[Any, int] | BaseException]:
    """One agent turn for each slot: ``(action, tokens)``, or the exception the agent raised for it."""
    if not batched:
        before = getattr(agent, "tokens_generated", None)
        try:
            action = agent.act(observations[0], infos[0])
            tokens = agent.tokens_generated - before if before is not None else None
        except Exception as error:  # noqa: BLE001
            return [error]
        return [(action, tokens)]
    try:
        return _batch_turn(agent, slots, observations, infos)
    except Exception:  # noqa: BLE001  (one bad chain must not fail the others: each is retried alone)
        out: list[tuple[Any, int] | BaseException] = []
        for slot, obs, info in zip(slots, observations, infos, strict=True):
            try:
                out += _batch_turn(agent, [slot], [obs], [info])
            except Exception as error:  # noqa: BLE001
                out.append(error)
        return out


def _batch_turn(
    agent: Any, slots: list[int], observations: list[dict[str, str]], infos: list[dict[str, Any]]
) -> list[tuple[Any, int | None]]:
    """One ``act_batch`` call; raises when the agent does or returns other than one action per observation."""
    actions = list(agent.act_batch(observations, infos, slots=slots))
    if len(actions) != len(slots):
        raise ValueError(f"act_batch returned {len(actions)} actions for {len(slots)} observations")
    tokens = getattr(agent, "last_tokens", None) or [None] * len(actions)
    return list(zip(actions, tokens, strict=True))


class _Episode:
    """One chain being played: the env, its latest observation and info, and its record (SPEC.md section 5)."""

    def __init__(self, env: Any, chain: int, seed: int, obs: dict[str, str], info: dict[str, Any]):
        self.env, self.obs, self.info, self.done = env, obs, info, False
        n = info["chain_length"]
        self.record: dict[str, Any] = {
            "chain": chain, "seed": seed, "task_ids": [], "task_types": [], "success": [False] * n,
            "steps": [0] * n, "primitive_steps": [0] * n, "tokens": [0] * n, "tokens_in": [0] * n,
            "skills_used": [[] for _ in range(n)], "skills_created": [[] for _ in range(n)],
            "skill_reuse": [False] * n, "actions": [[] for _ in range(n)], "invalid_actions": [0] * n,
            "skill_calls": [0] * n,
        }  # fmt: skip
        if "task_score" in info:  # a domain that scores its tasks: each task's latest score (0-100)
            self.record["task_score"] = [None] * n
        self.observations = hashlib.sha256()
        self.current = 0  # the task the next action goes to

    def step(self, action: Any, tokens: int | None) -> None:
        """Send ``action`` (which cost ``tokens`` generated tokens; None = count its words) and record the turn."""
        record, text = self.record, stored_action(action)
        record["tokens"][self.current] += len(text.split()) if tokens is None else tokens
        record["tokens_in"][self.current] += sum(len(obs.split()) for obs in self.obs.values())
        self.obs, _, terminated, truncated, info = self.env.step(action)
        self.info = info
        self.observations.update(self.obs["observation"].encode())
        t = info["task_index"]
        if t == len(record["task_ids"]):  # the first turn of task t: its info names it
            record["task_ids"].append(info.get("task_id", ""))
            record["task_types"].append(info.get("task_type", ""))
        record["actions"][t].append(text)
        record["steps"][t] += 1
        record["primitive_steps"][t] += info["primitive_steps"]
        record["invalid_actions"][t] += not info["action_valid"]
        record["skill_calls"][t] += info.get("action_kind") == "call"
        record["skills_used"][t] += info["skills_used"]
        record["skills_created"][t] += info["skills_created"]
        record["skill_reuse"][t] |= bool(info["skill_reuse"])
        record["success"][t] |= info["task_success"]
        if "task_score" in record and info.get("task_score") is not None:
            record["task_score"][t] = float(info["task_score"])
        self.current = t + 1 if info["new_task"] else t
        if terminated or truncated:
            self._finish()

    def fail(self, error: BaseException, method: str) -> None:
        """End the chain on an agent error: its record says where and what, and the tasks not played failed."""
        self.record["agent_error"] = {
            "type": type(error).__name__,
            "message": truncate(str(error), MAX_ERROR_CHARS),
            "method": method,
            "task_index": self.current,
        }
        self._finish()

    def _finish(self) -> None:
        """Close the record: the ids and types of tasks never reached, and the observations' hash."""
        record, chains = self.record, getattr(self.env.unwrapped, "chains", None)
        for k in range(len(record["task_ids"]), len(record["success"])):
            task = chains[record["chain"]][k] if chains is not None else None
            record["task_ids"].append(getattr(task, "task_id", ""))
            record["task_types"].append(getattr(task, "task_type", ""))
        record["observations_sha256"] = self.observations.hexdigest()
        self.done = True


# ---------------------------------------------------------------------------------------------- intervals
def wilson_interval(successes: int, n: int, z: float = WILSON_Z) -> list[float]:
    """Wilson score interval of a proportion ``successes / n`` (``[0, 0]`` when ``n`` is 0)."""
    if n == 0:
        return [0.0, 0.0]
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # at 0 or n the bound on that side is exactly 0 or 1 (rounding would leave 1e-17 off it)
    return [0.0 if successes == 0 else centre - half, 1.0 if successes == n else centre + half]


def ratio_bootstrap_ci(numerators: np.ndarray, denominators: np.ndarray, index: np.ndarray) -> list[float]:
    """95% percentile interval of ``sum(numerators) / sum(denominators)`` over resampled chains.

    Args:
        numerators: (C,) each chain's sum of the quantity (e.g. its successful tasks).
        denominators: (C,) each chain's count it is divided by (e.g. its tasks; 1 for a per-chain mean).
        index: (B, C) resampled chain indices, one row per bootstrap sample.

    Resamples whose denominators sum to 0 are left out; ``[0, 0]`` when no resample is left.
    """
    totals = denominators[index].sum(axis=1)  # (B,)
    keep = totals > 0
    if not keep.any():
        return [0.0, 0.0]
    ratios = numerators[index].sum(axis=1)[keep] / totals[keep]  # (B',)
    low, high = np.percentile(ratios, [2.5, 97.5])
    return [float(low), float(high)]


# ---------------------------------------------------------------------------------------------- summaries
def summarize_records(records: Sequence[dict[str, Any]], full_length: int | None = None) -> dict[str, Any]:
    """The figures of a set of episode records (the leaderboard summary without its provenance fields).

    Args:
        records: episode records of :func:`play_chains`.
        full_length: the configured chain length: ``sgc_full_length`` counts only chains of this many tasks
            (None = the longest chain seen).

    Returns:
        ``n_chains``, ``n_tasks``, ``tgc``, ``sgc``, ``mean_steps``, ``mean_primitive_steps``, ``mean_tokens``,
        ``mean_invalid_actions``, ``skill_reuse_rate``, ``skills_created``, ``per_task_type``,
        ``agent_errors``, ``chain_length_mix``, ``sgc_full_length``, ``n_full_length_chains`` and ``ci95``
        (see the module docstring for the intervals and docs/leaderboard.md for every key); ``progress`` (the
        mean of ``max(task_score / 100, success)`` over tasks) when the records carry the domain's scores.
    """
    records = sorted(records, key=lambda r: (r["seed"], r["chain"]))
    per_chain = chain_ratios(records, full_length)
    lengths, full = per_chain["tgc"][1], per_chain["sgc_full_length"][1]
    point = {name: float(num.sum() / den.sum()) if den.sum() else 0.0 for name, (num, den) in per_chain.items()}
    index = np.random.default_rng(0).integers(len(records), size=(BOOTSTRAP_SAMPLES, len(records)))  # (B, C)
    ci95 = {}
    for name, (num, den) in per_chain.items():
        if name in ("tgc", "sgc", "sgc_full_length") and point[name] in (0.0, 1.0):
            ci95[name] = wilson_interval(int(num.sum()), int(den.sum()))  # every resample would be identical
        else:
            ci95[name] = ratio_bootstrap_ci(num, den, index) if len(records) else [0.0, 0.0]
    by_type: dict[str, list[bool]] = {}
    for r in records:
        for task_type, success in zip(r["task_types"], r["success"], strict=True):
            by_type.setdefault(task_type, []).append(success)
    later = [reused for r in records for reused in r["skill_reuse"][1:]]
    n_tasks = int(lengths.sum())
    mix: dict[str, int] = {}
    for length in sorted(int(n) for n in lengths):
        mix[str(length)] = mix.get(str(length), 0) + 1
    return {
        "n_chains": len(records),
        "n_tasks": n_tasks,
        "tgc": point["tgc"],
        "sgc": point["sgc"],
        "mean_steps": point["mean_steps"],
        "mean_primitive_steps": point["mean_primitive_steps"],
        "mean_tokens": point["mean_tokens"],
        "mean_invalid_actions": float(sum(sum(r["invalid_actions"]) for r in records) / max(n_tasks, 1)),
        "skill_reuse_rate": float(np.mean(later)) if later else 0.0,
        "skills_created": float(np.mean([sum(map(len, r["skills_created"])) for r in records])) if records else 0.0,
        "per_task_type": {t: float(np.mean(v)) for t, v in sorted(by_type.items())},
        "agent_errors": sum("agent_error" in r for r in records),
        "chain_length_mix": mix,
        "sgc_full_length": point["sgc_full_length"],
        "n_full_length_chains": int(full.sum()),
        "ci95": ci95,
        **({"progress": point["progress"]} if "progress" in point else {}),
    }


def chain_ratios(
    records: Sequence[dict[str, Any]], full_length: int | None = None, names: Collection[str] | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each ratio figure of :func:`summarize_records` as its per-chain numerators and denominators, in record order.

    A figure over a set of chains is ``numerators.sum() / denominators.sum()``, so a bootstrap resamples the rows
    of both together. ``full_length`` as in :func:`summarize_records`; ``progress`` where a record carries scores;
    ``names``: only these figures (None = all), which read only the record fields they need.
    """
    lengths = np.array([len(r["success"]) for r in records], dtype=float)  # (C,)
    full_length = int(lengths.max(initial=0)) if full_length is None else full_length

    def summed(key: str) -> np.ndarray:
        return np.array([float(sum(r[key])) for r in records])

    def solved(only_full: bool = False) -> tuple[np.ndarray, np.ndarray]:
        full = (lengths == full_length).astype(float) if only_full else np.ones(len(records))  # (C,)
        return np.array([float(all(r["success"])) for r in records]) * full, full

    ratios = {  # name -> (numerator, denominator) per chain, computed when asked for
        "tgc": lambda: (summed("success"), lengths),
        "sgc": solved,
        "sgc_full_length": lambda: solved(only_full=True),
        "mean_steps": lambda: (summed("steps"), lengths),
        "mean_primitive_steps": lambda: (summed("primitive_steps"), lengths),
        "mean_tokens": lambda: (summed("tokens"), lengths),
    }
    if any("task_score" in r for r in records):  # BALROG's progression, max(score / 100, won), per task
        ratios["progress"] = lambda: (np.array([chain_progress(r) for r in records]), lengths)
    return {name: figure() for name, figure in ratios.items() if names is None or name in names}


def chain_progress(record: dict[str, Any]) -> float:
    """An episode record's progress summed over its tasks: max(task_score / 100, success) each, or its success."""
    return float(sum(progress_rewards(record["success"], record.get("task_score", []))))


def chain_metrics(records: Sequence[dict[str, Any]], no_action_turns: int = 0) -> dict[str, float]:
    """The trainer's episode metrics (``env/`` names, docs/agents.md) of a set of episode records.

    ``no_action_turns``: turns whose completion held no parseable action (the agent's parser knows, the record
    does not; :class:`ParseCounter` counts them).
    """
    figures = summarize_records(records)
    turns = max(1, sum(sum(r["steps"]) for r in records))
    stats = {
        "env/task_success": figures["tgc"],
        "env/task_progress": figures.get("progress", figures["tgc"]),
        "env/chain_success": figures["sgc"],
        "env/steps_per_task": figures["mean_steps"],
        "env/primitive_steps_per_task": figures["mean_primitive_steps"],
        "env/tokens_per_task": figures["mean_tokens"],
        "env/invalid_action_rate": sum(sum(r["invalid_actions"]) for r in records) / turns,
        "env/no_action_rate": no_action_turns / turns,
        "env/skill_call_rate": sum(sum(r.get("skill_calls", [])) for r in records) / turns,
        "env/skills_created": figures["skills_created"],
        "env/skill_reuse_rate": figures["skill_reuse_rate"],
    }
    for k in range(max((len(r["success"]) for r in records), default=0)):
        at_k = [r["success"][k] for r in records if k < len(r["success"])]
        stats[f"env/task_success_pos{k + 1}"] = sum(at_k) / max(1, len(at_k))
    return stats


class ParseCounter:
    """Wraps an :class:`~sage_agents.policy.LLMPolicy` and counts completions with no parseable action."""

    def __init__(self, policy: Any):
        self.policy, self.no_action_turns = policy, 0

    def act_batch(self, *args: Any, **kwargs: Any) -> list[Any]:
        """The policy's ``act_batch``; completions whose action kind is ``none`` are counted."""
        completions = self.policy.act_batch(*args, **kwargs)
        self.no_action_turns += sum(c.action.kind == "none" for c in completions)
        return completions


def evaluate_policy(
    policy: Any, envs: Sequence[Any], chains: Sequence[int], seeds: Sequence[int], skill_library: Any = None
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Greedy play of ``chains`` (chain ``chains[i]`` with reset seed ``seeds[i]``) by an LLM policy.

    The policy acts as the leaderboard's ``policy`` agent does (:class:`~sage_agents.policy.PolicyAgent`),
    ``len(envs)`` chains in lockstep, each chain starting from ``skill_library`` when given.

    Returns:
        The episode records and their :func:`chain_metrics`.
    """
    from sage_agents.policy import PolicyAgent

    counter = ParseCounter(policy)
    agent = PolicyAgent(counter, greedy=True, skill_library=skill_library)
    records = list(play_chains(envs, agent, zip(seeds, chains, strict=True)))
    return records, chain_metrics(records, counter.no_action_turns)
