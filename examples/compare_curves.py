"""The greedy evaluation curves of several training runs in one plot and one table.

    python examples/compare_curves.py "GRPO, train chains=runs/gigpo/grpo" "fit 20=runs/fit20" --output curves.png

Each run is a training folder (``examples/learning_curve.py --output RUN``, ``sage train``, a demo arm) whose
``metrics.jsonl`` holds the trainer's evaluations (``eval/task_success`` at ``charts/step``; TrainConfig
``eval_every``), named ``LABEL=PATH`` or by its folder. Prints a markdown table of each run's greedy TGC (%) at
every step any run evaluated (blank where a run did not) and saves the curves to ``--output``. The runs' evaluation
sets are whatever each was given (``eval_split``, ``eval_chains``, read from its ``config.json`` into the legend):
only curves on the same chains compare point by point.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from sage_agents.checkpoints import METRICS_FILE, metric_curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", metavar="[LABEL=]RUN", help="training folders holding metrics.jsonl")
    parser.add_argument("--output", default="runs/curves.png", help="where the plot is saved")
    args = parser.parse_args()

    curves = {}
    fig, ax = plt.subplots(figsize=(7, 4))
    for spec in args.runs:
        label, _, path = spec.rpartition("=")
        run = Path(path)
        if not (run / METRICS_FILE).exists():
            parser.error(f"{run} has no {METRICS_FILE}")
        curves[label or run.name] = curve = dict(metric_curve(run, "eval/task_success"))
        if not curve:
            parser.error(f"{run / METRICS_FILE} holds no evaluation (train with eval_every > 0)")
        config = json.loads((run / "config.json").read_text()) if (run / "config.json").exists() else {}
        chains = f" ({config.get('eval_chains')} {config.get('eval_split')})" if config else ""
        ax.plot(list(curve), [100 * v for v in curve.values()], "o-", label=f"{label or run.name}{chains}")
    ax.set(xlabel="RL step", ylabel="greedy TGC (%)", title="evaluation during training")
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.output, dpi=120)

    steps = sorted({s for curve in curves.values() for s in curve})
    print("| run | " + " | ".join(map(str, steps)) + " |")
    print("|---|" + "---|" * len(steps))
    for label, curve in curves.items():
        print(f"| {label} | " + " | ".join(f"{100 * curve[s]:.1f}" if s in curve else "" for s in steps) + " |")
    print(f"saved {args.output}")


if __name__ == "__main__":
    main()
