"""leaderboard.render: tables grouped by split and protocol, sorted, deterministic; plots written."""

from __future__ import annotations

import json

from leaderboard.render import main, render_markdown


def _summary(agent, tgc, sgc, split="valid_unseen", turns=30):
    return {
        "agent": agent, "model": agent, "env": "SageChain-ALFWorld-v0", "split": split, "source": "generated",
        "n_chains": 100, "n_tasks": 200, "tgc": tgc, "sgc": sgc, "mean_steps": 10.0, "mean_primitive_steps": 12.0,
        "mean_tokens": 50.0, "skill_reuse_rate": 0.0, "skills_created": 0.0,
        "per_task_type": {"pick_and_place_simple": tgc}, "ci95": {"tgc": [tgc - 0.05, tgc + 0.05],
        "sgc": [sgc, sgc]}, "seeds": [0], "commit": "0123456789abcdef",
        "env_kwargs": {"chain_length": 2, "max_steps_per_task": turns, "split": split},
    }  # fmt: skip


def test_tables_are_grouped_by_split_and_protocol_and_sorted_best_first():
    text = render_markdown([
        _summary("low", 0.10, 0.00), _summary("high", 0.50, 0.20), _summary("mid-sgc", 0.40, 0.30),
        _summary("longer-budget", 0.90, 0.90, turns=50), _summary("seen", 0.3, 0.1, split="valid_seen"),
    ])  # fmt: skip
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## SageChain-ALFWorld-v0 / valid_seen / generated (2-task chains, 30 turns per task)",
        "## SageChain-ALFWorld-v0 / valid_unseen / generated (2-task chains, 30 turns per task)",
        "## SageChain-ALFWorld-v0 / valid_unseen / generated (2-task chains, 50 turns per task)",
    ]
    unseen_30 = text.split(headings[1])[1].split("## ")[0]
    rows = [line.split(" | ")[0].strip("| ") for line in unseen_30.splitlines() if line.startswith("| ")]
    assert rows[1:4] == ["mid-sgc", "high", "low"]  # after the header: SGC first, then TGC
    assert "| 50.0 | [45.0, 55.0] | 20.0 |" in unseen_30
    assert "longer-budget" not in unseen_30


def test_main_is_deterministic_and_writes_plots(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    for s in (_summary("a", 0.2, 0.1), _summary("b", 0.6, 0.4)):
        (results / f"{s['agent']}.json").write_text(json.dumps(s))
    (results / "a.episodes.jsonl").write_text("not a summary\n")  # episode logs are skipped
    main(["--results", str(results), "--output", str(tmp_path / "out")])
    first = (tmp_path / "out" / "LEADERBOARD.md").read_bytes()
    main(["--results", str(results), "--output", str(tmp_path / "out")])
    assert (tmp_path / "out" / "LEADERBOARD.md").read_bytes() == first
    assert len(list((tmp_path / "out" / "plots").glob("*.png"))) == 2


def test_tokens_counted_as_words_are_marked():
    counted, scripted = _summary("llm", 0.5, 0.2), _summary("expert", 0.9, 0.8) | {"token_unit": "words"}
    table = render_markdown([counted, scripted]).split("Success per task type")[0]
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith("| ")}
    assert "| 50.0 w |" in rows["expert"] and "| 50.0 |" in rows["llm"]
