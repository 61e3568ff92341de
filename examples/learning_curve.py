"""A longer RL run of one demo arm with a greedy evaluation on fixed chains every few steps, and its curve.

    python examples/learning_curve.py runs/demo --arm sage --steps 40 --eval-every 5 --output runs/curve-sage

    python examples/learning_curve.py runs/demo --arm grpo --steps 50 --eval-every 10 --eval-split valid_unseen \
        --eval-chains 50 --set temperature=0.6 --set lr=1e-4 --output runs/curve-grpo-t0.6

Starts from the demo's SFT checkpoint (``runs/demo/sft/model``, from ``make demo``) with the demo arm's exact
settings (sage_app/demo.py ``arm_config``; ``--set KEY=VALUE`` overrides a TrainConfig field, the value read as
JSON), trains ``--steps`` steps, and every ``--eval-every`` steps plays
the first ``--eval-chains`` chains of ``--eval-split`` greedily (TrainConfig ``eval_every``). Writes
``OUTPUT/learning_curve.png``: the evaluation success (fixed chains) and the per-step training success (the
step's groups: ``chains_per_step`` chains x ``group_size`` rollouts). Resumable like any training run.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import typer

from sage_agents.checkpoints import metric_curve
from sage_agents.trainer import Trainer
from sage_app.cli import parse_overrides
from sage_app.demo import ARMS, DemoConfig, arm_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("demo_dir", help="a finished demo's --output-dir (its sft/model is the start)")
    parser.add_argument("--arm", choices=ARMS, default="sage")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--eval-split", default="valid_seen")
    parser.add_argument("--eval-chains", type=int, default=16)
    parser.add_argument("--seed", type=int, default=None, help="the RL seed (default: the demo's, as its arm ran)")
    parser.add_argument("--output", default="runs/curve-sage")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a TrainConfig field")
    args = parser.parse_args()
    try:
        overrides = parse_overrides(args.set)
    except typer.BadParameter as error:
        parser.error(str(error))

    demo = Path(args.demo_dir)
    cfg = DemoConfig.load(demo / "demo_config.json")
    seed = cfg.seed if args.seed is None else args.seed
    config = dataclasses.replace(
        arm_config(cfg, Path(args.output), args.arm, demo / "sft" / "model", seed),
        output_dir=args.output, total_steps=args.steps, eval_every=args.eval_every, eval_split=args.eval_split,
        eval_chains=args.eval_chains, **overrides,
    )  # fmt: skip
    trainer = Trainer(config)
    try:
        trainer.train()
    finally:
        trainer.close()

    train = metric_curve(args.output, "env/task_success")
    evals = metric_curve(args.output, "eval/task_success")
    fig, ax = plt.subplots(figsize=(6, 4))
    group = f"{config.chains_per_step} chain(s) x {config.group_size}"
    ax.plot(*zip(*train, strict=True), ".", color="tab:gray", alpha=0.6, label=f"training groups ({group})")
    ax.plot(
        *zip(*evals, strict=True),
        "o-",
        color="tab:orange",
        label=f"greedy, {args.eval_chains} {args.eval_split} chains",
    )
    ax.set(xlabel="RL step", ylabel="task success", title=f"{args.arm} on {config.env_id}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(Path(args.output) / "learning_curve.png", dpi=120)
    print("eval task success by step:", {int(s): round(v, 3) for s, v in evals})


if __name__ == "__main__":
    main()
