"""Evaluate a registered agent on fixed chains of a SageChain env and write per-episode JSONL + a summary JSON.

    python -m leaderboard.evaluate --agent random --env SageChain-ALFWorld-v0 --split valid_unseen \
        --num-chains 100 --output leaderboard/results

Chains ``0 .. num_chains-1`` of the split are played once per seed (``reset(seed=s, options={"chain": i})``), so
every agent meets the same games. Finished episodes are appended to the JSONL as they end: rerunning the same
command after a crash skips them and produces the same summary.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.metadata
import inspect
import json
import os
import platform
import re
import subprocess
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import sage_envs  # noqa: F401  (registers the env ids)
from sage_agents.registry import make_agent

BOOTSTRAP_SAMPLES = 2000
# Packages whose version can change a result: the dependency ranges are open, so two installs of one commit may
# differ (a fresh install reran the 3-layer demo's seed 0 with other SFT numbers; docs/demo.md).
RECORDED_PACKAGES = (
    "sage-rl-agent", "gymnasium", "alfworld", "textworld", "torch", "transformers", "trl", "tokenizers",
)  # fmt: skip


@dataclass
class EvalConfig:
    """One evaluation: an agent on the first ``num_chains`` chains of one env split, once per seed."""

    agent: str
    """Registered agent name (entry-point group ``sage_agents.agents``)."""
    env: str = "SageChain-ALFWorld-v0"
    """Versioned env id."""
    split: str = "valid_unseen"
    """Split to evaluate on: train, valid_seen or valid_unseen."""
    num_chains: int = 100
    """How many chains (the first ones of the split) to play per seed; capped at the split's size."""
    output: str = "leaderboard/results"
    """Folder for the summary JSON and the per-episode JSONL."""
    seeds: list[int] = field(default_factory=lambda: [0])
    """Episode seeds; each chain is played once per seed."""
    source: str | None = None
    """Game source for ALFWorld (generated / official); None keeps the env's default."""
    agent_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the agent factory."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for gym.make (e.g. skills, chain_length, data_dir)."""
    workers: int = 1
    """Processes playing chains in parallel (each builds its own env and agent)."""
    label: str | None = None
    """Leaderboard name of this entry (e.g. "expert-no-skills"); None = the agent name."""
    batch_size: int = 1
    """Chains each process plays in lockstep with one ``act_batch`` call per turn (agents without ``act_batch``
    play one at a time). An LLM agent then generates for the whole batch at once. Part of the config hash: padded
    batches can round a greedy near-tie the other way, and an agent that learns online sees its chains in another
    order."""

    def __post_init__(self):
        if self.num_chains < 1:
            raise ValueError(f"num_chains={self.num_chains} must be >= 1.")
        if self.workers < 1:
            raise ValueError(f"workers={self.workers} must be >= 1.")
        if self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size} must be >= 1.")
        if not self.seeds:
            raise ValueError("seeds is empty; give at least one seed, e.g. --seeds 0.")

    @property
    def make_kwargs(self) -> dict[str, Any]:
        """Everything passed to gym.make besides the id."""
        kwargs = {"split": self.split, **self.env_kwargs}
        if self.source is not None:
            kwargs["source"] = self.source
        return kwargs

    @property
    def run_name(self) -> str:
        """File stem shared by the summary and the episodes file."""
        parts = [self.label or self.agent, self.env, self.split, self.source or "default"]
        return "__".join(re.sub(r"[^A-Za-z0-9._-]+", "-", p) for p in parts)

    @property
    def config_hash(self) -> str:
        """Short hash of everything that decides the episodes (not the output folder or worker count)."""
        decisive = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("output", "workers", "num_chains")}
        return hashlib.sha256(json.dumps(decisive, sort_keys=True).encode()).hexdigest()[:12]


def play_chain(env: gym.Env, agent: Any, chain: int, seed: int) -> dict[str, Any]:
    """Play one chain to its end and return its episode record."""
    return next(play_chains([env], agent, [(seed, chain)]))


def play_chains(envs: Sequence[gym.Env], agent: Any, todo: Iterable[tuple[int, int]]) -> Iterator[dict[str, Any]]:
    """Play the ``(seed, chain)`` pairs of ``todo``, ``len(envs)`` at a time, yielding each record as its chain ends.

    With one env the agent's ``act`` is called, and ``reset`` at each chain start (with ``seed=`` when its
    signature takes one, so results do not depend on the order in which workers play the chains). With several
    envs one ``act_batch(observations, infos, slots=...)`` call per turn covers every env still playing (an LLM
    agent generates for all of them at once) and a finished env starts the next chain at once; ``slots`` are the
    env indices, so the agent can keep per-env state, which it starts afresh on ``info["new_task"]`` (set by every
    ``reset``). ``reset()`` is then called once, before the first turn.
    """
    queue, batched = deque(todo), len(envs) > 1
    if batched and hasattr(agent, "reset"):
        agent.reset()
    playing: dict[int, _Episode] = {}

    def start(slot: int) -> None:
        seed, chain = queue.popleft()
        options: dict[str, Any] = {"chain": chain}
        if getattr(agent, "skill_library", None) is not None:  # an agent that brings its learned skills
            options["skill_library"] = agent.skill_library
        obs, info = envs[slot].reset(seed=seed, options=options)
        if not batched and hasattr(agent, "reset"):
            if "seed" in inspect.signature(agent.reset).parameters:
                agent.reset(seed=seed * 1_000_003 + chain)
            else:
                agent.reset()
        playing[slot] = _Episode(envs[slot], chain, seed, obs, info)

    for slot in range(len(envs)):
        if queue:
            start(slot)
    while playing:
        slots = list(playing)
        observations = [playing[s].obs for s in slots]
        infos = [playing[s].info for s in slots]
        if batched:
            actions = agent.act_batch(observations, infos, slots=slots)
            tokens = getattr(agent, "last_tokens", None) or [len(a.split()) for a in actions]
        else:
            before = getattr(agent, "tokens_generated", None)
            actions = [agent.act(observations[0], infos[0])]
            tokens = [agent.tokens_generated - before if before is not None else len(actions[0].split())]
        for slot, action, n_tokens in zip(slots, actions, tokens, strict=True):
            episode = playing[slot]
            if episode.step(action, n_tokens):
                yield episode.record
                del playing[slot]
                if queue:
                    start(slot)


class _Episode:
    """One chain being played: the env, its latest observation and info, and its record (SPEC.md section 5)."""

    def __init__(self, env: gym.Env, chain: int, seed: int, obs: dict[str, str], info: dict[str, Any]):
        self.env, self.obs, self.info = env, obs, info
        n = info["chain_length"]
        self.record: dict[str, Any] = {
            "chain": chain, "seed": seed, "task_ids": [], "task_types": [], "success": [False] * n,
            "steps": [0] * n, "primitive_steps": [0] * n, "tokens": [0] * n, "tokens_in": [0] * n,
            "skills_used": [[] for _ in range(n)], "skills_created": [[] for _ in range(n)],
            "skill_reuse": [False] * n, "actions": [[] for _ in range(n)], "invalid_actions": [0] * n,
        }  # fmt: skip
        self.observations = hashlib.sha256()
        self.current = 0  # the task the next action goes to

    def step(self, action: str, tokens: int) -> bool:
        """Send ``action`` (which cost ``tokens`` generated tokens) and record the turn; True when the chain ended."""
        record = self.record
        record["tokens"][self.current] += tokens
        record["tokens_in"][self.current] += sum(len(text.split()) for text in self.obs.values())
        self.obs, _, terminated, truncated, info = self.env.step(action)
        self.info = info
        self.observations.update(self.obs["observation"].encode())
        t = info["task_index"]
        if t == len(record["task_ids"]):
            record["task_ids"].append(info["task_id"])
            record["task_types"].append(info["task_type"])
        record["actions"][t].append(action)
        record["steps"][t] += 1
        record["primitive_steps"][t] += info["primitive_steps"]
        record["invalid_actions"][t] += not info["action_valid"]
        record["skills_used"][t] += info["skills_used"]
        record["skills_created"][t] += info["skills_created"]
        record["skill_reuse"][t] |= bool(info["skill_reuse"])
        record["success"][t] |= info["task_success"]
        self.current = t + 1 if info["new_task"] else t
        if terminated or truncated:
            record["observations_sha256"] = self.observations.hexdigest()
            return True
        return False


def _bootstrap_ci(values: np.ndarray, rng: np.random.Generator) -> list[float]:
    """95% percentile bootstrap interval of the mean of ``values`` (one value per episode)."""
    if len(values) == 0:
        return [0.0, 0.0]
    means = values[rng.integers(len(values), size=(BOOTSTRAP_SAMPLES, len(values)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return [float(low), float(high)]


def summarize(
    records: list[dict[str, Any]], config: EvalConfig, model: str, source: str, token_unit: str = "tokens"
) -> dict[str, Any]:
    """Aggregate episode records into the leaderboard's summary (keys fixed by SPEC.md section 5).

    Per-episode (chain) quantities are the unit of the bootstrap, so tasks of one chain are resampled together.
    ``skill_reuse_rate`` is the share of tasks after the first of their chain that called a skill created earlier
    in the chain; ``skills_created`` is the mean number of skill definitions per chain. ``token_unit`` says what
    ``mean_tokens`` counts: ``tokens`` the agent reported generating, or ``words`` (whitespace-separated words of
    its actions) for an agent that does not count them, such as the scripted ones.
    """
    records = sorted(records, key=lambda r: (r["seed"], r["chain"]))
    per_chain = {
        "tgc": np.array([np.mean(r["success"]) for r in records]),
        "sgc": np.array([float(all(r["success"])) for r in records]),
        "mean_steps": np.array([np.mean(r["steps"]) for r in records]),
        "mean_primitive_steps": np.array([np.mean(r["primitive_steps"]) for r in records]),
        "mean_tokens": np.array([np.mean(r["tokens"]) for r in records]),
    }
    tasks = [(t, s) for r in records for t, s in zip(r["task_types"], r["success"], strict=True)]
    later = [reused for r in records for reused in r["skill_reuse"][1:]]
    n_tasks = sum(len(r["success"]) for r in records)
    by_type: dict[str, list[bool]] = {}
    for task_type, success in tasks:
        by_type.setdefault(task_type, []).append(success)
    rng = np.random.default_rng(0)
    return {
        "agent": config.label or config.agent,
        "env": config.env,
        "split": config.split,
        "source": source,
        "n_chains": len(records),
        "n_tasks": n_tasks,
        "tgc": float(sum(s for _, s in tasks) / max(n_tasks, 1)),
        "sgc": float(per_chain["sgc"].mean()) if records else 0.0,
        "mean_steps": float(sum(sum(r["steps"]) for r in records) / max(n_tasks, 1)),
        "mean_primitive_steps": float(sum(sum(r["primitive_steps"]) for r in records) / max(n_tasks, 1)),
        "mean_tokens": float(sum(sum(r["tokens"]) for r in records) / max(n_tasks, 1)),
        "token_unit": token_unit,
        "mean_invalid_actions": float(sum(sum(r["invalid_actions"]) for r in records) / max(n_tasks, 1)),
        "skill_reuse_rate": float(np.mean(later)) if later else 0.0,
        "skills_created": float(np.mean([sum(map(len, r["skills_created"])) for r in records])) if records else 0.0,
        "per_task_type": {t: float(np.mean(v)) for t, v in sorted(by_type.items())},
        "ci95": {name: _bootstrap_ci(values, rng) for name, values in per_chain.items()},
        "seeds": list(config.seeds),
        "model": model,
        "commit": "+".join(sorted({str(r.get("commit", "unknown")) for r in records})) or _git_commit(),
        "versions": installed_versions(),
        "config_hash": config.config_hash,
        "agent_kwargs": config.agent_kwargs,
        "env_kwargs": config.make_kwargs,
    }


def installed_versions() -> dict[str, str]:
    """Python's version and each installed one of :data:`RECORDED_PACKAGES` (absent packages are left out)."""
    versions = {"python": platform.python_version()}
    for name in RECORDED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return versions


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)  # fmt: skip
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


_WORKER: dict[str, Any] = {}


def _init_worker(spec: Any, threads: int) -> None:
    """Set up a spawned worker: the parent's registration of the env id, and its share of the cores.

    An id registered at run time (not by importing a package) would otherwise be unknown there. Math libraries
    (torch, BLAS) start one thread per core in every worker unless told otherwise, and the workers then contend;
    ``OMP_NUM_THREADS`` set by the user is left alone.
    """
    if spec.id not in gym.registry:
        gym.registry[spec.id] = spec
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))


def _batch(config: EvalConfig, agent: Any) -> int:
    """Chains one process plays in lockstep: ``batch_size`` for an agent with ``act_batch``, else one."""
    return config.batch_size if hasattr(agent, "act_batch") else 1


def _make_envs(config: EvalConfig, agent: Any) -> list[gym.Env]:
    """The envs one process plays in lockstep (:func:`_batch` of them)."""
    return [gym.make(config.env, **config.make_kwargs) for _ in range(_batch(config, agent))]


def _play_in_worker(config: EvalConfig, todo: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """Play ``todo`` in this process, building the agent and its envs once per process."""
    if "agent" not in _WORKER:
        _WORKER["agent"] = make_agent(config.agent, **config.agent_kwargs)
        _WORKER["envs"] = _make_envs(config, _WORKER["agent"])
    return list(play_chains(_WORKER["envs"], _WORKER["agent"], todo))


def read_episodes(path: Path, config_hash: str) -> dict[tuple[int, int], dict[str, Any]]:
    """Episodes already in the JSONL for this config, by ``(seed, chain)``.

    A chain logged twice keeps its later record; a torn last line (crash mid-write) is ignored.
    """
    if not path.exists():
        return {}
    done = {}
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if record.get("config_hash") == config_hash:
            done[(record["seed"], record["chain"])] = record
    return done


def evaluate(config: EvalConfig) -> dict[str, Any]:
    """Run (or resume) the evaluation and write ``<run_name>.episodes.jsonl`` and ``<run_name>.json``."""
    out = Path(config.output)
    out.mkdir(parents=True, exist_ok=True)
    episodes_path = out / f"{config.run_name}.episodes.jsonl"
    agent = make_agent(config.agent, **config.agent_kwargs)
    # With workers, each builds its own envs: this process only needs one to read the split's size and source.
    envs = _make_envs(config, agent) if config.workers == 1 else [gym.make(config.env, **config.make_kwargs)]
    num_chains = min(config.num_chains, envs[0].unwrapped.num_chains)
    source = str(getattr(envs[0].unwrapped.domain, "source", "default"))
    todo_all = [(seed, chain) for seed in config.seeds for chain in range(num_chains)]
    done = read_episodes(episodes_path, config.config_hash)
    todo = [key for key in todo_all if key not in done]

    commit = _git_commit()
    torn = False  # a last line cut by a crash: the next record must start a line of its own, or it is lost
    if episodes_path.exists() and episodes_path.stat().st_size:
        with episodes_path.open("rb") as log:
            log.seek(-1, os.SEEK_END)
            torn = log.read(1) != b"\n"
    with episodes_path.open("a") as sink:
        if torn:
            sink.write("\n")
        for record in _run(config, envs, agent, todo):
            record["config_hash"] = config.config_hash
            record["commit"] = commit  # the code that played it: a resumed run may span commits
            sink.write(json.dumps(record) + "\n")
            sink.flush()
            os.fsync(sink.fileno())
            done[(record["seed"], record["chain"])] = record
    for env in envs:
        env.close()
    model = str(getattr(agent, "model_id", config.agent))
    counts_tokens = hasattr(agent, "tokens_generated") or hasattr(agent, "last_tokens")  # else play_chains counts words
    summary = summarize([done[key] for key in todo_all], config, model=model, source=source,
                        token_unit="tokens" if counts_tokens else "words")  # fmt: skip
    tmp = out / f".{config.run_name}.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, out / f"{config.run_name}.json")
    return summary


def _run(
    config: EvalConfig, envs: list[gym.Env], agent: Any, todo: list[tuple[int, int]]
) -> Iterable[dict[str, Any]]:
    """Yield episode records for ``todo`` (seed, chain) pairs, in this process or in a pool of workers."""
    from sage_agents.progress import Progress  # plain progress lines in a log

    with Progress(transient=True) as progress:
        bar = progress.add_task(f"{config.label or config.agent} on {config.env}/{config.split}", total=len(todo))
        if config.workers == 1:
            for record in play_chains(envs, agent, todo):
                yield record
                progress.advance(bar)
            return
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        # Work goes out in parts: at least two per worker, so that the workers finish together, and at most eight
        # batches, so that a crash loses little; a worker's batch stays full but for each part's tail.
        batch = _batch(config, agent)
        part = max(1, min(batch * 8, -(-len(todo) // (2 * config.workers)))) if batch > 1 else 1
        parts = [todo[i : i + part] for i in range(0, len(todo), part)]
        # "spawn", not the default fork: a process that already ran torch (e.g. `sage demo` after training) has
        # OpenMP threads, and a forked worker then hung in its first forward pass (seen with 2 workers).
        context, spec = multiprocessing.get_context("spawn"), gym.spec(config.env)
        threads = max(1, (os.cpu_count() or 1) // config.workers)
        with ProcessPoolExecutor(config.workers, context, initializer=_init_worker, initargs=(spec, threads)) as pool:
            futures = [pool.submit(_play_in_worker, config, chunk) for chunk in parts]
            for future in as_completed(futures):
                for record in future.result():
                    yield record
                    progress.advance(bar)


def parse_args(argv: list[str] | None = None) -> EvalConfig:
    """Build an :class:`EvalConfig` from the command line (each field's docstring is its help)."""
    parser = argparse.ArgumentParser(prog="python -m leaderboard.evaluate", description=__doc__.splitlines()[0])
    parser.add_argument("--agent", required=True, help="registered agent name")
    parser.add_argument("--env", default="SageChain-ALFWorld-v0", help="versioned env id")
    parser.add_argument("--split", default="valid_unseen", choices=["train", "valid_seen", "valid_unseen"])
    parser.add_argument("--num-chains", type=int, default=100, help="chains per seed (the split's first ones)")
    parser.add_argument("--output", default="leaderboard/results", help="results folder")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="episode seeds")
    parser.add_argument("--source", default=None, help="ALFWorld game source: generated or official")
    parser.add_argument("--agent-kwargs", type=json.loads, default={}, help="JSON dict for the agent factory")
    parser.add_argument("--env-kwargs", type=json.loads, default={}, help="JSON dict for gym.make")
    parser.add_argument("--workers", type=int, default=1, help="parallel processes")
    parser.add_argument("--label", default=None, help="leaderboard name of this entry (default: the agent name)")
    parser.add_argument("--batch-size", type=int, default=1, help="chains per process played in lockstep")
    args = parser.parse_args(argv)
    return EvalConfig(**{k.replace("-", "_"): v for k, v in vars(args).items()})


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    summary = evaluate(parse_args(argv))
    keys = ("agent", "split", "source", "n_chains", "n_tasks", "tgc", "sgc", "mean_steps", "mean_tokens")
    print(json.dumps({k: summary[k] for k in keys}))


if __name__ == "__main__":
    main()
