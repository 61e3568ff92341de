"""Every example script runs here, on a few chains or at toy size, and its printed output is checked (SPEC section 1:
one example per public feature; the examples use every layer, sage_envs to sage_app, so this file sits above them).
The statistics of reskill_within_step.py have their own tests (tests/sage_agents/test_reskill_within_step.py)."""

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from sage_app.demo import DemoConfig

EXAMPLES = Path(__file__).parents[1] / "examples"
NUMBER = r"[+-]?\d+(?:\.\d+)?"
INTERVAL = re.compile(rf"({NUMBER})%?(?: points)?(?: \|)? \[({NUMBER}), ({NUMBER})\]")
"""A point estimate and the interval printed right after it: ``-31.9% [-38.8, -25.1]``, ``| 73.5 | [67.0, 79.5]``."""


def assert_intervals_hold(text):
    """Every interval printed in ``text`` holds the point estimate printed before it (and is low to high)."""
    found = INTERVAL.findall(text)
    for point, low, high in found:
        assert float(low) <= float(point) <= float(high), f"{point} outside its interval [{low}, {high}]"
    return len(found)


@pytest.fixture(scope="module")
def tiny():
    """A tiny (model, tokenizer) pair built once (offline: the tokenizer is built from local texts)."""
    from sage_agents.models import build_tiny_model

    model, tokenizer = build_tiny_model(hidden=32, layers=2, heads=2, kv_heads=1, seed=0)
    model.eval()
    return model, tokenizer


def load(name):
    sys.path.insert(0, str(EXAMPLES))  # token_ceiling imports token_breakdown as a sibling script
    try:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(EXAMPLES))


def run_main(name, argv, monkeypatch, capsys):
    """Run ``examples/<name>.py`` as ``python examples/<name>.py ARGV`` would (its folder on ``sys.path``)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *argv])
    load(name).main()
    return capsys.readouterr().out


def sft_as_rl_runs(demo, folder, *names):
    """``folder/NAME`` per name: an "RL run" whose newest checkpoint (``step_0000002``) is ``demo``'s SFT model."""
    import shutil

    checkpoints = {}
    for name in names:
        checkpoints[name] = folder / name / "checkpoints" / "step_0000002"
        shutil.copytree(demo / "sft" / "model", checkpoints[name] / "model")
        (checkpoints[name].parent / "latest").write_text(checkpoints[name].name)
    return checkpoints


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
    out = run_main("token_ceiling", ["--model-path", str(tmp_path / "model"), "--num-chains", "3"], monkeypatch, capsys)
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    plain, defines, banked = (row.split(" | ") for row in rows[1:])
    assert rows[0].startswith("| expert |") and float(plain[5]) == 0.0 == float(banked[5]) < float(defines[5])
    assert float(defines[4]) > float(plain[4])  # writing skills out costs tokens even at perfect play


def test_demo_seeds_prints_each_run_and_the_spread_over_runs(tmp_path, capsys, monkeypatch):
    def episode(chain, steps, success, config_hash="hash"):
        return {"seed": 0, "chain": chain, "steps": steps, "success": success, "tokens": [5 * n for n in steps],
                "config_hash": config_hash}  # fmt: skip

    def summary(agent, records):
        """What the evaluator would summarise from ``records`` (the later record of a chain counts)."""
        records = list({r["chain"]: r for r in records if r["config_hash"] == "hash"}.values())
        tasks = sum(len(r["success"]) for r in records)
        return {"agent": agent, "env": "SageChain-ALFWorld-v0", "split": "valid_unseen", "config_hash": "hash",
                "tgc": sum(map(sum, (r["success"] for r in records))) / tasks,
                "sgc": sum(all(r["success"]) for r in records) / len(records),
                "mean_steps": sum(map(sum, (r["steps"] for r in records))) / tasks,
                "mean_tokens": sum(map(sum, (r["tokens"] for r in records))) / tasks}  # fmt: skip

    # GRPO completes the first task of each chain in 10 and 12 turns; chain 0 is logged twice (a resumed run: the
    # later record counts), and an episode of another configuration in the same file is not read.
    grpo = [episode(0, [5, 30], [True, False]), episode(0, [10, 30], [True, False]),
            episode(1, [12, 30], [True, False]), episode(2, [1, 1], [True, True], "old")]  # fmt: skip
    sage_runs = [
        [episode(0, [6, 8], [True, True]), episode(1, [7, 30], [True, False])],  # SGC 50, 12.75 steps
        [episode(0, [6, 8], [True, True]), episode(1, [7, 9], [True, True])],
    ]  # SGC 100, 7.5 steps
    goal = {"name": "SAGE vs its SFT start: TGC", "goal": ">= +10 points", "source": "issue 20 item 3",
            "unit": " points", "ci95": [4.5, 19.5], "value": 12.0, "met": True, "status": "met"}  # fmt: skip
    goals = [[goal], [{**goal, "value": 3.0, "ci95": [-1.0, 7.0], "met": False, "status": "not met"}]]
    goals[0].append({**goal, "name": "ReSkill vs GRPO: TGC", "value": None, "ci95": None, "met": None,
                     "status": "not measured (arm not run)"})  # fmt: skip
    runs = []
    for seed, sage in enumerate(sage_runs):
        result = {"config": {"seed": seed, "arms": ["grpo", "sage"]}, "goals": goals[seed],
                  "summaries": [summary("random", grpo) | {"agent": "random"}, summary("grpo", grpo),
                                summary("sage", sage)]}  # fmt: skip
        run = tmp_path / f"run{seed}"
        (run / "results").mkdir(parents=True)
        (run / "results.json").write_text(json.dumps(result))
        for agent, records in {"grpo": grpo, "sage": sage}.items():
            path = run / "results" / f"{agent}__SageChain-ALFWorld-v0__valid_unseen__default.episodes.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in records))
        runs.append(str(run))
    out = run_main("demo_seeds", runs, monkeypatch, capsys)
    assert "random" not in out and out.count("| sage |") == 2
    assert f"| {runs[0]} | 0 | grpo | 50.0 | 0.0 | 20.5 | 11.0 | 102.5 |" in out
    assert f"| {runs[1]} | 1 | sage | 100.0 | 100.0 | 7.5 | 7.5 | 37.5 |" in out
    # SAGE gains 50 points and takes 37.8% fewer steps in run 0: minus means fewer, in the interval too. Paired
    # resamples of the two chains: both chain 0 (14 vs 40 turns, -65.0%), both chain 1 (37 vs 42, -11.9%).
    assert (f"{runs[0]}: SAGE vs GRPO: SGC +50.0 points [+0.0, +100.0], steps -37.8% [-65.0, -11.9], "
            "generated tokens -37.8% [-65.0, -11.9]") in out  # fmt: skip
    # SGC gains 50 and 100 points (mean 75, sd 35.4); steps cut 37.8% and 63.4% (mean 50.6%, sd 18.1%).
    assert "mean +- sd over 2 runs: SGC +75.0 +- 35.4 points, steps -50.6% +- 18.1%, tokens -50.6% +- 18.1%" in out
    assert assert_intervals_hold(out) == 8  # three per run, and the goal's in each run
    assert (
        f"- SAGE vs its SFT start: TGC (goal >= +10 points; issue 20 item 3): met in 1 of 2 runs\n"
        f"    {runs[0]}: +12.0 points [+4.5, +19.5]: met\n    {runs[1]}: +3.0 points [-1.0, +7.0]: not met\n"
    ) in out
    assert (f"- ReSkill vs GRPO: TGC (goal >= +10 points; issue 20 item 3): met in 0 of 2 runs\n"
            f"    {runs[0]}: not measured (arm not run)\n    {runs[1]}: not in its report\n") in out  # fmt: skip


def test_the_interval_check_reads_every_printed_form_and_catches_an_interval_that_misses():
    ok = "SGC +30.0 points [+21.0, +40.0], steps -31.9% [-38.8, -25.1], | 73.5 | [67.0, 79.5] |"
    assert assert_intervals_hold(ok) == 3
    with pytest.raises(AssertionError, match="outside its interval"):
        assert_intervals_hold("SGC +10.0 points [+100.0, +100.0]")  # what demo_seeds printed for a partial log


def test_play_expert_plays_chains_defining_and_reusing_skills(monkeypatch, capsys):
    out = run_main("play_expert", ["--chains", "2", "--split", "valid_seen"], monkeypatch, capsys)
    assert "=== chain 0 | task 1: " in out and "> skill " in out and "> call " in out  # defines, then calls
    summary = out.split("=== summary")[1]
    assert "chains=2 tasks=4 TGC=1.00 SGC=1.00" in summary
    assert int(re.search(r"skill reuses: (\d+)", summary).group(1)) > 0


def test_evaluate_agent_evaluates_a_registered_agent_and_reads_its_files(tmp_path, monkeypatch, capsys):
    argv = ["--agent", "expert", "--num-chains", "2", "--output", str(tmp_path)]
    out = run_main("evaluate_agent", argv, monkeypatch, capsys)
    summary = json.loads(next(tmp_path.glob("expert__*.json")).read_text())
    assert summary["n_chains"] == 2 and summary["tgc"] == 1.0
    assert "expert on 2 chains (4 tasks) of SageChain-ALFWorld-v0 valid_seen, skills=program:" in out
    # 4 of 4 tasks and 2 of 2 chains: no resample differs, so the intervals are Wilson's, not [100, 100]
    assert "TGC 100.0% [51.0, 100.0], SGC 100.0% [34.2, 100.0]" in out
    assert f"{summary['mean_tokens']:.1f} words per task" in out  # the scripted expert's words, said so
    assert assert_intervals_hold(out) == 2


def test_plugin_agent_is_registered_in_process_and_evaluated(tmp_path, monkeypatch, capsys):
    from importlib.metadata import entry_points

    out = run_main("plugin_agent", ["--num-chains", "2", "--output", str(tmp_path)], monkeypatch, capsys)
    assert "keyword" in out.split("registered agents: ")[1].splitlines()[0].split(", ")
    assert "make_agent('keyword') -> KeywordAgent (keyword-overlap-v1)" in out
    summary = json.loads(next(tmp_path.glob("keyword__*.json")).read_text())
    assert summary["agent"] == "keyword" and summary["model"] == "keyword-overlap-v1" and summary["n_chains"] == 2
    assert f"keyword on 2 chains ({summary['n_tasks']} tasks) of valid_seen: TGC {100 * summary['tgc']:.1f}%" in out
    # the registration is package metadata on sys.path: gone with it, so no other test sees the agent
    monkeypatch.undo()
    assert "keyword" not in {ep.name for ep in entry_points(group="sage_agents.agents")}


def test_expert_agreement_counts_the_turns_a_policy_agrees_with_the_expert(tiny, tmp_path, monkeypatch, capsys):
    model, tokenizer = tiny
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    out = run_main("expert_agreement", [str(tmp_path / "model"), "--chains", "0", "1"], monkeypatch, capsys)
    last = out.strip().splitlines()[-1]
    agree, turns, share = re.fullmatch(
        r"agreement (\d+)/(\d+) = (\d\.\d\d) \(none skills, chains \[0, 1\]\)", last
    ).groups()
    assert 0 <= int(agree) <= int(turns) and int(turns) > 0 and float(share) == round(int(agree) / int(turns), 2)
    cfg = DemoConfig(untried_commands="go to ")
    cfg.save(tmp_path / "demo_config.json")
    args = [str(tmp_path / "model"), "--chains", "0", "1", "--by-verb", "--config", str(tmp_path / "demo_config.json")]
    rows = run_main("expert_agreement", args, monkeypatch, capsys).strip().splitlines()
    start = next(i for i, row in enumerate(rows) if row.startswith("agreement "))
    head = re.fullmatch(r"agreement (\d+)/(\d+) = .*", rows[start]).groups()
    verb_row = r"  (\w+): (\d+)/(\d+) = \d\.\d\d; of the (\d+) others, (\d+) repeat an action already sent in the task"
    verbs = [[int(n) if n.isdigit() else n for n in re.fullmatch(verb_row, row).groups()] for row in rows[start + 1 :]]
    assert {"go", "take"} <= {verb for verb, *_ in verbs}  # the expert's chain goes and takes
    assert sum(total for _, _, total, _, _ in verbs) == int(head[1]) and sum(a for _, a, *_ in verbs) == int(head[0])
    assert all(others == total - agreed and 0 <= repeats <= others for _, agreed, total, others, repeats in verbs)


def test_option_mass_reads_a_summarys_agent_and_measures_each_turn(tiny, tmp_path, monkeypatch, capsys):
    model, tokenizer = tiny
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    summary = {
        "agent": "policy", "env": "SageChain-ALFWorld-v0", "split": "valid_unseen",
        "agent_kwargs": {"model_path": str(tmp_path / "model"), "constrained": True},
        "env_kwargs": {"split": "valid_unseen", "chain_length": 2, "max_steps_per_task": 3, "skills": "none"},
    }  # fmt: skip
    (tmp_path / "entry.json").write_text(json.dumps(summary))
    out = run_main("option_mass", [str(tmp_path / "entry.json"), "--chains", "2"], monkeypatch, capsys)
    turns = int(re.search(r"2 chains, (\d+) turns", out).group(1))
    mean, median = map(float, re.search(rf"first tokens: mean ({NUMBER}), median ({NUMBER})", out).groups())
    eos = float(re.search(rf"EOS after the action taken: mean ({NUMBER})", out).group(1))
    taken = [int(n) for n in re.findall(r"(?:definition|call|command) (\d+)", out)]
    assert 0 < turns <= 2 * 2 * 3 and sum(taken) == turns == taken[-1]  # skills="none": commands only
    assert 0 < mean <= 1 and 0 < median <= 1 and 0 <= eos <= 1


def test_every_example_runs_in_this_file():
    source = Path(__file__).read_text()
    untested = [p.name for p in EXAMPLES.glob("*.py") if f'run_main("{p.stem}"' not in source]
    assert not untested, f"examples not run by a test here: {untested}"


def test_define_skill_defines_reuses_saves_and_loads_skills(monkeypatch, capsys):
    out = run_main("define_skill", [], monkeypatch, capsys)
    first, loaded = out.split("=== saved: ")
    # task 1: find_and_take is stored on its own, put_in with its call, which wins the task through both
    assert "created=['find_and_take'] used=[] reused=[]" in first
    assert re.search(r"won=True created=\['put_in'\] used=\['put_in', 'find_and_take'\] reused=\[\]", first)
    # task 2 calls put_in again: a reuse of both skills, and the chain is won
    assert re.search(r"won=True created=\[\] used=\['put_in', 'find_and_take'\] reused=\['put_in', 'find_and_take'\]",
                     first)  # fmt: skip
    assert re.search(r"chain \d+: successes \[True, True\], library", first)
    assert loaded.startswith("['find-and-take', 'put-in']") and "```sage\nskill put_in(obj, place):" in loaded
    # the next chain starts from the loaded folders: its calls use the skills, none is created or reused
    assert loaded.count("created=[] used=['put_in', 'find_and_take'] reused=[]") == 2
    assert re.search(r"chain \d+: successes \[True, True\]\n\Z", loaded)


@pytest.mark.parametrize("algo", ["grpo", "sage", "reskill"])
def test_train_runs_each_algorithm_and_prints_each_step(algo, tmp_path, monkeypatch, capsys):
    out = run_main("train", ["--algo", algo, "--output", str(tmp_path)], monkeypatch, capsys)
    steps = re.findall(r"^step (\d+): (.*)$", out, re.MULTILINE)
    assert [int(step) for step, _ in steps] == [1, 2]
    for _, metrics in steps:
        values = dict(metric.rsplit(" ", 1) for metric in metrics.split(", "))  # "TGC 0.5, grad norm 0.012"
        assert 0 <= float(values["TGC"]) <= 1 and 0 <= float(values["SGC"]) <= 1
        assert 1 <= float(values["turns/task"]) <= 3  # --max-turns 3
        assert float(values["grad norm"]) >= 0 and ("library version" in values) == (algo == "reskill")
        if float(values["|advantage|"]) == 0:  # every rollout of the group scored alike: nothing to learn
            assert float(values["loss"]) == 0 == float(values["grad norm"])
        if algo == "grpo":
            assert float(values["skills created/chain"]) == 0  # GRPO plays plain commands
    assert (tmp_path / "checkpoints" / "step_0000002" / "model").is_dir()


@pytest.fixture(scope="module")
def toy_demo(tiny, tmp_path_factory):
    """What learning_curve.py and sft_loss_ablation.py read from a finished ``make demo``, at toy size: its
    ``demo_config.json``, the expert's SFT pairs of two chains and an (untrained) tiny model as ``sft/model``."""
    import dataclasses

    from sage_app.demo import DemoConfig, expert_pairs

    out = tmp_path_factory.mktemp("demo")
    cfg = DemoConfig(output_dir=str(out), seed=3, expert_chains=2, tiny_hidden=32, tiny_layers=2, group_size=2,
                     sft_bf16=False)  # fmt: skip
    expert_pairs(cfg, out)  # the expert's completed tasks (it needs ~11 turns a task without skills)
    # RL and evaluation then play 3 turns a task: a few seconds a step
    (out / "demo_config.json").write_text(json.dumps(dataclasses.asdict(cfg) | {"max_steps_per_task": 3}))
    model, tokenizer = tiny
    model.save_pretrained(out / "sft" / "model")
    tokenizer.save_pretrained(out / "sft" / "model")
    return out


def test_learning_curve_trains_a_demo_arm_and_evaluates_it_every_step(toy_demo, tmp_path, monkeypatch, capsys):
    argv = [str(toy_demo), "--arm", "grpo", "--steps", "1", "--eval-every", "1", "--eval-chains", "2",
            "--output", str(tmp_path), "--set", "temperature=0.6", "--set", "lr=3e-5"]  # fmt: skip
    out = run_main("learning_curve", argv, monkeypatch, capsys)
    curve = re.fullmatch(r"eval task success by step: \{0: (\S+), 1: (\S+)\}", out.strip().splitlines()[-1])
    assert curve and all(0 <= float(v) <= 1 for v in curve.groups())
    assert (tmp_path / "learning_curve.png").stat().st_size > 0
    checkpoint = tmp_path / "checkpoints" / (tmp_path / "checkpoints" / "latest").read_text().strip()
    trained = json.loads((checkpoint / "trainer_state.json").read_text())["config"]
    assert (trained["temperature"], trained["lr"]) == (0.6, 3e-5)  # the --set overrides reached the run
    assert trained["seed"] == 3  # the demo's seed, as its arm ran


def test_sft_loss_ablation_trains_both_losses_and_measures_them(toy_demo, monkeypatch, capsys):
    pairs = str(toy_demo / "expert" / "pairs.jsonl")
    argv = [pairs, "--config", str(toy_demo / "demo_config.json"), "--steps", "2", "--chains", "1", "--held", "5"]
    out = run_main("sft_loss_ablation", argv, monkeypatch, capsys)
    rows = re.findall(rf"^ *(action only|whole text): right number ({NUMBER}), expert agreement ({NUMBER})$", out,
                      re.MULTILINE)  # fmt: skip
    assert [loss for loss, _, _ in rows] == ["action only", "whole text"]
    assert all(0 <= float(right) <= 1 and 0 <= float(agree) <= 1 for _, right, agree in rows)


def test_token_breakdown_prints_the_recount_of_a_log(tiny, tmp_path, monkeypatch, capsys):
    model, tokenizer = tiny
    tokenizer.save_pretrained(tmp_path / "model")
    record = {"actions": [["go to drawer 1", "call fetch(apple 1)"]], "tokens": [9]}
    (tmp_path / "episodes.jsonl").write_text(json.dumps(record) + "\n")
    out = run_main("token_breakdown", [str(tmp_path / "episodes.jsonl"), "--model-path", str(tmp_path / "model")],
                   monkeypatch, capsys)  # fmt: skip
    got = load("token_breakdown").breakdown(str(tmp_path / "episodes.jsonl"), tokenizer)
    assert got["definitions"] == 0 and got["calls"] > 0 and got["commands"] > 0
    assert out.strip() == (f"1 tasks; tokens per task: recorded 9.0, recounted {got['recounted']:.1f} = "
                           f"definitions 0.0, calls {got['calls']:.1f}, commands {got['commands']:.1f}")  # fmt: skip


def test_reskill_within_step_reads_a_lifecycle_log(tmp_path, monkeypatch, capsys):
    # version 1 won 3 of 4 rollouts in both its test steps while the old library won 0 of 4
    tested = {"event": "tested", "version": 1, "n_new": 4, "n_old": 4, "success_new": 0.75, "success_old": 0.0}
    events = [{"event": "created", "version": 1}, tested, tested]
    (tmp_path / "lifecycle.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    out = run_main("reskill_within_step", [str(tmp_path / "lifecycle.jsonl")], monkeypatch, capsys)
    v1, total = out.strip().splitlines()
    assert v1.startswith("v1: new 6/8, old 0/8; within steps 6 successes vs 3.0 expected, P(>= 6) = ")
    assert total.startswith("all tests: new 6/8, old 0/8;")
    assert float(v1.rsplit(" ", 1)[1]) == round((1 / 14) ** 2, 3)  # 3 of 3 successes on the new arm twice by chance


def test_written_skills_counts_the_definitions_a_sage_policy_writes(toy_demo, monkeypatch, capsys):
    argv = [str(toy_demo), "--model", str(toy_demo / "sft" / "model"), "--chains", "2", "--batch", "2"]
    out = run_main("written_skills", argv, monkeypatch, capsys)
    written, chains, headers = map(int, re.search(r"(\d+) definitions written in (\d+) sampled train chains, "
                                                  r"(\d+) distinct headers", out).groups())  # fmt: skip
    new, total = map(int, re.search(r"new \(not verbatim any of the \d+ SFT definitions\): (\d+) of (\d+)",
                                    out).groups())  # fmt: skip
    assert chains == 2 and total == written and new <= written and headers <= written


def test_rule_skills_reports_where_the_rule_creators_skills_are_shown(monkeypatch, capsys):
    out = run_main("rule_skills", ["--chains", "8", "--noise", "0.1"], monkeypatch, capsys)
    episodes, wins = map(int, re.search(r"^(\d+) episodes, (\d+) successes$", out, re.MULTILINE).groups())
    summary = re.search(r"^(\d+) skills; shown on >= 1 source failure at a diagnosed turn: (\d+)/(\d+); mean "
                        r"share of source failures reached (\d+)%; mean share of turns shown (\d+)%$", out,
                        re.MULTILINE)  # fmt: skip
    skills, hit, total, reached, turns = map(int, summary.groups())
    assert episodes == 16 and 0 < wins < episodes and skills == total > 0 and hit <= skills
    assert 0 <= reached <= 100 and 0 < turns <= 100
    rows = re.findall(r"^--- .*: shown at a diagnosed turn in \d+% of \d+ source failures", out, re.MULTILINE)
    assert len(rows) == skills


def conditioning_rows(out: str) -> list[str]:
    rows = re.findall(r"^\| (\w+) \| ([\d.]+)% \| (\d+) \| ([\d.]+)% \| (\d+) \|$", out, re.M)
    for _, tgc, tasks, agreement, turns in rows:
        assert int(tasks) == 4 and int(turns) >= int(tasks) and 0 <= float(tgc) <= 100 and 0 <= float(agreement) <= 100
    return [r[0] for r in rows]


@pytest.mark.parametrize("followed", [[], ["--perturbation", "0.3", "--followed", "1"]], ids=["mix", "followed"])
def test_guidance_conditioning_trains_with_guidance_and_prints_the_four_rows(followed, tmp_path, monkeypatch, capsys):
    out = run_main("guidance_conditioning", ["--quick", *followed, "--save", str(tmp_path)], monkeypatch, capsys)
    assert (tmp_path / "config.json").exists() and (tmp_path / "tokenizer.json").exists()
    sft = re.search(r"SFT: (\d+) expert turns .*\((\d+) with relevant guidance, (\d+) irrelevant, (\d+) none\), "
                    r"(\d+) perturbed turns shown guidance naming the command sent", out)  # fmt: skip
    assert sft and int(sft[1]) == sum(int(sft[i]) for i in (2, 3, 4)) > 0
    assert (int(sft[5]) > 0) == bool(followed)
    assert conditioning_rows(out) == ["relevant", "elsewhere", "none", "irrelevant"]
    probe = re.findall(r"^\| (random command|expert's command) \| (\d+) \| ([\d.]+)% \| ([\d.]+)% \|$", out, re.M)
    assert [row[0] for row in probe] == ["random command", "expert's command"] and int(probe[1][1]) > 0


def test_guidance_conditioning_evaluates_a_saved_model(monkeypatch, capsys, tmp_path):
    from sage_agents.models import build_tiny_model

    model, tokenizer = build_tiny_model(hidden=32, layers=1)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    out = run_main("guidance_conditioning", ["--quick", "--model", str(tmp_path)], monkeypatch, capsys)
    assert f"SFT model: {tmp_path};" in out and "SFT: " not in out  # evaluated, not trained
    assert conditioning_rows(out) == ["relevant", "elsewhere", "none", "irrelevant"]
    argv = ["--quick", "--model", str(tmp_path), "--conditions", "none", "relevant", "--probe-chains", "0"]
    out = run_main("guidance_conditioning", argv, monkeypatch, capsys)
    assert conditioning_rows(out) == ["none", "relevant"] and "probe:" not in out


def test_cross_domain_guidance_reports_where_a_library_fires_and_whether_it_is_right(tmp_path, monkeypatch, capsys):
    from sage_agents.reskill.creator import next_action, skill_text, when_line
    from sage_envs.skills import Skill, SkillLibrary

    def guidance(name, trigger, pattern, text):
        return Skill(name=name, kind="guidance", trigger=trigger, pattern=pattern, text=text)

    library = SkillLibrary()
    go_first = skill_text(when_line("beginning"), next_action("go to", "go to desk 1"))  # an ALFWorld expert does
    library.add(guidance("go_first", "beginning", "", go_first))
    library.add(guidance("never", "action_pattern", r"^zzz\b", skill_text("Never.", next_action("open", ""))))
    library.add(guidance("odd_words", "general", "", "Try the flibbertigibbet."))
    library.save(tmp_path / "library")
    argv = [str(tmp_path / "library"), "--target", "SageChain-ALFWorld-v0=valid_unseen", "--chains", "2"]
    out = run_main("cross_domain_guidance", argv, monkeypatch, capsys)
    rows = dict(re.findall(r"^\| (\w+) \| SageChain-ALFWorld-v0 valid_unseen \| (.*) \|$", out, re.M))
    assert rows.keys() == {"go_first", "never", "odd_words"}
    # shown on each task's first turn, where the expert goes somewhere: right there every time, not always elsewhere
    shown, per_task, right_shown, right_anywhere, follow, unknown = rows["go_first"].split(" | ")
    assert (shown, per_task, right_shown, follow, unknown) == ("100%", "1.0", "100%", "100%", "none")
    assert int(right_anywhere.rstrip("%")) < 100
    assert rows["never"].split(" | ")[:3] == ["0%", "0.0", "-"]
    odd = rows["odd_words"].split(" | ")  # shown on every turn; names no verb, so nothing to be right about
    assert odd[0] == "100%" and float(odd[1]) > 1 and odd[2:5] == ["-", "-", "-"] and "flibbertigibbet" in odd[5]
    assert "<!-- SageChain-ALFWorld-v0 valid_unseen: 4 tasks," in out


def test_library_ablation_evaluates_each_skill_alone_and_left_out(toy_demo, tmp_path, monkeypatch, capsys):
    import shutil

    demo = tmp_path / "demo"  # the toy demo with a ReSkill arm whose last checkpoint accepted three skills
    shutil.copytree(toy_demo / "sft" / "model", demo / "sft" / "model")
    shutil.copy(toy_demo / "demo_config.json", demo / "demo_config.json")
    checkpoint = demo / "reskill" / "checkpoints" / "step_0000002"
    shutil.copytree(toy_demo / "sft" / "model", checkpoint / "model")
    accepted = sorted((Path(__file__).parents[1] / "docs/assets/demo_long/reskill_library").iterdir())[:3]
    for skill in accepted:
        shutil.copytree(skill, checkpoint / "reskill_library" / skill.name)
    (checkpoint.parent / "latest").write_text(checkpoint.name)
    monkeypatch.chdir(tmp_path)
    out = run_main("library_ablation", ["demo", "--chains", "2", "--workers", "1", "--leave-out"], monkeypatch, capsys)
    names = [s.name for s in accepted]
    rows = re.findall(rf"^(none|all|only \S+|without \S+) +({NUMBER}) +({NUMBER}) ", out, re.MULTILINE)
    assert [r[0] for r in rows] == ["none", "all", *(f"only {n}" for n in names), *(f"without {n}" for n in names)]
    assert float(rows[0][2]) == 0 and assert_intervals_hold(out) == len(rows)
    for name in names:  # each variant's library holds exactly its skills
        alone = tmp_path / "demo" / "ablation" / "libraries" / f"reskill-only-{name}"
        assert [p.name for p in alone.iterdir()] == [name]
    assert (tmp_path / "demo" / "results").is_dir()  # none and all: the demo's own entries (reskill-weights, reskill)
    for name in names[1:]:  # one skill: alone = all, without it = none
        shutil.rmtree(checkpoint / "reskill_library" / name)
    variants = load("library_ablation").library_variants(checkpoint / "reskill_library", leave_out=True)
    assert list(variants) == ["none", "all"]


def test_persistent_sft_compares_both_library_scopes_for_each_share(tmp_path, monkeypatch, capsys):
    sizes = ["expert_chains=2", "sft_epochs=0.5", "tiny_hidden=32", "max_steps_per_task=15", "workers=1"]
    argv = [str(tmp_path), "--shares", "0", "1", "--eval-chains", "1", "--eval-turns", "2"]
    argv += [f"--set={size}" for size in sizes]
    out = run_main("persistent_sft", argv, monkeypatch, capsys)
    rows = re.findall(rf"^share (0|1), (chain|persistent) library: TGC ({NUMBER}), tokens/task ({NUMBER}), tasks "
                      rf"with a definition ({NUMBER})%$", out, re.MULTILINE)  # fmt: skip
    assert [(share, scope) for share, scope, *_ in rows] == [
        ("0", "chain"), ("0", "persistent"), ("1", "chain"), ("1", "persistent")]  # fmt: skip
    assert all(0 <= float(tgc) <= 100 and float(tokens) > 0 for _, _, tgc, tokens, _ in rows)
    assert assert_intervals_hold(out) == 2 * 4  # kept vs per-chain for each share, share 1 vs 0 in each scope
    saved = json.loads((tmp_path / "share-1" / "demo_config.json").read_text())
    assert saved["sft_persistent_share"] == 1.0 and saved["expert_chains"] == 2


def test_rl_vs_sft_evaluates_each_runs_newest_checkpoint_against_the_sft_model(toy_demo, tmp_path, monkeypatch, capsys):
    runs = [
        str(checkpoint.parents[1]) for checkpoint in sft_as_rl_runs(toy_demo, tmp_path, "plain", "stepwise").values()
    ]
    argv = [str(toy_demo), *runs, "--eval-chains", "2", "--workers", "1", "--output", str(tmp_path / "eval"),
            "--eval-split", "valid_seen", "--trained-chains", "1"]  # fmt: skip
    out = run_main("rl_vs_sft", argv, monkeypatch, capsys)
    figures = re.findall(rf"^(sft|plain|stepwise)(?: \((\S+)\))?: TGC ({NUMBER}), SGC ({NUMBER}), ", out, re.MULTILINE)
    assert [f[0] for f in figures] == ["sft", "plain", "stepwise"]
    assert figures[1][1].endswith("plain/checkpoints/step_0000002") and len({f[2:] for f in figures}) == 1
    # the same weights on the same chains: every paired difference is exactly 0, on all chains and on either part
    zero = "tgc +0.0 [+0.0, +0.0], sgc +0.0 [+0.0, +0.0], steps +0.0% [+0.0, +0.0], tokens +0.0% [+0.0, +0.0]"
    assert f"plain vs sft: {zero}" in out and f"stepwise vs sft: {zero}" in out and f"stepwise vs plain: {zero}" in out
    for part in ("chains < 1", "chains >= 1"):
        assert re.search(rf"^stepwise vs sft, {part}: TGC ({NUMBER}) vs \1; {re.escape(zero)}$", out, re.MULTILINE)
    assert assert_intervals_hold(out) == 12 + 16
    logs = list((tmp_path / "eval" / "results").glob("*.episodes.jsonl"))
    assert len(logs) == 3 and all("valid_seen" in log.name for log in logs)  # the split asked for was played


def test_rl_vs_sft_plays_each_run_as_its_own_arm_and_reskill_with_and_without_its_guidance(
    toy_demo, tmp_path, monkeypatch, capsys
):
    import shutil

    sft_as_rl_runs(toy_demo, tmp_path, "grpo-run", "reskill-run")
    accepted = sorted((Path(__file__).parents[1] / "docs/assets/demo_long/reskill_library").iterdir())[0]
    shutil.copytree(accepted, tmp_path / "reskill-run/checkpoints/step_0000002/reskill_library" / accepted.name)
    argv = [str(toy_demo), f"{tmp_path / 'grpo-run'}:grpo", str(tmp_path / "reskill-run"), "--arm", "reskill",
            "--eval-chains", "2", "--workers", "1", "--output", str(tmp_path / "eval")]  # fmt: skip
    out = run_main("rl_vs_sft", argv, monkeypatch, capsys)
    labels = re.findall(r"^(\S+)(?: \(\S+\))?: TGC ", out, re.MULTILINE)
    assert labels == ["sft", "grpo-run", "reskill-run", "reskill-run-weights"]
    assert re.search(r"^reskill-run vs grpo-run: tgc ", out, re.MULTILINE)
    assert re.search(r"^reskill-run-weights vs grpo-run: tgc ", out, re.MULTILINE)
    summaries = {p.name.split("__")[0]: json.loads(p.read_text()) for p in (tmp_path / "eval/results").glob("*.json")}
    skills = {label: summary["env_kwargs"]["skills"] for label, summary in summaries.items()}
    assert skills == {"sft": "none", "grpo-run": "none", "reskill-run": "guidance", "reskill-run-weights": "guidance"}
    library = {label: summary["agent_kwargs"].get("skills_path") for label, summary in summaries.items()}
    assert library["reskill-run"].endswith("reskill_library") and library["reskill-run-weights"] is None


def test_rl_vs_sft_plays_a_sage_run_with_a_library_kept_across_chains_when_asked(
    toy_demo, tmp_path, monkeypatch, capsys
):
    sft_as_rl_runs(toy_demo, tmp_path, "grpo-run", "sage-run")
    runs = [f"{tmp_path / 'grpo-run'}:grpo", str(tmp_path / "sage-run")]
    for flags, played in (([], ["sage-run"]), (["--persistent"], ["sage-run", "sage-run-persistent"])):
        argv = [str(toy_demo), *runs, "--arm", "sage", "--eval-chains", "2", "--workers", "1",
                "--output", str(tmp_path / "eval"), *flags]  # fmt: skip
        out = run_main("rl_vs_sft", argv, monkeypatch, capsys)
        assert re.findall(r"^(\S+)(?: \(\S+\))?: TGC ", out, re.MULTILINE) == ["sft-sage", "grpo-run", *played]
    assert re.search(r"^sage-run-persistent vs grpo-run: tgc ", out, re.MULTILINE)
    summaries = {p.name.split("__")[0]: json.loads(p.read_text()) for p in (tmp_path / "eval/results").glob("*.json")}
    scopes = {label: summary["env_kwargs"].get("library_scope") for label, summary in summaries.items()}
    assert scopes["sage-run-persistent"] == "persistent" and scopes["sage-run"] != "persistent"


def test_run_trained_plays_other_grpo_and_sage_runs_under_a_label_suffix(toy_demo, tmp_path):
    """``leaderboard/run_trained.sh`` with ``GRPO=<run>``, ``SAGE=<run>`` and ``LABEL_SUFFIX``, in a copy so that the
    repository's results stay as they are (the script writes under its own ``leaderboard/``)."""
    import os
    import shutil
    import subprocess

    root = Path(__file__).parents[1]
    (tmp_path / "repo" / "leaderboard").mkdir(parents=True)
    script = shutil.copy(root / "leaderboard" / "run_trained.sh", tmp_path / "repo" / "leaderboard")
    demo = shutil.copytree(toy_demo, tmp_path / "demo")  # a demo without a sage/ arm: only the asked arms are read
    # the demo's own log, which the suffixed entries must not take in (its records hash the unsuffixed label)
    (demo / "results").mkdir(exist_ok=True)
    (demo / "results" / "sft__SageChain-ALFWorld-v0__valid_unseen__default.episodes.jsonl").write_text("{}\n")
    checkpoints = sft_as_rl_runs(toy_demo, tmp_path, "grpo-run", "sage-run")
    env = {**os.environ, "PY": sys.executable, "PYTHONPATH": str(root), "DEMO": str(demo), "AGENTS": "sft grpo sage",
           "GRPO": str(tmp_path / "grpo-run"), "SAGE": str(tmp_path / "sage-run"), "LABEL_SUFFIX": "-x",
           "SPLITS": "valid_seen", "CHAINS": "2", "WORKERS": "1"}  # fmt: skip
    subprocess.run(["bash", script], env=env, check=True, capture_output=True, timeout=600)
    results = tmp_path / "repo" / "leaderboard" / "results"
    summaries = {p.name: json.loads(p.read_text()) for p in results.glob("*.json")}
    assert sorted(summaries) == [
        f"{label}__SageChain-ALFWorld-v0__valid_seen__default.json" for label in ("grpo-x", "sage-x", "sft-x")
    ]
    assert sorted(p.name for p in results.iterdir() if p.suffix == ".jsonl") == [
        name.replace(".json", ".episodes.jsonl") for name in sorted(summaries)
    ]  # nothing copied from the demo
    models = {s["agent"]: s["agent_kwargs"]["model_path"] for s in summaries.values()}
    assert models == {
        "sft-x": str(demo / "sft" / "model"),
        **{f"{run.removesuffix('-run')}-x": str(checkpoint / "model") for run, checkpoint in checkpoints.items()},
    }
    assert summaries["sage-x__SageChain-ALFWorld-v0__valid_seen__default.json"]["env_kwargs"]["skills"] == "program"
    assert all(s["n_chains"] == 2 for s in summaries.values())
    assert "| grpo-x |" in (tmp_path / "repo" / "leaderboard" / "LEADERBOARD.md").read_text()


def test_paired_seeds_compares_two_entries_seed_by_seed_over_the_seeds_and_pooled(tmp_path, monkeypatch, capsys):
    def log(folder, label, chains):
        """``leaderboard.evaluate``'s two files for ``label``: a success list per chain (a failure takes 30 turns)."""
        records = [{"seed": 0, "chain": i, "config_hash": "h", "task_types": ["pick_and_place_simple"] * len(won),
                    "success": won, "steps": [5 if w else 30 for w in won], "primitive_steps": [1] * len(won),
                    "tokens": [10] * len(won), "invalid_actions": [0] * len(won), "skill_reuse": [False] * len(won),
                    "skills_created": [[]] * len(won)} for i, won in enumerate(chains)]  # fmt: skip
        records.append({**records[0], "config_hash": "another configuration", "success": [False, False]})
        results = tmp_path / folder / "results"
        results.mkdir(parents=True, exist_ok=True)
        name = f"{label}__SageChain-ALFWorld-v0__valid_unseen__default"
        summary = {"agent": label, "config_hash": "h", "seeds": [0], "n_chains": len(chains)}
        (results / f"{name}.json").write_text(json.dumps(summary))
        (results / f"{name}.episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))

    win, half, lose = [True, True], [True, False], [False, False]
    seeds = {"s1": ([win, win], [half, win]), "s2": ([win, half], [half, half]), "s3": ([win, win], [lose, lose])}
    for folder, (first, second) in seeds.items():
        log(folder, "reskill", first)
        log(folder, "grpo", second)
        log(folder, "reskill-weights", second)  # a label that starts with the first's is not read for it
    argv = [f"{tmp_path / folder}:reskill:grpo" for folder in seeds] + ["--margin", "5"]
    out = run_main("paired_seeds", argv, monkeypatch, capsys)
    # TGC 100 vs 75, 75 vs 50 and 100 vs 0: +25, +25, +100 points. Over two chains, the first two seeds' paired
    # resamples range from both chains equal (+0) to both the one where they differ (+50), so only the third
    # seed's interval is above 0.
    assert "s1: reskill TGC 100.0 vs grpo 75.0; tgc +25.0 [+0.0, +50.0], sgc +50.0 [+0.0, +100.0], " in out
    assert "s2: reskill TGC 75.0 vs grpo 50.0; tgc +25.0 [+0.0, +50.0], " in out
    assert "s3: reskill TGC 100.0 vs grpo 0.0; tgc +100.0 [+100.0, +100.0], " in out
    assert "mean +- sd over 3 seeds: tgc +50.0 +- 43.3, sgc +" in out
    # each seed's chains 0 and 1 stay apart: 6 chains, 11 of 12 tasks vs 5 of 12
    assert "pooled (6 chains): TGC 91.7 vs 41.7; tgc +50.0 [" in out
    assert out.endswith("first >= second + 5 TGC points, interval above 0: 1 of 3 seeds\n")
    assert assert_intervals_hold(out) == 4 * 4
    # 6 of 20 tasks vs 4 of 20, one task more in each chain: 100 * (0.3 - 0.2) is 9.999..., printed and met as +10.0
    log("edge", "reskill", [[True] * 3 + [False] * 7] * 2)
    log("edge", "grpo", [[True] * 2 + [False] * 8] * 2)
    out = run_main("paired_seeds", [f"{tmp_path / 'edge'}:reskill:grpo", "--margin", "10"], monkeypatch, capsys)
    assert "reskill TGC 30.0 vs grpo 20.0; tgc +10.0 [+10.0, +10.0], " in out
    assert out.endswith("first >= second + 10 TGC points, interval above 0: 1 of 1 seeds\n")
    with pytest.raises(SystemExit, match="holds 0 summaries of 'sage', not one"):
        run_main("paired_seeds", [f"{tmp_path / 's1'}:sage:grpo"], monkeypatch, capsys)


def test_check_envs_prints_each_envs_checks(monkeypatch, capsys):
    out = run_main("check_envs", ["--env", "SageChain-ALFWorld-v0", "--strings", "50"], monkeypatch, capsys)
    row = re.search(r"^\| SageChain-ALFWorld-v0 \| (.*) \| (.*) \| (.*) \| \d+ \|$", out, re.MULTILINE)
    assert row.groups() == ("passes, 0 warning(s)", "identical, 13 turns", "50 / 50 flagged invalid, 0 exceptions")


def test_compare_curves_tables_and_plots_each_runs_evaluations(tmp_path, monkeypatch, capsys):
    def run(name, evals, config=None):
        folder = tmp_path / name
        folder.mkdir()
        rows = [{"charts/step": s, "eval/task_success": v} for s, v in evals.items()]
        rows.insert(1, {"charts/step": 1, "env/task_success": 0.9})  # a training step: not an evaluation
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        if config:
            (folder / "config.json").write_text(json.dumps(config))
        return str(folder)

    first = run("a", {0: 0.35, 10: 0.45}, {"eval_split": "valid_seen", "eval_chains": 20})
    second = run("b", {0: 0.41, 5: 0.5, 10: 0.425})
    plot = tmp_path / "out" / "curves.png"
    out = run_main("compare_curves", [f"fit 20={first}", second, "--output", str(plot)], monkeypatch, capsys)
    assert "| run | 0 | 5 | 10 |" in out
    assert "| fit 20 | 35.0 |  | 45.0 |" in out and "| b | 41.0 | 50.0 | 42.5 |" in out
    assert plot.stat().st_size > 0
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "metrics.jsonl").write_text(json.dumps({"charts/step": 1, "env/task_success": 0.5}) + "\n")
    with pytest.raises(SystemExit):  # a run without evaluations is refused, not plotted empty
        run_main("compare_curves", [str(tmp_path / "c")], monkeypatch, capsys)


def test_prompt_memory_counts_the_turns_whose_prompt_still_holds_a_reply(monkeypatch, capsys):
    one_room = '{"rooms": 1, "num_chains": 2}'  # the houses the TextWorld env tests make
    argv = ["--split", "valid", "--chains", "1", "--history", "1", "30", "--env-kwargs", one_room]
    out = run_main("prompt_memory", argv, monkeypatch, capsys)
    assert re.search(r"1 chains, 2 tasks, \d+ expert turns; 2 tasks run 'examine cookbook'", out)
    rows = {
        int(w): (int(a), int(h), int(t))
        for w, a, h, t in re.findall(r"^\| (\d+) \| (\d+) \| (\d+) \(\d+%\) \| (\d+) \|$", out, re.M)
    }
    (after, held_short, tokens_short), (after_long, held_long, tokens_long) = rows[1], rows[30]
    assert after == after_long > 2 * 2  # the recipe is followed for more than two turns in each task
    assert held_long == after and held_short < after  # a whole task fits a 30-turn window; one turn drops the recipe
    assert tokens_long > tokens_short


def test_sft_stage_trains_the_demos_sft_model_and_plays_it_greedy_and_sampled(tmp_path, monkeypatch, capsys):
    sets = ["expert_chains=1", "tiny_hidden=32", "tiny_layers=1", "sft_epochs=1.0", "sft_bf16=false", "history_turns=2"]
    argv = ["--output", str(tmp_path), "--eval-chains", "2", *(x for s in sets for x in ("--set", s))]
    out = run_main("sft_stage", argv, monkeypatch, capsys)
    pairs = (tmp_path / "expert" / "pairs.jsonl").read_text().splitlines()
    head = rf"^{len(pairs)} pairs from 1 chains x 2 modes; SFT mean loss \d+\.\d+ in \d+ s "
    assert re.search(head + r"\(SageChain-ALFWorld-v0, history_turns=2\)$", out, re.M)
    assert json.loads((tmp_path / "demo_config.json").read_text())["history_turns"] == 2  # --set reached the stages
    for way in ("greedy", "sampled"):
        assert re.search(rf"^sft, {way}: TGC \d+\.\d \(2 valid_unseen chains\), steps/task \d+\.\d$", out, re.M)
        assert len(list((tmp_path / "results").glob(f"sft-{way}__*.episodes.jsonl"))) == 1
    model = (tmp_path / "sft" / "model" / "model.safetensors").stat().st_mtime
    # a rerun finds both stages finished and plays the model as SAGE's start too, with the SAGE arm's skills (on one
    # chain of 3 turns a task: the stages are read back, so the turn limit only shortens the plays)
    rerun = [*argv[:2], "--eval-chains", "1", *argv[4:], "--set", "max_steps_per_task=3", "--sage"]
    out = run_main("sft_stage", rerun, monkeypatch, capsys)
    assert (tmp_path / "sft" / "model" / "model.safetensors").stat().st_mtime == model
    sage = r"^sft-sage, greedy: TGC \d+\.\d \(1 valid_unseen chains\), steps/task \d+\.\d, engine steps/task \d+\.\d, "
    assert re.search(sage + r"tokens/task \d+\.\d$", out, re.M)
    (played,) = (tmp_path / "results").glob("sft-sage__*.json")
    recorded = json.loads(played.read_text())
    assert recorded["agent_kwargs"]["write_skills"] and recorded["env_kwargs"]["skills"] == "program"


def test_objects_taken_counts_tasks_that_took_another_object_and_put_it_back(tmp_path, monkeypatch, capsys):
    soap = "FloorPlan1/valid_unseen-000001-0/pick_clean_then_place_in_recep-SoapBar-None-Toilet"
    mug = "pick_heat_then_place_in_recep-Mug-None-CounterTop/trial_T2019"  # an official game's id
    knives = "FloorPlan10/valid_unseen-000010-1/pick_two_obj_and_place-ButterKnife-None-Drawer"
    episodes = [
        {"task_ids": [soap, mug], "success": [False, True], "actions": [
            ["go to shelf 1", "take candle 1 from shelf 1", "move candle 1 to shelf 1", "take soapbar 2 from shelf 1"],
            ["take mug 3 from countertop 2", "heat mug 3 with microwave 1", "put mug 3 in/on countertop 1"],
        ]},
        {"task_ids": [soap], "success": [False], "actions": [["take cloth 1 from sinkbasin 1", "go to toilet 1"]]},
        {"task_ids": [knives], "success": [False], "actions": [[
            "take butterknife 1 from countertop 2", "move butterknife 1 to drawer 1", "go to drawer 2",
            "go to drawer 1", "take butterknife 1 from drawer 1", "move butterknife 1 to drawer 2",
        ]]},
    ]  # fmt: skip
    log = tmp_path / "agent.episodes.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    out = run_main("objects_taken", [str(log)], monkeypatch, capsys).splitlines()
    # 4 tasks, 1 won; 2 took another object (both lost); 1 lost without the soap, having gone to 1 place (the toilet;
    # the sink basin it took the cloth from is no "go to"); the knives task lost after taking back the knife it had
    # placed; 1 turn put the candle back
    assert f"| {log} | all | 4 | 1 | 2 (50.0%) | 2 | 1 | - | 1.0 | - | 1 | 1 | 0 |" in out
    # where the expert found the soap: the sink basin, never gone to; the first soap task left the expert's path by
    # going to the shelf instead of the sink basin, the second by taking the cloth (not another place)
    expert = tmp_path / "expert.episodes.jsonl"
    soap_path = ["go to sinkbasin 1", "take soapbar 1 from sinkbasin 1"]
    expert.write_text(json.dumps({"task_ids": [soap], "actions": [soap_path]}) + "\n")
    by_type = run_main("objects_taken", [str(log), "--by-type", "--expert", str(expert)], monkeypatch, capsys)
    by_type = by_type.splitlines()
    assert (
        f"| {log} | pick_clean_then_place_in_recep | 2 | 0 | 2 (100.0%) | 2 | 1 | 1 | 1.0 | 1 | 0 | 1 | 0 |" in by_type
    )
    assert f"| {log} | pick_heat_then_place_in_recep | 1 | 1 | 0 (0.0%) | 0 | 0 | 0 | - | 0 | 0 | 0 | 0 |" in by_type
    assert f"| {log} | pick_two_obj_and_place | 1 | 0 | 0 (0.0%) | 0 | 0 | 0 | - | 0 | 1 | 0 | 0 |" in by_type
    assert load("objects_taken").task_type(knives) == "pick_two_obj_and_place"
    cycle_period = load("objects_taken").cycle_period
    search = [f"go to drawer {i}" for i in range(1, 7)]
    assert cycle_period(["look"] * 11) == 0  # too few turns to tell
    assert cycle_period(["take soapbar 1 from toilet 1", *["examine toilet 1"] * 12]) == 1
    assert cycle_period(["go to toilet 1", *search[:2] * 6]) == 2
    assert cycle_period(search * 2) == 6 and cycle_period([*search, *search[::-1]]) == 0  # no period of <= 6
    looped = {"task_ids": [soap], "success": [False], "actions": [["go to toilet 1", *search[:2] * 6]]}
    won = {"task_ids": [soap], "success": [True], "actions": [search[:2] * 6]}
    log.write_text(json.dumps(looped) + "\n" + json.dumps(won) + "\n")
    assert run_main("objects_taken", [str(log)], monkeypatch, capsys).splitlines()[-1].endswith("| 0 | 0 | 1 |")
    with pytest.raises(ValueError, match="not an ALFWorld task id"):
        load("objects_taken").task_object("tw-cooking-recipe-1")


def test_pass_at_k_counts_tasks_some_sample_wins_and_those_greedy_play_loses(tmp_path, monkeypatch, capsys):
    def log(label, seeds, chains, types=None):
        """Two files of ``leaderboard.evaluate`` for ``label``: per seed, one success list per chain (and with
        ``types`` each chain's task types, the same for every chain)."""
        records = [
            {"seed": seed, "chain": i, "config_hash": "h", "success": won} | ({"task_types": types} if types else {})
            for seed, seed_chains in zip(seeds, chains, strict=True)
            for i, won in enumerate(seed_chains)
        ]
        records.append({**records[0], "config_hash": "another configuration", "success": [True, True]})
        name = f"{label}__SageChain-ALFWorld-v0__valid_unseen__default"
        summary = {"agent": label, "config_hash": "h", "seeds": seeds, "n_chains": len(records) - 1}
        (tmp_path / f"{name}.json").write_text(json.dumps(summary))
        (tmp_path / f"{name}.episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        return str(tmp_path / f"{name}.json")

    # four tasks, four samples each: won 4, 2, 1 and 0 times
    seeds = [0, 1, 2, 3]
    chains = [
        [[True, True], [True, False]],
        [[True, True], [False, False]],
        [[True, False], [False, False]],
        [[True, False], [False, False]],
    ]
    sampled = log("sampled", seeds, chains)
    greedy = log("greedy", [0], [[[False, True], [False, True]]])  # loses the tasks won 4 and 1 times; wins 2 and 0
    out = run_main("pass_at_k", [sampled, "--greedy", greedy], monkeypatch, capsys)
    # pass@1 = mean c/n = (4 + 2 + 1 + 0) / 16; pass@2 = (1 + (1 - 1/6) + (1 - 3/6) + 0) / 4; pass@4 = 3/4
    assert "4 tasks, 4 samples each at least" in out
    assert "| 1 | 43.8 |\n| 2 | 58.3 |\n| 4 | 75.0 |" in out
    assert out.splitlines()[-1] == (
        "greedy: 2 of 4 tasks won (50.0%); of its 2 lost tasks some sample won 2, so greedy play that won those "
        "would complete 100.0%; 1 tasks greedy won no sample did"
    )
    assert "| 3 | 68.8 |" in run_main("pass_at_k", [sampled, "--k", "3"], monkeypatch, capsys)  # 1 + 1 + 3/4 + 0
    with pytest.raises(SystemExit):
        run_main("pass_at_k", [sampled, "--k", "5"], monkeypatch, capsys)
    # by type: each chain's first task is a heat task (won 4 and 1 times), its second a two-object one (2 and 0)
    typed = log("typed", seeds, chains, types=["pick_heat", "pick_two"])
    assert run_main("pass_at_k", [typed, "--by-type"], monkeypatch, capsys).endswith(
        "| k | all, 4 tasks | pick_heat, 2 | pick_two, 2 |\n|---|---|---|---|\n"
        "| 1 | 43.8 | 62.5 | 25.0 |\n| 2 | 58.3 | 75.0 | 41.7 |\n| 4 | 75.0 | 100.0 | 50.0 |\n"
    )
    pass_at_k = load("pass_at_k").pass_at_k
    assert pass_at_k(4, 4, 1) == 1.0 and pass_at_k(4, 0, 4) == 0.0 and pass_at_k(5, 1, 2) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="pass@k needs"):
        pass_at_k(3, 4, 1)
