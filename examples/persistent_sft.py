"""The SAGE arm's SFT model on a library per chain and on one kept across chains, by the SFT data's share of
expert chains played with a kept library (``DemoConfig.sft_persistent_share``).

    python examples/persistent_sft.py runs/persistent-sft --shares 0 0.5 --seed 0    # ~30 min per share on 2 cores
    python examples/persistent_sft.py OUT --shares 0 1 --eval-chains 1 --eval-turns 2 --set expert_chains=2 \
        --set tiny_hidden=32 --set max_steps_per_task=15 --set workers=1    # smoke, under a minute

For each share: the demo's stages 1-2 (expert chains, SFT) in ``OUT/share-S`` (a finished stage is reused), then
the SFT model as the SAGE agent (program skills, the demo's decoding) on the first ``--eval-chains`` chains of the
demo's evaluation split, once starting every chain from an empty library and once keeping one library across them
in order (``library_scope="persistent"``, the ``sage-persistent`` entry's protocol). Prints TGC, tokens per task and
the share of tasks with a definition per row, then paired 95% intervals: kept vs per-chain library for each share,
and each share vs the first one in each scope (a share changes the SFT data, hence the SFT model).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from leaderboard.evaluate import evaluate
from sage_app.cli import parse_overrides
from sage_app.demo import PERSISTENT, DemoConfig, entry_eval_config, expert_pairs, logged_episodes, paired_ci, sft_model

SCOPES = {"sage": "chain", PERSISTENT: "persistent"}
"""Evaluation label -> the env's ``library_scope``."""


def differences(a: dict, b: dict) -> dict:
    """TGC points and relative tokens per task (%) of ``a`` vs ``b``: summaries, or :func:`paired_ci`'s resamples."""
    return {"tgc": 100 * (a["tgc"] - b["tgc"]), "tokens": 100 * (a["mean_tokens"] / b["mean_tokens"] - 1)}


def compare(first: tuple[dict, dict], second: tuple[dict, dict]) -> str:
    """:func:`differences` of ``first`` vs ``second`` (each its summary and episode log) with paired intervals."""
    point, ci = differences(first[0], second[0]), paired_ci(first[1], second[1], differences)
    return (f"TGC {point['tgc']:+.1f} points [{ci['tgc'][0]:+.1f}, {ci['tgc'][1]:+.1f}], "
            f"tokens {point['tokens']:+.1f}% [{ci['tokens'][0]:+.1f}, {ci['tokens'][1]:+.1f}]")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="folder of the runs (one per share)")
    parser.add_argument("--shares", type=float, nargs="+", default=[0.0, 0.5])
    parser.add_argument("--seed", type=int, default=0, help="the demo's seed (expert data, SFT)")
    parser.add_argument("--eval-chains", type=int, default=100)
    parser.add_argument("--eval-turns", type=int, help="turn limit per task in the evaluations (default: the demo's)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a DemoConfig field (JSON)")
    args = parser.parse_args()
    overrides = parse_overrides(args.set)

    runs: dict[tuple[float, str], tuple[dict, dict]] = {}  # (share, label) -> (summary, episode log)
    for share in args.shares:
        out = Path(args.output) / f"share-{share:g}"
        cfg = DemoConfig(**{**overrides, "output_dir": str(out), "seed": args.seed,
                            "sft_persistent_share": share})  # fmt: skip
        out.mkdir(parents=True, exist_ok=True)
        cfg.save(out / "demo_config.json")
        sft = sft_model(cfg, out, expert_pairs(cfg, out))
        agent_kwargs = {"model_path": str(sft), **cfg.policy_kwargs, **cfg.sage_kwargs}
        for label, scope in SCOPES.items():
            env_kwargs = {**cfg.eval_env_kwargs("program"), "library_scope": scope}
            if args.eval_turns:
                env_kwargs["max_steps_per_task"] = args.eval_turns
            entry = ("sage", agent_kwargs, env_kwargs)
            summary = evaluate(entry_eval_config(cfg, label, entry, out / "results", cfg.eval_split, args.eval_chains))
            records = logged_episodes(out, summary)
            runs[share, label] = summary, records
            tasks = [acts for r in records.values() for acts in r["actions"]]
            defined = 100 * sum(any(a.startswith("skill ") for a in acts) for acts in tasks) / len(tasks)
            print(f"share {share:g}, {scope} library: TGC {100 * summary['tgc']:.1f}, tokens/task "
                  f"{summary['mean_tokens']:.1f}, tasks with a definition {defined:.1f}%")  # fmt: skip
    for share in args.shares:
        print(f"share {share:g}, kept vs per-chain library: {compare(runs[share, PERSISTENT], runs[share, 'sage'])}")
    for share in args.shares[1:]:
        for label, scope in SCOPES.items():
            first = args.shares[0]
            print(f"{scope} library, share {share:g} vs {first:g}: {compare(runs[share, label], runs[first, label])}")


if __name__ == "__main__":
    main()
