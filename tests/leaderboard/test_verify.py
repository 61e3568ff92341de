"""leaderboard.verify: a committed entry replays; edited logs and summaries fail naming chain, task and turn."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import gymnasium as gym
import pytest

from leaderboard.evaluate import EvalConfig, evaluate
from leaderboard.verify import main, record_path, verification_status
from tests.sage_envs.toy_domain import RiskyToyChainEnv

RESULTS = Path(__file__).parents[2] / "leaderboard" / "results"
EXPERT = "expert__SageChain-ALFWorld-v0__valid_unseen__default"
RANDOM_OFFICIAL = "random__SageChain-ALFWorld-v0__valid_seen__official"
RISKY_ID = "SageChain-RiskyToyVerify-v0"


def _copy(tmp_path: Path, stem: str) -> Path:
    for suffix in (".json", ".episodes.jsonl"):
        shutil.copyfile(RESULTS / f"{stem}{suffix}", tmp_path / f"{stem}{suffix}")
    return tmp_path / f"{stem}.json"


def _edit(summary: Path, chain: int, edit) -> None:
    """Apply ``edit`` to the record of ``chain`` in the summary's episode log."""
    log = summary.with_name(summary.name.removesuffix(".json") + ".episodes.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    edit(next(r for r in records if r["chain"] == chain))
    log.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_a_committed_entry_verifies(capsys):
    record = record_path(RESULTS / f"{EXPERT}.json")
    before = record.read_bytes() if record.exists() else None
    assert main([str(RESULTS / f"{EXPERT}.json"), "--chains", "4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"OK {EXPERT}.json: 4 chains, 8 tasks, ") and "no record written" in out
    assert (record.read_bytes() if record.exists() else None) == before  # a partial check leaves the record alone


def test_an_edited_action_fails_naming_chain_task_and_turn(tmp_path, capsys):
    summary = _copy(tmp_path, EXPERT)
    logged = [json.loads(line) for line in summary.with_name(f"{EXPERT}.episodes.jsonl").read_text().splitlines()]
    assert len(logged[2]["actions"][1]) > 2  # the edit below needs the task's third turn
    # an extra "look" at the start of task 1 (its steps raised to match): its counts and observations part
    _edit(summary, 2, lambda r: r["actions"][1].insert(0, "look"))
    _edit(summary, 2, lambda r: r["steps"].__setitem__(1, r["steps"][1] + 1))
    assert main([str(summary), "--chains", "3"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"FAILED {EXPERT}.json: chain 2 (seed 0), task 1, turn ")
    assert "the replay's" in out


def test_a_fabricated_success_fails_at_the_tasks_last_turn(tmp_path, capsys):
    summary = _copy(tmp_path, "random__SageChain-ALFWorld-v0__valid_unseen__default")
    records = [json.loads(line) for line in summary.with_name(summary.name[:-5] + ".episodes.jsonl").open()]
    chain = next(r["chain"] for r in records[:5] if not r["success"][0])
    _edit(summary, chain, lambda r: r["success"].__setitem__(0, True))
    assert main([str(summary), "--chains", "5"]) == 1
    out = capsys.readouterr().out.strip()
    assert out.endswith(
        f"chain {chain} (seed 0), task 0, turn 30: success is True, the replay's False over the task's 30 turns"
    )


def test_an_extra_turn_after_the_task_ended_is_named(tmp_path, capsys):
    summary = _copy(tmp_path, EXPERT)

    def add_turn(record):
        record["actions"][0].append("look")
        record["steps"][0] += 1

    _edit(summary, 1, add_turn)
    assert main([str(summary), "--chains", "2"]) == 1
    out = capsys.readouterr().out
    assert "chain 1 (seed 0), task 0, turn" in out and "ended task 0 at turn" in out


def test_an_edited_summary_fails_and_a_full_check_writes_a_record(tmp_path, capsys):
    # a fresh 3-chain entry keeps the full replay short
    config = EvalConfig(agent="random", num_chains=3, output=str(tmp_path), env_kwargs={"max_steps_per_task": 5})
    evaluate(config)
    summary = tmp_path / f"{config.run_name}.json"
    assert main([str(summary)]) == 0
    assert "OK " in capsys.readouterr().out and verification_status(summary)["chains"] == 3
    data = json.loads(summary.read_text())
    data["tgc"] = 0.9
    summary.write_text(json.dumps(data))
    assert verification_status(summary) is None  # the record no longer matches the summary
    assert main([str(summary), "--no-record"]) == 1
    assert "summary tgc is 0.9, the log's episodes give 0." in capsys.readouterr().out


@pytest.mark.official
def test_official_entries_replay_when_the_games_are_here(capsys):
    if not (Path(os.environ.get("ALFWORLD_DATA", "/nonexistent")) / "json_2.1.1").is_dir():
        pytest.skip("official ALFWorld games not found (set $ALFWORLD_DATA or provide ../shared/alfworld)")
    assert main([str(RESULTS / f"{RANDOM_OFFICIAL}.json"), "--chains", "2"]) == 0, capsys.readouterr().out


def test_official_entries_are_not_checked_without_their_games(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    assert main([str(RESULTS / f"{RANDOM_OFFICIAL}.json"), "--chains", "1"]) == 2
    out = capsys.readouterr().out
    assert out.startswith(f"NOT CHECKED {RANDOM_OFFICIAL}.json: the entry's official games") and "ALFWORLD_DATA" in out


def test_a_missing_starting_skill_library_is_not_checked(tmp_path, capsys):
    summary = _copy(tmp_path, EXPERT)
    data = json.loads(summary.read_text())
    data["agent_kwargs"] = {"skills_path": str(tmp_path / "absent")}
    summary.write_text(json.dumps(data))
    assert main([str(summary), "--chains", "1"]) == 2
    assert "--skills-path" in capsys.readouterr().out


def test_fields_a_log_predates_are_named_not_checked(tmp_path, capsys):
    summary = _copy(tmp_path, EXPERT)
    for chain in (0, 1):
        _edit(summary, chain, lambda r: r.pop("skill_calls"))
    assert main([str(summary), "--chains", "2"]) == 0
    assert "not in the log, so not checked: skill_calls (first 2 chains" in capsys.readouterr().out


def test_an_edited_task_score_of_a_scored_domain_fails(tmp_path, capsys):
    gym.register(RISKY_ID, entry_point=RiskyToyChainEnv)
    try:
        config = EvalConfig(agent="random", env=RISKY_ID, split="dev", num_chains=3, output=str(tmp_path),
                            env_kwargs={"max_steps_per_task": 5})  # fmt: skip
        evaluate(config)
        summary = tmp_path / f"{config.run_name}.json"
        assert main([str(summary)]) == 0 and "progress" in json.loads(summary.read_text())
        record = json.loads(summary.with_name(f"{config.run_name}.episodes.jsonl").read_text().splitlines()[1])
        assert record["task_score"][0] in (0.0, 50.0, 100.0)
        _edit(summary, record["chain"], lambda r: r["task_score"].__setitem__(0, 100.0 - r["task_score"][0] + 1))
        assert main([str(summary)]) == 1
        out = capsys.readouterr().out.strip()
        assert f"chain {record['chain']} (seed 0), task 0, turn " in out and "task_score is" in out
    finally:
        del gym.registry[RISKY_ID]
