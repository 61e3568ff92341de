"""The main job's pipeline (sage_agents/demo.py): the --quick smoke run end to end, resume, the comparison."""

import json

import pytest

from sage_agents.demo import DemoConfig, comparison, run_demo

LABELS = ["random", "expert", "sft", "grpo", "sage"]


def test_comparison_is_points_and_relative_cuts():
    grpo = {"agent": "grpo", "sgc": 0.40, "mean_steps": 10.0, "mean_tokens": 50.0}
    sage = {"agent": "sage", "sgc": 0.47, "mean_steps": 7.0, "mean_tokens": 20.0}
    got = comparison([grpo, sage])
    assert got == pytest.approx({"sgc_gain_points": 7.0, "steps_cut": 0.3, "tokens_cut": 0.6})


def test_quick_demo_runs_every_stage_and_a_rerun_resumes(tmp_path):
    out = tmp_path / "demo"
    result = run_demo(DemoConfig(quick=True, output_dir=str(out)))
    assert [s["agent"] for s in result["summaries"]] == LABELS
    assert all(s["n_chains"] == 3 and s["split"] == "valid_unseen" for s in result["summaries"])
    by = {s["agent"]: s for s in result["summaries"]}
    assert by["expert"]["tgc"] > by["random"]["tgc"]  # the scripted upper bound beats chance even on 3 chains
    assert by["sage"]["env_kwargs"]["skills"] == "program" and by["grpo"]["env_kwargs"]["skills"] == "none"
    for name in ("results.json", "RESULTS.md", "learning_curves.png", "success_vs_tokens.png"):
        assert (out / name).stat().st_size > 0
    for arm in ("grpo", "sage"):
        steps = [json.loads(line)["charts/step"] for line in (out / arm / "metrics.jsonl").read_text().splitlines()]
        assert steps == [1.0, 2.0]
    pairs = (out / "expert" / "pairs.jsonl").stat().st_mtime
    again = run_demo(DemoConfig(quick=True, output_dir=str(out)))  # every stage is found finished
    assert (out / "expert" / "pairs.jsonl").stat().st_mtime == pairs
    assert [s["tgc"] for s in again["summaries"]] == [s["tgc"] for s in result["summaries"]]
