"""The RL update without a KL term: every trained turn vs only the turns whose advantage is not 0, side by side.

    python benchmarks/update_speed.py --model-path runs/demo/sft/model             # 4 steps, ~2 min on 2 cores
    python benchmarks/update_speed.py --model-path runs/demo-long/sft/model --arm reskill --steps 6

Without a KL term (``beta`` 0: ``make demo-long``'s GRPO and ReSkill arms) a turn whose advantage is 0 (its group
all won or all lost that task) has a gradient of exactly 0, and :meth:`sage_agents.trainer.Trainer.update` leaves
it out (:func:`sage_agents.trainer.rows_with_gradient`). Each step here plays one rollout with the demo-long arm's
settings (``sage_app.demo.arm_config``, ``beta`` 0) from ``--model-path`` (an SFT model: a random one wins nothing,
so every advantage would be 0), then makes the step's update twice from the same weights and optimizer state,
the two orders alternating from step to step: with every row (``all s``) and without the rows whose advantage is
0 (``skip s``). The next step plays from the skipping update's weights. Columns: ``rows`` trained turns, ``zero``
their share with advantage 0, ``x`` = all s / skip s, ``max dw`` the largest difference between the two updates'
weights (Adam's first step moves a weight by ~lr, so float noise on a near-0 gradient shows as up to ~1e-6).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

import torch

import sage_agents.trainer as trainer_module
from sage_agents.trainer import Trainer
from sage_app.demo import DemoConfig, arm_config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-path", required=True, help="an SFT model folder, e.g. runs/demo/sft/model")
    parser.add_argument("--arm", default="grpo", choices=["grpo", "reskill"])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not (Path(args.model_path) / "config.json").exists():
        parser.error(f"--model-path {args.model_path} holds no model (config.json): run `make demo` first")

    with tempfile.TemporaryDirectory() as out:
        config = arm_config(DemoConfig(long=True), Path(out), args.arm, Path(args.model_path), args.seed)
        trainer = Trainer(dataclasses.replace(config, beta=0.0, eval_every=0, save_every=0, progress=False))
        keep_rows = trainer_module.rows_with_gradient
        print(f"{'step':>4} {'rows':>5} {'zero':>5} {'all s':>7} {'skip s':>7} {'x':>5} {'max dw':>8}", flush=True)
        ratios = []
        for step in range(args.steps):
            rows, _ = trainer.build_rows(trainer.rollout())
            start = (copy.deepcopy(trainer.model.state_dict()), copy.deepcopy(trainer.optimizer.state_dict()))
            seconds, weights = {}, {}
            for way in ("all", "skip") if step % 2 == 0 else ("skip", "all"):
                trainer.model.load_state_dict(start[0])
                trainer.optimizer.load_state_dict(copy.deepcopy(start[1]))  # the step updates its state in place
                trainer_module.rows_with_gradient = keep_rows if way == "skip" else (lambda r, w: (r, w, 1.0))
                t0 = time.perf_counter()
                trainer.update([dict(r) for r in rows])
                seconds[way] = time.perf_counter() - t0
                weights[way] = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
            trainer_module.rows_with_gradient = keep_rows
            trainer.model.load_state_dict(weights["skip"], strict=False)
            zero = sum(r["adv"] == 0 for r in rows) / max(1, len(rows))
            dw = max(float((weights["all"][n] - weights["skip"][n]).abs().max()) for n in weights["all"])
            ratios.append(seconds["all"] / seconds["skip"])
            print(
                f"{step + 1:>4} {len(rows):>5} {zero:>5.2f} {seconds['all']:>7.2f} {seconds['skip']:>7.2f} "
                f"{ratios[-1]:>5.2f} {dw:>8.1e}",
                flush=True,
            )
        trainer.close()
    print(f"median x {statistics.median(ratios):.2f} over {len(ratios)} steps (torch {torch.__version__})")


if __name__ == "__main__":
    main()
