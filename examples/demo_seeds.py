"""SAGE vs GRPO over whole-pipeline seeds: several ``sage demo --set seed=N`` runs, side by side.

A demo's ``extra_rl_seeds`` vary the RL arms from one SFT model; runs with different ``seed`` also vary the tiny
model's initialisation and the SFT data order, i.e. everything. This reads each run's ``results.json`` and prints
every run's main agents, the comparison's mean and spread over the runs, and each goal of the runs' reports
(issues 20 and 21: the arms against their SFT start, SAGE and ReSkill against GRPO) run by run.
``steps / completed task`` (from the episode logs) separates how many turns a completed task took from how many
tasks failed (a failure takes all ``max_steps_per_task`` turns).

    python examples/demo_seeds.py runs/demo runs/demo-seed1 runs/demo-seed2
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sage_app.demo import SFT_AS_SAGE, comparison, comparison_line, goal_result, logged_episodes, spread, spread_line


def steps_per_completed_task(run: Path, summary: dict) -> float:
    """Mean agent turns of the completed tasks in ``summary``'s episode log (nan when none was completed)."""
    episodes = logged_episodes(run, summary).values()
    steps = [s for e in episodes for s, done in zip(e["steps"], e["success"], strict=True) if done]
    return sum(steps) / len(steps) if steps else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="output dirs of finished demo runs")
    args = parser.parse_args()
    print("| run | seed | agent | TGC % | SGC % | steps / task | steps / completed task | tokens / task |")
    print("|---|---|---|---|---|---|---|---|")
    per_run, goals = {}, {}
    for run in args.runs:
        result = json.loads((Path(run) / "results.json").read_text())
        for judged in result.get("goals", []):  # runs from before the goals were judged have none
            goals.setdefault(judged["name"], {})[run] = judged
        seed = result["config"]["seed"]
        for s in result["summaries"]:
            if s["agent"] in ("sft", SFT_AS_SAGE, *result["config"]["arms"]):  # the arms and their starts
                print(
                    f"| {run} | {seed} | {s['agent']} | {100 * s['tgc']:.1f} | {100 * s['sgc']:.1f} | "
                    f"{s['mean_steps']:.1f} | {steps_per_completed_task(Path(run), s):.1f} | "
                    f"{s['mean_tokens']:.1f} |"
                )
        # recomputed from the logs, so that runs reported before the paired intervals existed get them too
        arms = [s for s in result["summaries"] if s["agent"] in ("sage", "grpo")]
        per_run[run] = comparison(result["summaries"], {s["agent"]: logged_episodes(Path(run), s) for s in arms})
    print("\nEach run (95% paired-bootstrap intervals over its chains):")
    for run, comp in per_run.items():
        print(f"  {run}: {comparison_line(comp)}")
    if len(per_run) > 1:
        over = spread({run: {k: comp[k] for k in ("sgc_gain_points", "steps_cut", "tokens_cut")}
                       for run, comp in per_run.items()})  # fmt: skip
        print(f"  mean +- sd over {over['n']} runs: {spread_line(over)}")
    if goals:
        print("\nGoals, run by run (each run's report):")
    for name, by_run in goals.items():
        first = next(iter(by_run.values()))
        met = sum(bool(judged["met"]) for judged in by_run.values())
        print(f"- {name} (goal {first['goal']}; {first['source']}): met in {met} of {len(args.runs)} runs")
        for run in args.runs:
            judged = by_run.get(run)
            words = [goal_result(judged), judged["status"]] if judged else ["not in its report"]
            print(f"    {run}: {': '.join(filter(None, words))}")


if __name__ == "__main__":
    main()
