"""leaderboard.render: tables grouped by split and protocol, sorted, deterministic; plots written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from leaderboard.render import LEGEND, main, render_markdown

LEADERBOARD = Path(__file__).parents[2] / "leaderboard"


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
    assert "| 50.0 | [45.0, 55.0] | - | 20.0 |" in unseen_30  # no progress: ALFWorld scores no task
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


def _rows(text):
    """Table rows by agent (first table of ``text``), as lists of cells."""
    table = text.split("Success per task type")[0]
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in table.splitlines() if line.startswith("| ")]
    return {row[0]: dict(zip(rows[0], row, strict=True)) for row in rows[1:]}


def test_new_summary_keys_are_rendered_and_their_absence_is_tolerated():
    new = _summary("sage", 0.5, 0.3) | {
        "model": "runs/demo/sage/checkpoints/step_0000006/model", "model_name": "tiny-3-layer-sft+sage",
        "given": "constrained decoding | 4 skill-definition templates", "agent_errors": 2,
        "chain_length_mix": {"2": 41, "1": 58, "10": 1}, "sgc_full_length": 0.25, "progress": 0.625,
    }  # fmt: skip
    new["env_kwargs"] = new["env_kwargs"] | {"skills": "program"}
    new["ci95"] = new["ci95"] | {"sgc_full_length": [0.125, 0.375]}
    old = _summary("random", 0.0, 0.0)
    rows = _rows(render_markdown([new, old]))
    assert rows["sage"]["model"] == "tiny-3-layer-sft+sage"  # a model's name, not its local runs/ path
    assert rows["sage"]["given"] == "constrained decoding \\| 4 skill-definition templates"  # a pipe stays in its cell
    assert rows["sage"]["skills"] == "program" and rows["sage"]["errors"] == "2"
    assert rows["sage"]["chains"] == "100 (1:58 2:41 10:1)"  # by number of tasks, not as strings
    assert rows["sage"]["SGC full"] == "25.0" and rows["sage"]["SGC full 95% CI"] == "[12.5, 37.5]"
    assert rows["random"]["model"] == "random" and rows["random"]["chains"] == "100"
    assert rows["sage"]["progress"] == "62.5"
    assert [rows["random"][k] for k in ("given", "errors", "SGC full", "SGC full 95% CI", "progress")] == ["-"] * 5
    assert rows["random"]["skills"] == "env default"


def test_every_column_has_a_legend_entry():
    text = render_markdown([_summary("a", 0.2, 0.1)])
    header = next(line for line in text.splitlines() if line.startswith("| agent | model"))
    legend = {name for name, _ in LEGEND}
    for column in header.strip("|").split(" | "):
        column = column.strip()
        assert column in legend or (column.endswith("95% CI") and "95% CI" in legend), column
        assert f"- **{column if column in legend else '95% CI'}**: " in text


def test_protocol_paragraph_comes_from_the_summaries():
    one = _summary("a", 0.2, 0.1, split="valid_seen", turns=17) | {"seeds": [3, 4], "n_chains": 12}
    one["env_kwargs"] = one["env_kwargs"] | {"chain_length": 3, "library_scope": "persistent"}
    one["chain_length_mix"] = {"3": 10, "1": 2}
    text = render_markdown([one])
    paragraph = next(line for line in text.splitlines() if line.startswith("Protocol: "))
    assert "the first 12 chains of `valid_seen` (generated games" in paragraph and "(seeds 3,4)" in paragraph
    assert "up to 3 tasks (chains per number of tasks: 1:2 3:10)" in paragraph
    assert "after 17 agent turns." in paragraph and "empty skill library" not in paragraph  # persistent library
    assert "Other env settings: `library_scope=persistent`." in paragraph
    # entries that differ in seeds point to the column instead of stating one value
    two = render_markdown([one, one | {"agent": "b", "seeds": [0]}])
    assert "(seeds as in the `seeds` column)" in two


def test_committed_leaderboard_is_the_rendering_of_the_committed_results(tmp_path):
    """LEADERBOARD.md is generated: re-rendering the committed results gives it byte for byte (no timestamps)."""
    shutil.copytree(LEADERBOARD / "results", tmp_path / "results", ignore=shutil.ignore_patterns("*.jsonl"))
    main(["--results", str(tmp_path / "results"), "--output", str(tmp_path / "out"), "--no-plots"])
    assert (tmp_path / "out" / "LEADERBOARD.md").read_bytes() == (LEADERBOARD / "LEADERBOARD.md").read_bytes()
    assert not (tmp_path / "out" / "plots").exists()
