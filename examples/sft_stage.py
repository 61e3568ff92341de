"""The demo's first stages alone (expert chains, SFT, DAgger if asked), then the SFT model on held-out chains.

    python examples/sft_stage.py --output runs/tw-h6-200 --eval-chains 20 --set env_id=SageChain-TextWorld-v0 \
        --set expert_chains=200 --set history_turns=6 --set eval_split=valid

``--set KEY=VALUE`` sets a DemoConfig field (the value read as JSON, else as a string), as ``sage demo --set`` does;
the stages are the demo's own (``expert_pairs``, ``sft_model``, and ``dagger_model`` with ``--set
sft_dagger_chains=N``), so a finished stage is found and skipped on a rerun, and the model is the one ``sage demo``
would train at those settings. The ``sft`` entry then plays the first
``--eval-chains`` chains of the evaluation split through the leaderboard evaluator twice: greedily (the leaderboard's
protocol) and sampling at the policy's temperature, which shows what a policy that loops under greedy decoding
can still do (and what RL would sample from); with ``--sage`` also greedily as the SAGE arm plays it (``sft-sage``:
the start SAGE's RL is judged from, with the demo's skills and templates). Prints the pairs, the SFT loss and time
(and DAgger's), and one line per way.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import typer

from leaderboard.evaluate import evaluate
from sage_app.cli import parse_overrides
from sage_app.demo import (
    SFT_AS_SAGE,
    DemoConfig,
    agent_entries,
    dagger_model,
    entry_eval_config,
    expert_pairs,
    sft_as_sage_entry,
    sft_model,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="runs/sft-stage", help="the stages' folder (a demo's layout)")
    parser.add_argument("--eval-chains", type=int, default=20, help="held-out chains played each way")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a DemoConfig field")
    parser.add_argument(
        "--sage", action="store_true", help="also play the model greedily as the SAGE arm would (sft-sage: its start)"
    )
    args = parser.parse_args()
    try:
        cfg = DemoConfig(**{**parse_overrides(args.set), "output_dir": args.output})
    except (typer.BadParameter, TypeError, ValueError) as error:
        parser.error(str(error))

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    cfg.save(out / "demo_config.json")
    pairs = expert_pairs(cfg, out)
    sft = sft_model(cfg, out, pairs)
    metrics = json.loads((out / "sft" / "metrics.json").read_text())
    print(f"{len(pairs)} pairs from {cfg.expert_chains} chains x 2 modes; SFT mean loss {metrics['train_loss']:.3f} "
          f"in {metrics['wall_seconds']:.0f} s ({cfg.env_id}, history_turns={cfg.history_turns})")  # fmt: skip
    if cfg.sft_dagger_chains:
        sft = dagger_model(cfg, out, sft, pairs)
        metrics = json.loads((out / "dagger" / "metrics.json").read_text())
        print(f"DAgger: {metrics['dagger_pairs']} labelled turns of {cfg.sft_dagger_chains} chains; mean loss "
              f"{metrics['train_loss']:.3f} in {metrics['wall_seconds']:.0f} s")  # fmt: skip
    agent, kwargs, env_kwargs = agent_entries(cfg, sft, {})["sft"]
    for greedy in (True, False):
        way = "greedy" if greedy else "sampled"
        entry = (agent, {**kwargs, "greedy": greedy}, env_kwargs)
        summary = evaluate(
            entry_eval_config(cfg, f"sft-{way}", entry, out / "results", cfg.eval_split, args.eval_chains)
        )
        print(f"sft, {way}: TGC {100 * summary['tgc']:.1f} ({summary['n_chains']} {cfg.eval_split} chains), "
              f"steps/task {summary['mean_steps']:.1f}")  # fmt: skip
    if args.sage:
        entry = sft_as_sage_entry(cfg, sft)
        config = entry_eval_config(cfg, SFT_AS_SAGE, entry, out / "results", cfg.eval_split, args.eval_chains)
        summary = evaluate(config)
        print(f"{SFT_AS_SAGE}, greedy: TGC {100 * summary['tgc']:.1f} ({summary['n_chains']} {cfg.eval_split} chains), "
              f"steps/task {summary['mean_steps']:.1f}, engine steps/task {summary['mean_primitive_steps']:.1f}, "
              f"tokens/task {summary['mean_tokens']:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
