"""The example scripts: token recounts by kind (token_breakdown), the expert three ways (token_ceiling), and the
comparison over whole-pipeline demo seeds (demo_seeds)."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from sage_agents.demo import deltas

EXAMPLES = Path(__file__).parents[2] / "examples"


def load(name):
    sys.path.insert(0, str(EXAMPLES))  # token_ceiling imports token_breakdown as a sibling script
    try:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(EXAMPLES))


class WordTokenizer:
    """One token per whitespace word, so the expected counts are easy to read."""

    def __call__(self, text, add_special_tokens=False):
        return type("Encoding", (), {"input_ids": text.split()})()


def test_breakdown_splits_definitions_calls_and_commands(tmp_path):
    definition = "skill fetch(x):\n    go to {x}\n    take {x}"
    record = {"actions": [[definition + "\ncall fetch(apple 1)", "look"], ["call fetch(pear 2)"]], "tokens": [20, 4]}
    log = tmp_path / "episodes.jsonl"
    log.write_text(json.dumps(record) + "\n")
    got = load("token_breakdown").breakdown(str(log), WordTokenizer())
    # definition+call: 10 words + EOS, all counted as a definition; "look" 1 + EOS; the call 3 + EOS.
    assert got == pytest.approx({"recorded": 12.0, "definitions": 5.5, "calls": 2.0, "commands": 1.0,
                                 "recounted": 8.5, "tasks": 2})  # fmt: skip


def test_token_ceiling_prints_the_expert_three_ways(tiny, tmp_path, monkeypatch, capsys):
    model, tokenizer = tiny
    tokenizer.save_pretrained(tmp_path / "model")
    module = load("token_ceiling")
    monkeypatch.setattr(sys, "argv", ["token_ceiling", "--model-path", str(tmp_path / "model"), "--num-chains", "3"])
    module.main()
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "---" not in line]
    plain, defines, banked = (row.split(" | ") for row in rows[1:])
    assert rows[0].startswith("| expert |") and float(plain[5]) == 0.0 == float(banked[5]) < float(defines[5])
    assert float(defines[4]) > float(plain[4])  # writing skills out costs tokens even at perfect play


def test_demo_seeds_prints_each_run_and_the_spread_over_runs(tmp_path, capsys, monkeypatch):
    def summary(agent, sgc, steps, tokens):
        return {"agent": agent, "tgc": sgc, "sgc": sgc, "mean_steps": steps, "mean_tokens": tokens,
                "env": "SageChain-ALFWorld-v0", "split": "valid_unseen", "config_hash": f"hash-{agent}"}  # fmt: skip

    def episode(agent, chain, steps, success, config_hash=None):
        return {"seed": 0, "chain": chain, "steps": steps, "success": success, "tokens": [5 * n for n in steps],
                "config_hash": config_hash or f"hash-{agent}"}  # fmt: skip

    runs = []
    for seed, (gain, sage_steps) in enumerate([(0.10, 15.0), (0.20, 10.0)]):
        grpo, sage = summary("grpo", 0.3, 20.0, 100.0), summary("sage", 0.3 + gain, sage_steps, 150.0)
        result = {"config": {"seed": seed, "arms": ["grpo", "sage"]}, "summaries": [summary("random", 0, 30, 9),
                  grpo, sage], "comparison": deltas(sage, grpo)}  # fmt: skip
        run = tmp_path / f"run{seed}"
        (run / "results").mkdir(parents=True)
        (run / "results.json").write_text(json.dumps(result))
        logs = {
            # Completed tasks of 10 and 12 turns; chain 0 is logged twice (a resumed run: the later record counts),
            # and an episode of another configuration in the same file is not read.
            "grpo": [episode("grpo", 0, [5, 30], [True, False]), episode("grpo", 0, [10, 30], [True, False]),
                     episode("grpo", 1, [12, 30], [True, False]), episode("grpo", 2, [1, 1], [True, True], "old")],
            "sage": [episode("sage", 0, [6, 8], [True, True])],
        }  # fmt: skip
        for agent, records in logs.items():
            path = run / "results" / f"{agent}__SageChain-ALFWorld-v0__valid_unseen__default.episodes.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in records))
        runs.append(str(run))
    monkeypatch.setattr(sys, "argv", ["demo_seeds.py", *runs])
    load("demo_seeds").main()
    out = capsys.readouterr().out
    assert "random" not in out and out.count("| sage |") == 2
    assert f"| {runs[0]} | 0 | grpo | 30.0 | 30.0 | 20.0 | 11.0 | 100.0 |" in out
    assert f"| {runs[1]} | 1 | sage | 50.0 | 50.0 | 10.0 | 7.0 | 150.0 |" in out
    # Each run's paired interval is that of the chains both logs hold: chain 0 only, where SAGE completed both tasks
    # (14 turns) and GRPO one (40 turns), so every resample gives +100 points and a 65% cut.
    assert f"{runs[0]}: SAGE vs GRPO: SGC +10.0 points [+100.0, +100.0] (goal +5), steps -25.0% [-65.0, -65.0]" in out
    # SGC gains 10 and 20 points (mean 15, sd 7.07); steps cut 25% and 50% (mean 37.5%, sd 17.7%).
    assert "mean +- sd over 2 runs: SGC +15.0 +- 7.1, steps +37.5% +- 17.7%, tokens -50.0% +- 0.0%" in out
