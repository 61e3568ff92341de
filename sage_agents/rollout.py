"""Multi-turn rollouts of a group of chains through the Gymnasium chain env (SAGE's sequential rollout).

Each env of the batch plays one chain: task 1, then task 2 with the library task 1 left, and so on (the env
carries the library; ``library_scope="chain"`` empties it at each reset). All envs step in lockstep so that
the policy generates for the whole batch at once; an env that finishes its chain drops out of the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sage_agents.algos.sage import progress_rewards
from sage_agents.decoding import Choice


@dataclass
class Turn:
    """One agent turn of a rollout: what the policy produced and what the env said."""

    task_index: int
    """Chain position the action was applied to (0-based)."""
    prompt_ids: list[int]
    """Prompt tokens (context: never in the loss)."""
    completion_ids: list[int]
    """The policy's tokens (the only tokens in the loss, less those constrained decoding forced)."""
    logprobs: list[float]
    """Sampling-time log-probs of ``completion_ids``."""
    action: str
    """The text sent to ``env.step``."""
    parsed_kind: str
    """What the policy's parser saw: ``command``, ``define``, ``call`` or ``none``."""
    env_kind: str
    """``info["action_kind"]`` from the env."""
    valid: bool
    """``info["action_valid"]``."""
    reward: float
    """The env's reward for this step (1.0 when it completed the task)."""
    primitive_steps: int
    """Engine steps this turn took."""
    observation: str = ""
    """The env's observation text right after this action (the task's last one when the task ended)."""
    allowed: list[list[int]] | None = None
    """Per completion token, the ids constrained decoding allowed (:attr:`~sage_agents.policy.Completion.allowed`);
    None for free generation."""
    choices: list[Choice] | None = None
    """Decoded by whole options: the choices (:attr:`~sage_agents.policy.Completion.choices`); None otherwise."""


@dataclass
class ChainRollout:
    """One chain played by the policy."""

    chain: int
    """Chain index in the split."""
    turns: list[Turn] = field(default_factory=list)
    """Every turn, in order."""
    task_success: list[bool] = field(default_factory=list)
    """(L,) r_k: task k was completed."""
    played: list[bool] = field(default_factory=list)
    """(L,) the policy acted in task k."""
    no_action: list[bool] = field(default_factory=list)
    """(L,) the chain stopped at task k on a completion with no parseable action."""
    reuse: set[tuple[int, int]] = field(default_factory=set)
    """``(j, k)``: task j called a skill created in task k."""
    skills_created: int = 0
    """Skill definitions accepted by the env over the chain."""
    task_types: list[str] = field(default_factory=list)
    """(L,) task type of each position (known for played positions)."""
    library: list[dict[str, Any]] = field(default_factory=list)
    """``info["skill_library"]`` at the end of the chain."""
    tasks: list[str] = field(default_factory=list)
    """(L,) task description (``obs["task"]``) of each position (known for played positions)."""
    task_score: list[float | None] = field(default_factory=list)
    """(L,) the latest 0-100 score the domain reported for task k (``info["task_score"]``); None where none."""

    def turns_of(self, k: int) -> list[Turn]:
        """The turns of chain position k."""
        return [t for t in self.turns if t.task_index == k]


def _reuse_pairs(info: dict[str, Any]) -> set[tuple[int, int]]:
    """``(j, k)`` pairs of this step: task j = ``info["task_index"]`` called skills created in task k < j."""
    created = {s["name"]: s.get("created_in_task") for s in info.get("skill_library", [])}
    j = int(info["task_index"])
    out = set()
    for name in info.get("skill_reuse", []):
        k = created.get(name)
        if k is not None and int(k) < j:
            out.add((j, int(k)))
    return out


def rollout_chains(
    envs: Sequence[Any],
    policy: Any,
    chains: Sequence[int],
    seeds: Sequence[int | None],
    *,
    greedy: bool = False,
    stop_on_no_action: bool = False,
    skill_library: Any = None,
    skill_libraries: Sequence[Any] | None = None,
    max_turns: int = 10_000,
) -> list[ChainRollout]:
    """Play chain ``chains[i]`` in ``envs[i]`` for every i, batching the policy over the live envs.

    Args:
        envs: Gymnasium chain envs (one per rollout).
        policy: an :class:`sage_agents.policy.LLMPolicy` (anything with ``act_batch`` and ``history_turns``).
        chains: chain index for each env (a GRPO group repeats one index G times).
        seeds: ``reset`` seed for each env.
        greedy: act greedily (evaluation) instead of sampling.
        stop_on_no_action: end a chain at the first completion with no parseable action (SAGE's -1 rule).
        skill_library: a library passed to ``reset(options={"skill_library": ...})`` (None = the env's own).
        skill_libraries: one library per env (overrides ``skill_library``; ReSkill's per-slot versions).
        max_turns: safety bound on turns per chain.

    Returns:
        One :class:`ChainRollout` per env.
    """
    n = len(envs)
    rollouts = [ChainRollout(chain=int(c)) for c in chains]
    obs, infos, histories, live = [None] * n, [None] * n, [[] for _ in range(n)], list(range(n))
    for i, env in enumerate(envs):
        options = {"chain": int(chains[i])}
        library = skill_libraries[i] if skill_libraries is not None else skill_library
        if library is not None:
            options["skill_library"] = library
        obs[i], infos[i] = env.reset(seed=seeds[i], options=options)
        length = int(infos[i]["chain_length"])
        ro = rollouts[i]
        ro.task_success, ro.played, ro.no_action = [False] * length, [False] * length, [False] * length
        ro.task_score = [None] * length
        ro.task_types, ro.tasks = [""] * length, [""] * length
        ro.task_types[0], ro.tasks[0] = str(infos[i].get("task_type", "")), str(obs[i].get("task", ""))
    for _ in range(max_turns):
        if not live:
            break
        completions = policy.act_batch(
            [obs[i] for i in live], [infos[i] for i in live], [histories[i] for i in live], greedy=greedy
        )
        still = []
        for i, comp in zip(live, completions, strict=True):
            ro, before = rollouts[i], obs[i]
            new_obs, reward, terminated, truncated, info = envs[i].step(comp.action.text)
            k = int(info["task_index"])
            if info.get("new_task") and k + 1 < len(ro.tasks):
                ro.tasks[k + 1] = str(new_obs.get("task", ""))
            ro.played[k] = True
            ro.task_types[k] = str(info.get("task_type", ""))
            ro.turns.append(
                Turn(
                    task_index=k,
                    prompt_ids=comp.prompt_ids,
                    completion_ids=comp.completion_ids,
                    logprobs=comp.logprobs,
                    allowed=comp.allowed,
                    choices=comp.choices,
                    action=comp.action.text,
                    parsed_kind=comp.action.kind,
                    env_kind=str(info.get("action_kind", "")),
                    valid=bool(info.get("action_valid", True)),
                    reward=float(reward),
                    primitive_steps=int(info.get("primitive_steps", 0)),
                    observation=str(info.get("previous_observation") or new_obs.get("observation", ""))
                    if info.get("new_task")
                    else str(new_obs.get("observation", "")),
                )
            )
            ro.task_success[k] = ro.task_success[k] or bool(info.get("task_success", False))
            if info.get("task_score") is not None:
                ro.task_score[k] = float(info["task_score"])
            ro.reuse |= _reuse_pairs(info)
            ro.skills_created += len(info.get("skills_created", []))
            ro.library = list(info.get("skill_library", []))
            obs[i], infos[i] = new_obs, info
            if info.get("new_task"):
                histories[i] = []
            else:
                histories[i] = [*histories[i], (before["observation"], comp.action.text)][-64:]
            if stop_on_no_action and not comp.action.parseable:
                ro.no_action[k] = True
                continue
            if not (terminated or truncated):
                still.append(i)
        live = still
    return rollouts


def draw_chains(rng: Any, num_chains: int, per_process: int, rank: int, world: int) -> list[int]:
    """Process ``rank``'s ``per_process`` chain indices for one step, from a sampler every process shares.

    ``rng`` (a ``numpy.random.Generator`` seeded alike on every process) draws the chains of all ``world``
    processes at once and each keeps its slice, so every process's sampler stays in the same state.
    """
    ids = rng.integers(num_chains, size=per_process * world)
    return [int(c) for c in ids[rank * per_process : (rank + 1) * per_process]]


def step_seeds(seed: int, step: int, rank: int, n: int) -> list[int]:
    """Reset seeds of the ``n`` rollouts process ``rank`` plays at optimisation step ``step`` of a run seeded ``seed``.

    One formula for both trainers, so the TRL backend replays the native trainer's chains: the multipliers mix run
    seed, step and rank into one base (seed 0, step 0, rank 0 gives 0; the next step 10007 on), ``% 2**31`` keeps
    it a non-negative 32-bit integer.
    """
    base = (seed * 1_000_003 + step * 10_007 + rank * 101) % (2**31)
    return [base + i for i in range(n)]


def rollout_stats(rollouts: Sequence[ChainRollout], chain_length: int | None = None) -> dict[str, float]:
    """Episode metrics of a batch of rollouts (``env/`` namespace; see docs/agents.md).

    Args:
        rollouts: the batch.
        chain_length: the env's configured ``chain_length``: ``env/task_success_pos{k}`` is written for every
            k = 1..chain_length (0.0 where no rollout played position k), so processes whose chains had different
            lengths report the same keys. None = the longest chain of ``rollouts``.

    Returns:
        Metric name -> value.
    """
    tasks = [(ro, k) for ro in rollouts for k in range(len(ro.played)) if ro.played[k]]
    n_tasks = max(1, len(tasks))
    turns = [t for ro in rollouts for t in ro.turns]
    tokens = sum(len(t.completion_ids) for t in turns)
    progress = {id(ro): progress_rewards(ro.task_success, ro.task_score) for ro in rollouts}  # once per rollout
    stats = {
        "env/task_success": sum(ro.task_success[k] for ro, k in tasks) / n_tasks,
        "env/task_progress": sum(progress[id(ro)][k] for ro, k in tasks) / n_tasks,
        "env/chain_success": sum(all(ro.task_success) for ro in rollouts) / max(1, len(rollouts)),
        "env/steps_per_task": len(turns) / n_tasks,
        "env/primitive_steps_per_task": sum(t.primitive_steps for t in turns) / n_tasks,
        "env/tokens_per_task": tokens / n_tasks,
        "env/invalid_action_rate": sum(not t.valid for t in turns) / max(1, len(turns)),
        "env/no_action_rate": sum(t.parsed_kind == "none" for t in turns) / max(1, len(turns)),
        "env/skill_call_rate": sum(t.env_kind == "call" for t in turns) / max(1, len(turns)),
        "env/skills_created": sum(ro.skills_created for ro in rollouts) / max(1, len(rollouts)),
        "env/skill_reuse_rate": sum(any(j == k for j, _ in ro.reuse) for ro, k in tasks if k > 0)
        / max(1, sum(1 for _, k in tasks if k > 0)),
    }
    longest = max((len(ro.played) for ro in rollouts), default=0)
    if chain_length is not None and longest > chain_length:
        raise ValueError(
            f"a rollout has {longest} chain positions but chain_length={chain_length}; pass the env's "
            "configured chain_length (the longest chain it can deal)."
        )
    for k in range(longest if chain_length is None else chain_length):
        played = [ro for ro in rollouts if k < len(ro.played) and ro.played[k]]
        stats[f"env/task_success_pos{k + 1}"] = sum(ro.task_success[k] for ro in played) / max(1, len(played))
    return stats
