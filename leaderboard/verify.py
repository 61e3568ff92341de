"""Verify a leaderboard entry: replay its episode log in the env and check that the logged figures follow.

    python -m leaderboard.verify leaderboard/results/<entry>.json [--chains N] [--skills-path DIR]

Every episode the summary counts is replayed: the env is made with the summary's ``env`` and ``env_kwargs``, reset
as the evaluator reset it (``reset(seed=s, options={"chain": i})``, plus the starting skill library when the agent
brought one), and sent the logged actions in order. Each turn is checked against the log as it is played: the
task the action went to, the task's end, its success, engine steps, invalid actions, skill calls, skills used and
created, skill reuse, the words the agent was shown (``tokens_in``) and, for agents charged words (``token_unit``
``words``), its ``tokens``; where the domain scores its tasks, each task's ``task_score`` at its last turn; at a
chain's end, the hash of its observations. An LLM's generated token counts are
what the agent reported: they cannot be replayed, only summed. Then every figure of the summary is recomputed from
the log (``leaderboard.evaluate.summary_episodes`` and the evaluator's own summary code) and compared.

A difference is named at the first turn at which the replay can tell it: the log keeps per-task totals and one
observation hash per chain, so an edit inside a task that pushes no total past its logged value shows at the
task's last turn (a count or flag that comes out short), or at the chain's last turn (the observation hash).

Exit status: 0 verified (one ``OK`` line with counts), 1 the log or the summary does not follow (the first chain,
task and turn that differ, and what), 2 not checkable here (the official games or the starting skill library are
absent). A full verification writes ``verified/<entry>.json`` beside the summary: the hashes of the summary and
the log it verified, what was replayed and the verifier's commit. :func:`verification_status` tells whether that
record still matches the files (the site marks such entries verified).

What passes is a log whose every figure follows from its actions on the recorded games; that the named agent
chose those actions is not something a replay can show.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

import sage_envs  # noqa: F401  (registers the env ids)
from leaderboard.evaluate import episodes_path, git_commit, installed_versions, summary_episodes
from sage_agents.evaluation import summarize_records
from sage_envs.error import DataNotFoundError
from sage_envs.skills import SkillLibrary

__all__ = ["Mismatch", "record_path", "replay_chain", "summary_mismatch", "verification_status",
           "verify", "main"]  # fmt: skip

VERIFIED_DIR = "verified"
"""Folder beside the summaries that holds the verification records (skipped by the summary loaders' ``*.json``)."""
COUNTED = ("primitive_steps", "invalid_actions", "skill_calls", "tokens_in")
"""Per-task counts of an episode record that the replay recounts turn by turn (``tokens`` too, for words)."""
LISTED = ("skills_used", "skills_created")
"""Per-task lists of an episode record that the replay rebuilds turn by turn."""
FLAGGED = ("success", "skill_reuse")
"""Per-task flags of an episode record that the replay sets turn by turn."""


@dataclass
class Mismatch:
    """The first place where a replay and its log part."""

    seed: int
    """The episode's reset seed."""
    chain: int
    """The chain's index in the split."""
    task: int
    """The task's index in the chain (0-based, as ``info["task_index"]``)."""
    turn: int
    """The turn within the task (1-based; 0: before its first turn)."""
    what: str
    """What the log holds and what the replay gave."""

    def __str__(self) -> str:
        return f"chain {self.chain} (seed {self.seed}), task {self.task}, turn {self.turn}: {self.what}"


def _words(text: str) -> int:
    return len(text.split())


def replay_chain(env: gym.Env, record: dict[str, Any], words: bool, skill_library: Any = None) -> Mismatch | None:
    """Replay one episode record's actions in ``env``; the first difference from the record, or None.

    Args:
        env: an env made with the entry's id and kwargs.
        record: an episode record of :func:`sage_agents.evaluation.play_chains`.
        words: whether the record's ``tokens`` are the words of its actions (``token_unit`` ``words``), and so
            replayable.
        skill_library: the library every chain of the entry started from (the agent's ``skill_library``).
    """
    seed, chain = record["seed"], record["chain"]
    options: dict[str, Any] = {"chain": chain}
    if skill_library is not None:
        options["skill_library"] = skill_library
    obs, info = env.reset(seed=seed, options=options)
    n = info["chain_length"]
    if len(record["success"]) != n:
        return Mismatch(seed, chain, 0, 0, f"the log holds {len(record['success'])} tasks, the env's chain {n}")
    error_task = record.get("agent_error", {}).get("task_index")
    # Records logged before a field existed lack it: what a record does not hold is not checked (verify names it).
    counted = [key for key in COUNTED + (("tokens",) if words else ()) if key in record]
    listed, flagged = [key for key in LISTED if key in record], [key for key in FLAGGED if key in record]
    digest = hashlib.sha256()
    ended = False  # whether the chain terminated
    for t in range(n):
        actions = record["actions"][t]
        tally: dict[str, Any] = {**dict.fromkeys(COUNTED + ("tokens",), 0), **{k: [] for k in LISTED}}
        tally.update(dict.fromkeys(FLAGGED, 0))
        if len(actions) != record["steps"][t]:
            return Mismatch(seed, chain, t, len(actions), f"steps is {record['steps'][t]}, the log holds "
                            f"{len(actions)} actions for this task")  # fmt: skip
        if actions and ended:
            return Mismatch(seed, chain, t, 1, "the chain had ended, yet the log holds actions for this task")
        task_over = False
        for turn, action in enumerate(actions, 1):
            if task_over:
                return Mismatch(seed, chain, t, turn, f"the env ended task {t} at turn {turn - 1}, yet the log "
                                f"holds {len(actions)} turns for it")  # fmt: skip
            tally["tokens_in"] += sum(_words(text) for text in obs.values())
            obs, _, terminated, truncated, info = env.step(action)
            digest.update(obs["observation"].encode())
            if info["task_index"] != t:
                return Mismatch(seed, chain, t, turn, f"the env put this action in task {info['task_index']}")
            if turn == 1:
                for key, logged in (("task_id", record["task_ids"][t]), ("task_type", record["task_types"][t])):
                    if info.get(key, "") != logged:
                        return Mismatch(seed, chain, t, turn, f"{key} is {logged!r}, the env's {info.get(key)!r}")
            tally["primitive_steps"] += info["primitive_steps"]
            tally["invalid_actions"] += not info["action_valid"]
            tally["skill_calls"] += info.get("action_kind") == "call"
            if words:
                tally["tokens"] += _words(action)
            tally["skills_used"] += info["skills_used"]
            tally["skills_created"] += info["skills_created"]
            tally["skill_reuse"] |= bool(info["skill_reuse"])
            tally["success"] |= bool(info["task_success"])
            ended = terminated or truncated
            task_over = ended or info["new_task"]
            last = turn == len(actions)
            # The log holds per-task totals: a count past its total shows at its turn, a short one at the task's end.
            span = f"over the task's {turn} turns" if last else "by this turn"
            for key in counted:
                if tally[key] > record[key][t] or (last and tally[key] != record[key][t]):
                    what = f"{key} is {record[key][t]}, the replay's {tally[key]} {span}"
                    return Mismatch(seed, chain, t, turn, what)
            for key in listed:
                logged = record[key][t]
                if logged[: len(tally[key])] != tally[key] or (last and logged != tally[key]):
                    return Mismatch(seed, chain, t, turn, f"{key} is {logged}, the replay's {tally[key]} {span}")
            for key in flagged:
                if (tally[key] and not record[key][t]) or (last and bool(tally[key]) != bool(record[key][t])):
                    return Mismatch(seed, chain, t, turn, f"{key} is {record[key][t]}, the replay's "
                                    f"{bool(tally[key])} {span}")  # fmt: skip
            if last and "task_score" in record and record["task_score"][t] != info.get("task_score"):
                return Mismatch(seed, chain, t, turn, f"task_score is {record['task_score'][t]}, the replay's "
                                f"{info.get('task_score')} at the task's last turn")  # fmt: skip
        if actions and not task_over and error_task != t:
            return Mismatch(seed, chain, t, len(actions), "the log's last action for this task left it unfinished "
                            "and the record names no agent error")  # fmt: skip
        if not actions:  # a task never played (an agent error before it): nothing to its name
            for key in counted + listed + flagged:
                if record[key][t]:
                    return Mismatch(seed, chain, t, 0, f"{key} is {record[key][t]} for a task with no actions")
            if error_task is None or t < error_task:
                return Mismatch(seed, chain, t, 0, "the log holds no actions for this task and names no agent error")
            planned = env.unwrapped.chains[chain][t]
            for key, logged in (("task_id", record["task_ids"][t]), ("task_type", record["task_types"][t])):
                if getattr(planned, key, "") != logged:
                    return Mismatch(seed, chain, t, 0, f"{key} is {logged!r}, the env's {getattr(planned, key)!r}")
    if "observations_sha256" in record and record["observations_sha256"] != digest.hexdigest():
        turns = sum(len(a) for a in record["actions"])
        what = f"observations_sha256 differs from the replay's (one hash for the chain's {turns} observations)"
        return Mismatch(seed, chain, n - 1, len(record["actions"][-1]), what)
    return None


def _differs(logged: Any, recomputed: Any) -> bool:
    """Whether two summary values differ (floats by more than rounding)."""
    if isinstance(logged, dict) and isinstance(recomputed, dict):
        return logged.keys() != recomputed.keys() or any(_differs(logged[k], recomputed[k]) for k in logged)
    if isinstance(logged, list) and isinstance(recomputed, list):
        return len(logged) != len(recomputed) or any(map(_differs, logged, recomputed))
    if isinstance(logged, (int, float)) and isinstance(recomputed, (int, float)):
        return not math.isclose(logged, recomputed, rel_tol=1e-9, abs_tol=1e-12)
    return logged != recomputed


def summary_mismatch(summary: dict[str, Any], records: list[dict[str, Any]]) -> str | None:
    """The first figure of ``summary`` that its episode records do not give, or None when all follow."""
    figures = summarize_records(records, summary.get("env_kwargs", {}).get("chain_length"))
    for key, value in figures.items():
        if key not in summary or _differs(summary[key], value):
            return f"summary {key} is {summary.get(key, '(missing)')}, the log's episodes give {value}"
    return None


def record_path(summary_path: str | os.PathLike) -> Path:
    """Where the verification record of a summary lives: ``verified/<summary name>`` beside it."""
    path = Path(summary_path)
    return path.parent / VERIFIED_DIR / path.name


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verification_status(summary_path: str | os.PathLike) -> dict[str, Any] | None:
    """The verification record of a summary when it still matches the summary and its log, else None.

    A record whose hashes differ from the files (the entry was rerun or edited since) does not count.
    """
    path = Path(summary_path)
    try:
        record = json.loads(record_path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    log = episodes_path(path)
    if not log.is_file() or record.get("summary_sha256") != _sha256(path):
        return None
    return record if record.get("episodes_sha256") == _sha256(log) else None


def _make_env(summary: dict[str, Any]) -> gym.Env:
    """The entry's env; DataNotFoundError when its games are absent here."""
    try:
        env = gym.make(summary["env"], **summary["env_kwargs"])
        env.reset(seed=0, options={"chain": 0})  # official games are looked up by the first reset
    except DataNotFoundError as error:
        raise DataNotFoundError(
            f"the entry's {summary['source']} games of {summary['env']} are not here: {error}"
        ) from error
    return env


def _skill_library(summary: dict[str, Any], skills_path: str | None) -> SkillLibrary | None:
    """The library the agent started every chain from: its ``agent_kwargs`` ``skills_path`` (or the override)."""
    path = skills_path or summary.get("agent_kwargs", {}).get("skills_path")
    if not path:
        return None
    if not Path(path).is_dir():
        raise DataNotFoundError(
            f"the agent started every chain from the skill library at {path!r}, which is not here; replaying "
            "without it would differ. Give its copy with --skills-path DIR."
        )
    return SkillLibrary.load(path)


def verify(
    summary_path: str | os.PathLike, chains: int | None = None, skills_path: str | None = None
) -> tuple[dict[str, Any], Mismatch | str | None]:
    """Replay an entry's episodes and recompute its summary.

    Args:
        summary_path: the entry's summary JSON (its episode log lies beside it).
        chains: replay only the first ``chains`` chains of each seed (None: all that the summary counts).
        skills_path: the starting skill library's folder, when not at the summary's ``agent_kwargs`` path.

    Returns:
        The counts checked (``chains``, ``turns``, ``tasks``; ``unchecked``: the checked fields some record
        lacks, logged before they existed) and the first difference: a :class:`Mismatch` of
        the replay, a sentence on the summary, or None when everything follows.

    Raises:
        DataNotFoundError: the entry's games or starting skill library are absent here.
    """
    summary, records = summary_episodes(summary_path)
    replayed = records if chains is None else [r for r in records if r["chain"] < chains]
    library = _skill_library(summary, skills_path)
    words = summary.get("token_unit") == "words"
    counts: dict[str, Any] = {"chains": 0, "tasks": 0, "turns": 0}
    checked = (*COUNTED, *LISTED, *FLAGGED, "observations_sha256", *(("tokens",) if words else ()))
    counts["unchecked"] = sorted({key for r in replayed for key in checked if key not in r})
    env = _make_env(summary)
    try:
        for record in replayed:
            mismatch = replay_chain(env, record, words, library)
            if mismatch is not None:
                return counts, mismatch
            counts["chains"] += 1
            counts["tasks"] += len(record["success"])
            counts["turns"] += sum(record["steps"])
    finally:
        env.close()
    return counts, summary_mismatch(summary, records)


def _write_record(summary_path: Path, counts: dict[str, int], argv: list[str]) -> Path:
    """Write the verification record of a fully verified entry (see the module docstring)."""
    out = record_path(summary_path)
    out.parent.mkdir(exist_ok=True)
    record = {
        "summary": summary_path.name,
        "summary_sha256": _sha256(summary_path),
        "episodes": episodes_path(summary_path).name,
        "episodes_sha256": _sha256(episodes_path(summary_path)),
        **counts,
        "command": "python -m leaderboard.verify " + " ".join(argv),
        "verifier_commit": git_commit(),
        "verifier_versions": installed_versions(),
    }
    out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (module docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m leaderboard.verify", description=__doc__.splitlines()[0])
    parser.add_argument("summary", type=Path, help="the entry's summary JSON (its .episodes.jsonl lies beside it)")
    parser.add_argument(
        "--chains", type=int, default=None, help="replay only the first N chains per seed (then no record is written)"
    )
    parser.add_argument(
        "--skills-path", default=None, help="the starting skill library's folder (default: agent_kwargs skills_path)"
    )
    parser.add_argument("--no-record", action="store_true", help="do not write verified/<entry>.json")
    args = parser.parse_args(argv)
    if args.chains is not None and args.chains < 1:
        parser.error(f"--chains {args.chains}: give a number of chains >= 1, or leave it out to replay all.")
    name = args.summary.name
    try:
        counts, mismatch = verify(args.summary, args.chains, args.skills_path)
    except DataNotFoundError as error:
        print(f"NOT CHECKED {name}: {error}")
        return 2
    except ValueError as error:  # the log lacks episodes the summary counts
        print(f"FAILED {name}: {error}")
        return 1
    if mismatch is not None:
        print(f"FAILED {name}: {mismatch}")
        return 1
    partial = f" (first {args.chains} chains per seed; no record written)" if args.chains else ""
    lacking = f"; not in the log, so not checked: {', '.join(counts['unchecked'])}" if counts["unchecked"] else ""
    print(f"OK {name}: {counts['chains']} chains, {counts['tasks']} tasks, {counts['turns']} turns replayed; "
          f"summary recomputed from the log{lacking}{partial}")  # fmt: skip
    if not args.chains and not args.no_record:
        print(f"wrote {_write_record(args.summary, counts, argv)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
