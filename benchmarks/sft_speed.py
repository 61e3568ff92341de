"""SFT warm start with TRL's gradient checkpointing on (its default) vs off, side by side in one run.

    python benchmarks/sft_speed.py --pairs runs/demo/expert/pairs.jsonl            # ~3 min on 2 cores
    python benchmarks/sft_speed.py --pairs runs/demo/expert/pairs.jsonl --steps 200 --repeat 2

The demo's SFT stage (``sage_app.demo.sft_model``) on the demo's own expert pairs: the same word-level
tokenizer, rebalancing and tiny model (``DemoConfig``'s size, seed 0), bf16 autocast, batch 16, for ``--steps``
optimizer steps per run. Each setting trains a fresh copy of the same initial model on the same batches; the
runs alternate (``--repeat`` rounds) so that machine noise hits both. Columns: ``s/step`` = median wall seconds
per step of the training loop (TRL's ``train_runtime``, without the data set-up); ``pairs/s``; ``x`` = how many
times faster than checkpointing on; ``loss`` = TRL's mean training loss of the run (the same math either way:
recomputing activations changes the speed, not the gradients, up to float rounding).
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import tempfile

from sage_app.demo import DemoConfig
from sage_agents.models import build_tiny_model, build_tokenizer
from sage_agents.sft import reweight_pairs, sft_warm_start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", required=True, help="expert pairs.jsonl of a demo run (stage 1)")
    parser.add_argument("--steps", type=int, default=100, help="optimizer steps per run")
    parser.add_argument("--repeat", type=int, default=1, help="alternating rounds of both settings")
    args = parser.parse_args()
    cfg = DemoConfig()
    pairs = [json.loads(line) for line in open(args.pairs)]
    tokenizer = build_tokenizer([p["prompt"] + "\n" + p["completion"] for p in pairs])
    pairs = reweight_pairs(pairs, cfg.sft_action_weights, seed=cfg.seed)
    initial, tokenizer = build_tiny_model(tokenizer, hidden=cfg.tiny_hidden, layers=cfg.tiny_layers, seed=cfg.seed)
    seconds: dict[bool, list[float]] = {True: [], False: []}
    losses: dict[bool, float] = {}
    for _ in range(args.repeat):
        for checkpointing in (True, False):
            model = copy.deepcopy(initial)
            metrics = sft_warm_start(
                model, tokenizer, pairs, output_dir=tempfile.mkdtemp(), max_steps=args.steps, lr=cfg.sft_lr,
                batch_size=cfg.sft_batch_size, seed=cfg.seed, max_length=1024, bf16=cfg.sft_bf16,
                completion_only=cfg.sft_completion_only, gradient_checkpointing=checkpointing, progress=False,
            )  # fmt: skip
            seconds[checkpointing].append(metrics["train_runtime"] / args.steps)  # the loop, not data set-up
            losses[checkpointing] = metrics["train_loss"]
    base = statistics.median(seconds[True])
    print(f"{args.steps} steps x batch {cfg.sft_batch_size}, {args.repeat} round(s)")
    print("| gradient checkpointing | s/step | pairs/s | x | loss |")
    print("|---|---|---|---|---|")
    for checkpointing in (True, False):
        per_step = statistics.median(seconds[checkpointing])
        print(f"| {'on (TRL default)' if checkpointing else 'off'} | {per_step:.3f} | "
              f"{cfg.sft_batch_size / per_step:.1f} | {base / per_step:.2f} | {losses[checkpointing]:.4f} |")


if __name__ == "__main__":
    main()
