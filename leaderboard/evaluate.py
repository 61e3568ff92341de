"""Evaluate a registered agent on fixed chains of a SageChain env and write per-episode JSONL + a summary JSON.

    python -m leaderboard.evaluate --agent random --env SageChain-ALFWorld-v0 --split valid_unseen \
        --num-chains 100 --output leaderboard/results

Chains ``0 .. num_chains-1`` of the split are played once per seed (``reset(seed=s, options={"chain": i})``), so
every agent meets the same games. Finished episodes are appended to the JSONL as they end: rerunning the same
command after a crash skips them and produces the same summary.

Chains are played and summarized by ``sage_agents.evaluation`` (the path the trainer's evaluation and
``sage eval`` take too); this module adds the CLI, the result files, resume, workers and provenance. Summary keys,
intervals and agent errors: docs/leaderboard.md. ``--resummarize PATH...`` recomputes written summaries from their
episode logs, keeping their provenance.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import importlib.metadata
import json
import multiprocessing
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

from sage_agents.evaluation import BOOTSTRAP_SAMPLES, play_chain, play_chains, summarize_records
from sage_agents.models import describe_model
from sage_agents.registry import make_agent
from sage_agents.workers import die_with_parent, share_cores
from sage_envs import SkillLibrary  # importing sage_envs registers the env ids

__all__ = [
    "BOOTSTRAP_SAMPLES", "EvalConfig", "append_episodes", "episodes_path", "evaluate", "git_commit",
    "installed_versions", "main", "play_chain", "play_chains", "read_episodes", "resummarize", "summarize",
    "summary_episodes", "worker_pool", "write_summary",
]  # fmt: skip
# Packages whose version can change a result: the dependency ranges are open, so two installs of one commit may
# differ (a fresh install reran the 3-layer demo's seed 0 with other SFT numbers; docs/demo.md).
RECORDED_PACKAGES = (
    "sage-rl-agent", "gymnasium", "alfworld", "textworld", "torch", "transformers", "trl", "tokenizers",
)  # fmt: skip


def keeps_library(env_kwargs: dict[str, Any]) -> bool:
    """Whether env options keep one skill library across chains (``library_scope="persistent"``): chains in order."""
    return env_kwargs.get("library_scope") == "persistent"


@dataclass
class EvalConfig:
    """One evaluation: an agent on the first ``num_chains`` chains of one env split, once per seed."""

    agent: str
    """Registered agent name (entry-point group ``sage_agents.agents``)."""
    env: str = "SageChain-ALFWorld-v0"
    """Versioned env id."""
    split: str = "valid_unseen"
    """Split to evaluate on: one the env's domain declares (ALFWorld: train, valid_seen or valid_unseen)."""
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
        if self.persistent and (self.workers > 1 or self.batch_size > 1):
            raise ValueError(
                f"env_kwargs library_scope='persistent' carries the skill library from each chain to the next in "
                f"one env, so the chains are played one after another: use workers=1 and batch_size=1 (got "
                f"workers={self.workers}, batch_size={self.batch_size})."
            )

    @property
    def persistent(self) -> bool:
        """Whether the env keeps its skill library across chains (``library_scope="persistent"``).

        The chains are then played in order (every seed's, seed after seed) in one env, each starting from the
        library the one before ended with; each episode record keeps that end library (``skill_library_end``),
        so that a killed run resumes from it and ``leaderboard.verify`` replays the chains in the same order.
        """
        return keeps_library(self.env_kwargs)

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
        """Short hash of everything that decides the episodes (not the output folder or worker count).

        An absolute path under the working directory among the agent's kwargs (a model folder) counts as its
        relative spelling, so that a run resumed with ``--output-dir $PWD/runs/x`` finds the episodes it played as
        ``runs/x`` instead of playing them all again.
        """
        decisive = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("output", "workers", "num_chains")}
        decisive["agent_kwargs"] = {k: _relative_to_cwd(v) for k, v in self.agent_kwargs.items()}
        return hashlib.sha256(json.dumps(decisive, sort_keys=True).encode()).hexdigest()[:12]


def _relative_to_cwd(value: Any) -> Any:
    """``value`` relative to the working directory when it is an absolute path under it, else ``value``."""
    if isinstance(value, Path):
        value = str(value)
    if not isinstance(value, str) or not os.path.isabs(value):
        return value
    path, cwd = Path(value).resolve(), Path.cwd().resolve()
    return str(path.relative_to(cwd)) if path.is_relative_to(cwd) else value


def summarize(
    records: list[dict[str, Any]],
    config: EvalConfig,
    model: str,
    source: str,
    token_unit: str = "tokens",
    *,
    full_length: int | None = None,
    model_name: str | None = None,
    given: str = "",
    earlier: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Aggregate episode records into the leaderboard's summary (keys in docs/leaderboard.md, SPEC.md section 5).

    The figures are :func:`sage_agents.evaluation.summarize_records` (chains are the bootstrap's unit, so tasks of
    one chain are resampled together). ``token_unit`` says what ``mean_tokens`` counts: ``tokens`` the agent
    reported generating, or ``words`` (whitespace-separated words of its actions) for an agent that does not
    count them, such as the scripted ones. ``full_length`` is the configured chain length (``sgc_full_length``),
    ``model_name`` a readable name of ``model`` (default: ``model``), ``given`` what the agent was handed.
    ``commit`` and ``versions`` are those the records were played with; ``earlier``, the summary an earlier run
    wrote for the same config, supplies them for records that predate their being logged per episode.
    """
    commit, versions = _provenance(records, earlier or {})
    return {
        "agent": config.label or config.agent,
        "env": config.env,
        "split": config.split,
        "source": source,
        **summarize_records(records, full_length),
        "token_unit": token_unit,
        "seeds": list(config.seeds),
        "model": model,
        "model_name": model_name or model,
        "given": given,
        "commit": commit,
        "versions": versions,
        "config_hash": config.config_hash,
        "agent_kwargs": config.agent_kwargs,
        "env_kwargs": config.make_kwargs,
    }


def _provenance(records: list[dict[str, Any]], earlier: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The commit(s) and package versions that played ``records``, each joined with "+" where they differ.

    A record without its own (logged before episodes carried them) takes ``earlier``'s, never this process's.
    """
    if not records:
        return git_commit(), installed_versions()
    commits = {str(r.get("commit", earlier.get("commit", "unknown"))) for r in records}
    joined: dict[str, set[str]] = {}
    for r in records:
        for name, version in r.get("versions", earlier.get("versions", {})).items():
            joined.setdefault(name, set()).add(str(version))
    return "+".join(sorted(commits)), {name: "+".join(sorted(v)) for name, v in sorted(joined.items())}


def installed_versions() -> dict[str, str]:
    """Python's version and each installed one of :data:`RECORDED_PACKAGES` (absent packages are left out)."""
    versions = {"python": platform.python_version()}
    for name in RECORDED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return versions


def git_commit() -> str:
    """The checked-out commit of this project's code, or "unknown" outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent)  # fmt: skip
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


_WORKER: dict[str, Any] = {}  # in a worker: its agent, envs and the config hash they were built for


def _init_worker(spec: Any, threads: int, parent: int) -> None:
    """Set up a spawned worker: the parent's registration of the env id, its share of the cores, death with it.

    An id registered at run time (not by importing a package) would otherwise be unknown there. A worker that
    outlived a killed evaluation played on for nothing beside the rerun (seen: two for ten minutes), and one training
    a demo arm would write its checkpoints beside the rerun resuming the same arm. A job run whole in a worker (an
    evaluation, a demo arm) shows its progress as plain lines (rich's ``TTY_COMPATIBLE=0``): two live displays in one
    terminal would overwrite each other.
    """
    if spec.id not in gym.registry:
        gym.registry[spec.id] = spec
    share_cores(threads)
    os.environ["TTY_COMPATIBLE"] = "0"
    die_with_parent(parent)


def _batch(config: EvalConfig, agent: Any) -> int:
    """Chains one process plays in lockstep: ``batch_size`` for an agent with ``act_batch``, else one."""
    return config.batch_size if hasattr(agent, "act_batch") else 1


def _make_envs(config: EvalConfig, agent: Any) -> list[gym.Env]:
    """The envs one process plays in lockstep (:func:`_batch` of them)."""
    return [gym.make(config.env, **config.make_kwargs) for _ in range(_batch(config, agent))]


def _play_in_worker(config: EvalConfig, todo: list[tuple[int, int]]) -> list[dict[str, Any]]:
    """Play ``todo`` in this process, building the agent and its envs once per process and config.

    A worker of a shared :func:`worker_pool` keeps the agent of the latest config it played, so that a config's
    parts reuse it and the next config's first part replaces it.
    """
    if _WORKER.get("config") != config.config_hash:
        for env in _WORKER.get("envs", ()):
            env.close()
        _WORKER.clear()
        _WORKER["agent"] = make_agent(config.agent, **{"env_id": config.env, **config.agent_kwargs})
        _WORKER["envs"] = _make_envs(config, _WORKER["agent"])
        _WORKER["config"] = config.config_hash
    return list(play_chains(_WORKER["envs"], _WORKER["agent"], todo))


@contextlib.contextmanager
def worker_pool(env_id: str, workers: int) -> Iterator[Executor]:
    """Spawned workers that several :func:`evaluate` calls share (``evaluate(config, pool=pool)``), or any jobs.

    A worker imports torch and transformers and loads its agent (~7 s on a 2-core CPU); evaluating many agents in a
    row (the demo's stage 4) pays the imports once per worker instead of once per agent and worker. The demo also
    plays its expert chains and trains its RL arms in such a pool. Each worker gets its share of the cores and dies
    with this process (:func:`_init_worker`). "spawn", not the default fork: a process that already
    ran torch (e.g. `sage demo` after training) has OpenMP threads, and a forked worker then hung in its first
    forward pass (seen with 2 workers).
    """
    context, spec = multiprocessing.get_context("spawn"), gym.spec(env_id)
    setup = (spec, max(1, (os.cpu_count() or 1) // workers), os.getpid())
    with ProcessPoolExecutor(workers, context, initializer=_init_worker, initargs=setup) as pool:
        try:
            yield pool
        except BaseException:  # an error or Ctrl-C: drop the queued work instead of waiting for all of it
            pool.shutdown(wait=False, cancel_futures=True)
            raise


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


def evaluate(config: EvalConfig, pool: Executor | None = None) -> dict[str, Any]:
    """Run (or resume) the evaluation and write ``<run_name>.episodes.jsonl`` and ``<run_name>.json``.

    With ``config.workers > 1`` the chains are played by a new pool of that many workers, or by ``pool`` (a
    :func:`worker_pool` of ``config.workers`` workers for ``config.env``) where one is given.
    """
    out = Path(config.output)
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / f"{config.run_name}.episodes.jsonl"
    agent = make_agent(config.agent, **{"env_id": config.env, **config.agent_kwargs})
    # With workers, each builds its own envs: this process only needs one to read the split's size and source.
    envs = _make_envs(config, agent) if config.workers == 1 else [gym.make(config.env, **config.make_kwargs)]
    num_chains = min(config.num_chains, envs[0].unwrapped.num_chains)
    source = str(getattr(envs[0].unwrapped.domain, "source", "default"))
    todo_all = [(seed, chain) for seed in config.seeds for chain in range(num_chains)]
    done = read_episodes(log_path, config.config_hash)
    todo = [key for key in todo_all if key not in done]

    earlier = _read_summary(out / f"{config.run_name}.json", config.config_hash)
    records = _run(config, envs, agent, todo, pool)
    if config.persistent:
        records = _carry_library(envs[0], records, todo_all, done, log_path)
    for record in append_episodes(log_path, records, config):
        done[(record["seed"], record["chain"])] = record
    full_length = getattr(envs[0].unwrapped, "chain_length", None)
    for env in envs:
        env.close()
    model = str(getattr(agent, "model_id", config.agent))
    counts_tokens = hasattr(agent, "tokens_generated") or hasattr(agent, "last_tokens")  # else play_chains counts words
    summary = summarize([done[key] for key in todo_all], config, model=model, source=source,
                        token_unit="tokens" if counts_tokens else "words", full_length=full_length,
                        model_name=_model_name(model), given=str(getattr(agent, "given", "")),
                        earlier=earlier)  # fmt: skip
    write_summary(out / f"{config.run_name}.json", summary)
    return summary


def _carry_library(
    env: gym.Env,
    records: Iterable[dict[str, Any]],
    todo_all: list[tuple[int, int]],
    done: dict[tuple[int, int], dict[str, Any]],
    log_path: Path,
) -> Iterator[dict[str, Any]]:
    """``records`` of a persistent-library run, each with the library its chain ended with (``skill_library_end``).

    A resumed run first gives ``env`` the library the last logged chain ended with, through a reset with the
    ``skill_library`` option (the persistent env keeps it over the next reset). The logged chains must be the
    first ones of ``todo_all``, in order, or the library would be that of another history.
    """
    logged = [key for key in todo_all if key in done]
    if logged != todo_all[: len(logged)] or any("skill_library_end" not in done[key] for key in logged[-1:]):
        raise ValueError(
            f"{log_path} holds chains of this persistent-library run other than the first {len(logged)} in order "
            "(or without the library they ended with), so the library the next chain starts from is unknown; "
            "delete that log (or give another --output) and rerun."
        )
    if logged and len(logged) < len(todo_all):
        seed, chain = todo_all[len(logged)]
        end = SkillLibrary.from_dict(done[logged[-1]]["skill_library_end"])
        env.reset(seed=seed, options={"chain": chain, "skill_library": end})
    for record in records:
        record["skill_library_end"] = env.unwrapped.library.to_dict()
        yield record


def append_episodes(path: Path, records: Iterable[dict[str, Any]], config: EvalConfig) -> Iterator[dict[str, Any]]:
    """Append each of ``records`` to the episode log ``path`` as it arrives (flushed to disk), and yield it.

    Each record is stamped with ``config``'s ``config_hash`` and with the commit and package versions of this
    process. A last line a crash cut short is closed first. ``evaluate`` and ``sage play`` (sage_app/play.py)
    write their logs through here.
    """
    commit, versions = git_commit(), installed_versions()
    torn = False  # a last line cut by a crash: the next record must start a line of its own, or it is lost
    if path.exists() and path.stat().st_size:
        with path.open("rb") as log:
            log.seek(-1, os.SEEK_END)
            torn = log.read(1) != b"\n"
    with path.open("a") as sink:
        if torn:
            sink.write("\n")
        for record in records:
            record["config_hash"] = config.config_hash
            record["commit"] = commit  # the code that played it: a resumed run may span commits ...
            record["versions"] = versions  # ... and installs
            sink.write(json.dumps(record) + "\n")
            sink.flush()
            os.fsync(sink.fileno())
            yield record


def _model_name(model: str) -> str:
    """A readable name of ``model``: :func:`~sage_agents.models.describe_model` of a local folder, else itself."""
    return describe_model(model) if Path(model, "config.json").is_file() else model


def _read_summary(path: Path, config_hash: str) -> dict[str, Any]:
    """The summary at ``path`` when it exists and belongs to ``config_hash``, else ``{}``."""
    try:
        summary = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return summary if summary.get("config_hash") == config_hash else {}


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    """Write ``summary`` atomically (a temporary file renamed over ``path``)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


PROVENANCE_KEYS = (
    "agent", "env", "split", "source", "token_unit", "seeds", "model", "commit", "versions", "config_hash",
    "agent_kwargs", "env_kwargs",
)  # fmt: skip
"""Summary keys that say what was played, by what and where; :func:`resummarize` keeps them as they are."""


def episodes_path(summary_path: str | os.PathLike) -> Path:
    """The episode log that belongs to a summary JSON (``<run_name>.json`` -> ``<run_name>.episodes.jsonl``)."""
    path = Path(summary_path)
    return path.with_name(path.name.removesuffix(".json") + ".episodes.jsonl")


def summary_episodes(summary_path: str | os.PathLike) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A written summary and the episode records it summarizes, in ``(seed, chain)`` order.

    The records are those of the summary's ``config_hash`` in its episode log, chains ``0 .. n_chains /
    len(seeds) - 1`` of each seed; raises ValueError naming the first missing one when the log lacks any.
    """
    path = Path(summary_path)
    summary = json.loads(path.read_text())
    episodes = episodes_path(path)
    done = read_episodes(episodes, summary["config_hash"])
    n_seeds = len(summary["seeds"])
    keys = [(seed, chain) for seed in summary["seeds"] for chain in range(summary["n_chains"] // n_seeds)]
    missing = [key for key in keys if key not in done]
    if missing:
        raise ValueError(
            f"{episodes} lacks {len(missing)} of the {len(keys)} (seed, chain) episodes of config_hash "
            f"{summary['config_hash']} that {path.name} summarizes (first: {missing[0]}); rerun the evaluation."
        )
    return summary, [done[key] for key in keys]


def resummarize(summary_path: str | os.PathLike, write: bool = True) -> dict[str, Any]:
    """Recompute a written summary's figures from its episode log, keeping its provenance; returns the new one.

    The summary is rewritten in place (unless ``write`` is False). :data:`PROVENANCE_KEYS` are kept as
    written. Every figure is :func:`~sage_agents.evaluation.summarize_records` of the log's episodes of its
    ``config_hash`` (chains ``0 .. n_chains / len(seeds) - 1`` of each seed), the configured chain length read
    from ``env_kwargs`` (else the longest chain of the log). ``model_name`` and ``given`` are kept when present,
    else filled in (``model_name`` describes ``model`` when that folder is here).
    """
    path = Path(summary_path)
    old, records = summary_episodes(path)
    figures = summarize_records(records, old.get("env_kwargs", {}).get("chain_length"))
    summary = {
        **figures,
        **{key: old[key] for key in PROVENANCE_KEYS if key in old},
        "model_name": old.get("model_name") or _model_name(str(old.get("model", ""))),
        "given": old.get("given", ""),
    }
    if write:
        write_summary(path, summary)
    return summary


def _run(
    config: EvalConfig, envs: list[gym.Env], agent: Any, todo: list[tuple[int, int]], pool: Executor | None = None
) -> Iterable[dict[str, Any]]:
    """Yield episode records for ``todo`` (seed, chain) pairs, in this process or in ``pool`` (or a new pool)."""
    from sage_agents.progress import Progress  # plain progress lines in a log

    with Progress(transient=True) as progress:
        bar = progress.add_task(f"{config.label or config.agent} on {config.env}/{config.split}", total=len(todo))
        if config.workers == 1:
            for record in play_chains(envs, agent, todo):
                yield record
                progress.advance(bar)
            return
        # Work goes out in parts: at least two per worker, so that the workers finish together, and at most eight
        # batches, so that a crash loses little; a worker's batch stays full but for each part's tail.
        batch = _batch(config, agent)
        part = max(1, min(batch * 8, -(-len(todo) // (2 * config.workers)))) if batch > 1 else 1
        parts = [todo[i : i + part] for i in range(0, len(todo), part)]
        with contextlib.nullcontext(pool) if pool is not None else worker_pool(config.env, config.workers) as pool:
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
    parser.add_argument(
        "--split",
        default="valid_unseen",
        help="a split the env's domain declares (ALFWorld: train, valid_seen, valid_unseen)",
    )
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
    """Command-line entry point; ``--resummarize SUMMARY.json ...`` recomputes written summaries instead."""
    argv = list(sys.argv[1:] if argv is None else argv)
    keys = ("agent", "split", "source", "n_chains", "n_tasks", "tgc", "sgc", "mean_steps", "mean_tokens",
            "agent_errors")  # fmt: skip
    if argv[:1] == ["--resummarize"]:
        paths = [p for arg in argv[1:] for p in (sorted(Path(arg).glob("*.json")) if Path(arg).is_dir() else [arg])]
        if not paths:
            raise SystemExit("--resummarize takes summary JSON files or folders of them, e.g. leaderboard/results")
        for path in paths:
            summary = resummarize(path)
            shown = {"summary": str(path), **{k: summary[k] for k in keys}, "ci95_tgc": summary["ci95"]["tgc"]}
            print(json.dumps(shown))
        return
    summary = evaluate(parse_args(argv))
    print(json.dumps({k: summary[k] for k in keys}))


if __name__ == "__main__":
    main()
