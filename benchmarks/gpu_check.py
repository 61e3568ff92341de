"""GPU check: 3 SAGE steps of Qwen3-0.6B- and Qwen3-4B-shaped policies, full fine-tune and LoRA, on one GPU.

    python benchmarks/gpu_check.py                 # one GPU, <= 8 minutes on an H200; no downloads
    python benchmarks/gpu_check.py --toy           # tiny shapes, 1 step, runs on CPU (tests/benchmarks)
    python benchmarks/gpu_check.py --sizes 0.6b --modes lora --steps 2
    python benchmarks/gpu_check.py --sizes 0.6b --modes options   # constrained, sampled and trained by whole options

The policies are randomly initialised from ``transformers.Qwen3Config`` with the real shapes of Qwen3-0.6B and
Qwen3-4B (hidden size, layers, attention and KV heads, head dim, MLP size, vocabulary, tied embeddings) and the
project's offline word-level tokenizer (``sage_agents.models.build_tokenizer``): nothing is downloaded. Each
is saved to a temporary folder and trained through ``TrainConfig.model_path``, the path a user's checkpoint
takes. Training: ``algo="sage"`` on ``SageChain-ALFWorld-v0`` (native engine), group size 8, one chain per
step, bf16 autocast (``mixed_precision="bf16"``); full fine-tune keeps fp32 master weights (``dtype="float32"``),
LoRA (``lora_r=16``, all linear layers) keeps the frozen base in bf16 (``dtype="bfloat16"``); gradient
checkpointing on. A random model rarely emits a valid action, so a chain is a few turns of ``max_new_tokens``
tokens per task: the check measures the machinery (generation, update, memory), not learning. The ``options`` mode
is the full fine-tune acting by constrained decoding with a policy over whole options (``option_sampling``: every
option of a choice scored by one tree-attention forward, in rollouts and in the update, under bf16 autocast).

Printed per run: median step seconds over the steps after the first (the first when only one), generated
tokens/s during the rollout, peak GPU memory (``torch.cuda.max_memory_allocated``), and the share of the step
spent in generation (rollout) vs training (update).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from sage_agents.config import TrainConfig  # noqa: E402

# Shapes from the published config.json of each model (Qwen/Qwen3-0.6B, Qwen/Qwen3-4B).
SHAPES: dict[str, dict[str, Any]] = {
    "0.6b": {"hidden_size": 1024, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
             "head_dim": 128, "intermediate_size": 3072, "vocab_size": 151936, "tie_word_embeddings": True},
    "4b": {"hidden_size": 2560, "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
           "head_dim": 128, "intermediate_size": 9728, "vocab_size": 151936, "tie_word_embeddings": True},
    "toy": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 8, "intermediate_size": 64, "vocab_size": 1024, "tie_word_embeddings": True},
}  # fmt: skip
MODES = ("full", "lora", "options")
"""Full fine-tune, LoRA, and the full fine-tune sampling and training whole options under constrained decoding."""


def save_random_qwen3(size: str, folder: Path, dtype: torch.dtype, device: str) -> int:
    """A random-init Qwen3 of ``SHAPES[size]`` with the offline tokenizer, saved to ``folder``; returns params."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from sage_agents.models import build_tokenizer

    tok = build_tokenizer()
    shape = SHAPES[size]
    if len(tok) > shape["vocab_size"]:
        raise ValueError(f"tokenizer has {len(tok)} tokens, more than the {size} vocabulary {shape['vocab_size']}")
    config = Qwen3Config(
        **shape,
        max_position_embeddings=40960,
        rope_theta=1_000_000.0,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    with torch.device(device):  # initialise on the GPU: a 4B init on CPU takes minutes
        model = Qwen3ForCausalLM(config).to(dtype)
    model.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    n = sum(p.numel() for p in model.parameters())
    del model
    return n


def run(args: argparse.Namespace, size: str, mode: str, model_dir: Path, out_dir: Path) -> dict[str, float]:
    """Train ``args.steps`` SAGE steps; return the figures of one row."""
    from sage_agents.trainer import Trainer

    cuda = torch.cuda.is_available() and not args.cpu
    lora, options = mode == "lora", mode == "options"
    cfg = TrainConfig(
        algo="sage",
        env_id="SageChain-ALFWorld-v0",
        env_kwargs={"engine": "native", "max_steps_per_task": args.turns},
        model_path=str(model_dir),
        group_size=args.group_size,
        chains_per_step=1,
        total_steps=args.steps,
        max_new_tokens=args.max_new_tokens,
        micro_batch_size=args.micro_batch_size,
        lr=1e-6 if not lora else 1e-5,
        dtype="bfloat16" if lora else "float32",
        mixed_precision="bf16" if cuda else "no",
        constrained=options,
        option_sampling=options,
        lora_r=16 if lora else 0,
        lora_alpha=32,
        lora_dropout=0.0,
        lora_target_modules=None,
        gradient_checkpointing=not args.toy,
        report_to=[],
        progress=False,
        save_every=0,
        output_dir=str(out_dir),
        seed=0,
        cpu=not cuda,
    )
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    trainer = Trainer(cfg)
    steps = []
    for _ in range(args.steps):
        m = trainer.train_step()
        steps.append(m)
        print(
            f"  {size} {mode} step {int(m['charts/step'])}: {m['charts/step_seconds']:.1f} s "
            f"(rollout {m['charts/rollout_seconds']:.1f} s, update {m['charts/update_seconds']:.1f} s), "
            f"{m['charts/tokens_generated']:.0f} tokens, {m['charts/turns']:.0f} turns",
            flush=True,
        )
    trainer.close()
    timed = steps[1:] or steps  # the first step includes CUDA warm-up

    def med(key: str) -> float:
        return statistics.median(s[key] for s in timed)

    step_s, rollout_s, update_s = (
        med("charts/step_seconds"),
        med("charts/rollout_seconds"),
        med("charts/update_seconds"),
    )
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")
    del trainer
    return {
        "step_s": step_s,
        "tok_per_s": med("charts/tokens_generated") / max(rollout_s, 1e-9),
        "peak_gib": peak,
        "gen_share": rollout_s / max(step_s, 1e-9),
        "train_share": update_s / max(step_s, 1e-9),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toy", action="store_true", help="tiny shapes, 1 step, group size 2: a CPU smoke run")
    parser.add_argument("--sizes", default=None, help="comma-separated of 0.6b,4b (default both; toy: toy)")
    parser.add_argument("--modes", default="full,lora", help="comma-separated of full,lora,options")
    parser.add_argument("--steps", type=int, default=None, help="SAGE steps per run (default 3; toy: 1)")
    parser.add_argument("--group-size", type=int, default=None, help="G (default 8; toy: 2)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="per turn (default 64; toy: 8)")
    parser.add_argument("--turns", type=int, default=None, help="max_steps_per_task (default 4; toy: 2)")
    parser.add_argument("--micro-batch-size", type=int, default=8, help="turns per forward/backward")
    parser.add_argument("--cpu", action="store_true", help="run on CPU even when a GPU is present")
    args = parser.parse_args(argv)
    toy = args.toy
    args.sizes = (args.sizes or ("toy" if toy else "0.6b,4b")).split(",")
    args.modes = args.modes.split(",")
    args.steps = args.steps or (1 if toy else 3)
    args.group_size = args.group_size or (2 if toy else 8)
    args.max_new_tokens = args.max_new_tokens or (8 if toy else 64)
    args.turns = args.turns or (2 if toy else 4)
    bad = [s for s in args.sizes if s not in SHAPES] + [m for m in args.modes if m not in MODES]
    if bad:
        parser.error(f"unknown sizes/modes {bad}; sizes: {sorted(SHAPES)}, modes: {', '.join(MODES)}")
    cuda = torch.cuda.is_available() and not args.cpu
    device = "cuda" if cuda else "cpu"
    name = torch.cuda.get_device_name() if cuda else "CPU"
    print(f"device {name}; torch {torch.__version__}; G={args.group_size}, {args.steps} step(s), turns={args.turns}")
    rows, t0 = [], time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            model_dir = Path(tmp) / f"qwen3-{size}"
            n = save_random_qwen3(size, model_dir, torch.bfloat16 if cuda else torch.float32, device)
            print(f"Qwen3-{size} shape: {n / 1e9:.3f}B params, saved in {time.perf_counter() - t0:.0f} s", flush=True)
            for mode in args.modes:
                r = run(args, size, mode, model_dir, Path(tmp) / f"run-{size}-{mode}")
                rows.append([f"Qwen3-{size}", mode, r])
    print("\n| model | mode | step s | gen tok/s | peak GPU GiB | generation share | training share |")
    print("|---|---|---|---|---|---|---|")
    for model, mode, r in rows:
        print(
            f"| {model} | {mode} | {r['step_s']:.2f} | {r['tok_per_s']:.0f} | {r['peak_gib']:.1f} | "
            f"{r['gen_share']:.0%} | {r['train_share']:.0%} |"
        )
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
