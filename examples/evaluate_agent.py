"""Evaluate an agent: a registered agent on fixed chains through the leaderboard's evaluator, and its summary.

    python examples/evaluate_agent.py --agent expert --split valid_seen --num-chains 10
    python examples/evaluate_agent.py --agent sage --skills program --num-chains 20 \
        --agent-kwargs '{"model_path": "runs/demo/sage/checkpoints/step_0000006/model", "constrained": true}'

The same run from the command line is ``python -m leaderboard.evaluate --agent expert --split valid_seen
--num-chains 10 --output DIR``. Every agent meets the same chains (chain ``i`` of the split, once per seed); the
evaluator writes one JSON line per chain (``DIR/<run>.episodes.jsonl``) as it ends and the summary
(``DIR/<run>.json``) at the end; rerunning the same command resumes from the log. ``python -m leaderboard.render
--results DIR --output DIR`` turns the summaries of a folder into a leaderboard.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from leaderboard.evaluate import EvalConfig, evaluate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="expert", help="a registered agent name (`sage agents` lists them)")
    parser.add_argument("--agent-kwargs", type=json.loads, default={}, help="JSON keyword arguments of its factory")
    parser.add_argument("--env", default="SageChain-ALFWorld-v0")
    parser.add_argument("--split", default="valid_seen", choices=["train", "valid_seen", "valid_unseen"])
    parser.add_argument("--skills", default="program", choices=["program", "guidance", "both", "none"])
    parser.add_argument("--num-chains", type=int, default=10)
    parser.add_argument("--output", default=None, help="results folder (default: a fresh temporary one)")
    args = parser.parse_args()

    config = EvalConfig(
        agent=args.agent, env=args.env, split=args.split, num_chains=args.num_chains, seeds=[0],
        agent_kwargs=args.agent_kwargs, env_kwargs={"chain_length": 2, "max_steps_per_task": 30, "skills": args.skills},
        output=args.output or tempfile.mkdtemp(prefix="evaluate_agent-"),
    )  # fmt: skip
    summary = evaluate(config)

    def pct(key: str) -> str:
        low, high = summary["ci95"][key]
        return f"{100 * summary[key]:.1f}% [{100 * low:.1f}, {100 * high:.1f}]"

    unit = summary.get("token_unit", "tokens")
    print(f"{summary['agent']} on {summary['n_chains']} chains ({summary['n_tasks']} tasks) of {summary['env']} "
          f"{summary['split']}, skills={args.skills}:")  # fmt: skip
    print(f"  TGC {pct('tgc')}, SGC {pct('sgc')} (95% intervals: chains resampled; Wilson at 0 or 100%)")
    print(f"  {summary['mean_steps']:.1f} turns and {summary['mean_tokens']:.1f} {unit} per task; "
          f"{summary['skills_created']:.2f} skills defined per chain, reused in "
          f"{100 * summary['skill_reuse_rate']:.0f}% of later tasks")  # fmt: skip
    episodes = Path(config.output) / f"{config.run_name}.episodes.jsonl"
    first = json.loads(episodes.read_text().splitlines()[0])
    print(f"  chain {first['chain']}: tasks {first['task_types']}, success {first['success']}, "
          f"first actions {[a.splitlines()[0] for a in first['actions'][0][:3]]}")  # fmt: skip
    print(f"summary: {Path(config.output) / (config.run_name + '.json')}")
    print(f"episodes: {episodes}")


if __name__ == "__main__":
    main()
