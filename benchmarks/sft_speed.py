"""SFT warm start side by side in one run: TRL's gradient checkpointing on (its default) vs off, or bf16 vs fp32.

    python benchmarks/sft_speed.py --pairs runs/demo/expert/pairs.jsonl            # ~3 min on 2 cores
    python benchmarks/sft_speed.py --pairs runs/demo/expert/pairs.jsonl --steps 200 --repeat 2
    python benchmarks/sft_speed.py --pairs runs/demo/expert/pairs.jsonl --compare precision --steps 10

The demo's SFT stage (``sage_app.demo.sft_model``) on the demo's own expert pairs: the same word-level
tokenizer, rebalancing and tiny model (``DemoConfig``'s size, seed 0), the demo's precision, batch 16, for ``--steps``
optimizer steps per run. Each setting trains a fresh copy of the same initial model on the same batches; the
runs alternate (``--repeat`` rounds) so that machine noise hits both. Columns: ``s/step`` = median wall seconds
per step of the training loop (TRL's ``train_runtime``, without the data set-up); ``pairs/s``; ``x`` = how many
times faster than the first row; ``loss`` = TRL's mean training loss of the run (the same math either way:
recomputing activations changes the speed, not the gradients, up to float rounding). ``--compare precision``:
bf16 autocast vs fp32, checkpointing off (bf16 is emulated, and slow, on CPUs without bf16 kernels).
``--compare batch``: the demo's batch vs 4x it, the demo's precision, checkpointing off (then compare ``pairs/s``:
a tiny model's step is mostly fixed cost; ``x`` is the ratio of pairs per second). ``--compare logits``: the loss
from TRL's fused LM head (its ``SFTTrainer``) vs from the model's full logits (``FullLogitsSFTTrainer``, the default
on a CPU): the same loss, up to float rounding.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import tempfile

import torch

from sage_agents.models import build_tiny_model, build_tokenizer
from sage_agents.sft import reweight_pairs, runs_bf16_natively, sft_warm_start
from sage_app.demo import DemoConfig


def settings(compare: str, cfg: DemoConfig) -> dict[str, dict[str, bool | int | None]]:
    """Row label -> the ``sft_warm_start`` options that differ between the compared runs."""
    if compare == "batch":
        return {f"batch {cfg.sft_batch_size}": {"bf16": cfg.sft_bf16, "gradient_checkpointing": False},
                f"batch {4 * cfg.sft_batch_size}": {"bf16": cfg.sft_bf16, "gradient_checkpointing": False,
                                                    "batch_size": 4 * cfg.sft_batch_size}}  # fmt: skip
    if compare == "logits":
        return {"TRL's fused LM head": {"bf16": cfg.sft_bf16, "full_logits": False},
                "full logits": {"bf16": cfg.sft_bf16, "full_logits": True}}  # fmt: skip
    if compare == "precision":
        return {"bf16 autocast": {"bf16": True, "gradient_checkpointing": False},
                "fp32": {"bf16": False, "gradient_checkpointing": False}}  # fmt: skip
    return {"checkpointing on (TRL default)": {"bf16": cfg.sft_bf16, "gradient_checkpointing": True},
            "checkpointing off": {"bf16": cfg.sft_bf16, "gradient_checkpointing": False}}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", required=True, help="expert pairs.jsonl of a demo run (stage 1)")
    parser.add_argument("--steps", type=int, default=100, help="optimizer steps per run")
    parser.add_argument("--repeat", type=int, default=1, help="alternating rounds of both settings")
    parser.add_argument("--compare", choices=("checkpointing", "precision", "batch", "logits"), default="checkpointing")
    args = parser.parse_args()
    cfg = DemoConfig()
    pairs = [json.loads(line) for line in open(args.pairs)]
    tokenizer = build_tokenizer([p["prompt"] + "\n" + p["completion"] for p in pairs])
    pairs = reweight_pairs(pairs, cfg.sft_action_weights, seed=cfg.seed)
    initial, tokenizer = build_tiny_model(tokenizer, hidden=cfg.tiny_hidden, layers=cfg.tiny_layers, seed=cfg.seed)
    rows = settings(args.compare, cfg)
    seconds: dict[str, list[float]] = {label: [] for label in rows}
    losses: dict[str, float] = {}
    for _ in range(args.repeat):
        for label, options in rows.items():
            model = copy.deepcopy(initial)
            metrics = sft_warm_start(
                model, tokenizer, pairs, output_dir=tempfile.mkdtemp(), max_steps=args.steps, lr=cfg.sft_lr,
                seed=cfg.seed, max_length=1024, **{"batch_size": cfg.sft_batch_size, **options},
                completion_only=cfg.sft_completion_only, progress=False,
            )  # fmt: skip
            seconds[label].append(metrics["train_runtime"] / args.steps)  # the loop, not data set-up
            losses[label] = metrics["train_loss"]
    throughput = {label: rows[label].get("batch_size", cfg.sft_batch_size) / statistics.median(seconds[label])
                  for label in rows}  # fmt: skip
    base = next(iter(throughput.values()))
    print(f"{args.steps} steps per run, {args.repeat} round(s); CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}, bf16 kernels: {runs_bf16_natively()}")  # fmt: skip
    print("| setting | s/step | pairs/s | x | loss |")
    print("|---|---|---|---|---|")
    for label in rows:
        print(f"| {label} | {statistics.median(seconds[label]):.3f} | {throughput[label]:.1f} | "
              f"{throughput[label] / base:.2f} | {losses[label]:.4f} |")  # fmt: skip


if __name__ == "__main__":
    main()
