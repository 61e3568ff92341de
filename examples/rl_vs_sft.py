"""RL runs against their SFT start on the demo's evaluation chains, with paired 95% intervals.

    python examples/rl_vs_sft.py runs/demo runs/curve-grpo runs/curve-gigpo --arm grpo --output runs/rl-vs-sft
    python examples/rl_vs_sft.py runs/demo runs/fit-20 --eval-split valid_seen --trained-chains 20
    python examples/rl_vs_sft.py runs/demo runs/grpo200:grpo runs/reskill200 --arm reskill    # ReSkill vs GRPO

Each run is an RL training folder started from the demo's SFT model (``examples/learning_curve.py --output RUN``,
or a demo arm's ``runs/demo/<arm>``); its newest checkpoint plays as the demo's ``--arm`` entry would (the
demo's decoding, skills mode and seeds; sage_app/demo.py ``agent_entries``), and so does the SFT model in the same
skills mode (``sft``; ``sft-sage`` for ``--arm sage``: SAGE's start), on the first
``--eval-chains`` chains of ``--eval-split`` (default: the demo's evaluation split), through the leaderboard
evaluator (resumable: a finished evaluation is read back). Prints each agent's TGC (and progress where the domain
scores its tasks), SGC, steps and generated tokens per task, then each run against the SFT model and against the
first run, chain by chain (paired bootstrap over chains; the interval is that of these two fixed models on these
chains, not of the training's randomness). ``RUN:ARM`` plays one run as another arm, so that runs of two arms
from the same start are compared chain by chain (the SFT start keeps ``--arm``'s mode); a ReSkill checkpoint plays
with the guidance it accepted and, as ``RUN-weights``, without it. With ``--persistent`` a SAGE checkpoint also
plays as ``RUN-persistent`` with one skill library kept across the chains (``library_scope="persistent"``, the
chains in order, one at a time: issue 20 item 4's persistent row); list a GRPO run first to compare it with that.
``--trained-chains K`` is for runs trained on the first K chains of the evaluated split (``--set split=...
--set train_chains=K``): each run against the SFT model is also shown on those K chains and on the others.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from leaderboard.evaluate import evaluate
from sage_agents.checkpoints import latest_checkpoint
from sage_agents.evaluation import summarize_records
from sage_app.demo import (
    ARMS,
    PERSISTENT,
    SFT_AS_SAGE,
    DemoConfig,
    agent_entries,
    entry_eval_config,
    logged_episodes,
    paired_ci,
    sft_as_sage_entry,
)

UNITS = {"tgc": "", "sgc": "", "steps": "%", "tokens": "%", "progress": ""}  # of each of :func:`differences`


def differences(a: dict, b: dict) -> dict:
    """TGC and SGC points, relative steps and tokens per task (%), of ``a`` vs ``b`` (summaries or resamples)."""
    out = {"tgc": 100 * (a["tgc"] - b["tgc"]), "sgc": 100 * (a["sgc"] - b["sgc"]),
           "steps": 100 * (a["mean_steps"] / b["mean_steps"] - 1),
           "tokens": 100 * (a["mean_tokens"] / b["mean_tokens"] - 1)}  # fmt: skip
    if "progress" in a and "progress" in b:  # a domain that scores its tasks: points of progress
        out["progress"] = 100 * (a["progress"] - b["progress"])
    return out


def figures(episodes: dict) -> dict:
    """The summary figures (TGC, SGC, steps, tokens, ...) of an episode log (:func:`logged_episodes`)."""
    return summarize_records(list(episodes.values()))


def paired_differences(first: dict, second: dict) -> tuple[dict, dict]:
    """:func:`differences` of ``first`` vs ``second`` (episode logs of the same chains), and their paired 95%
    intervals (chains resampled jointly)."""
    return differences(figures(first), figures(second)), paired_ci(first, second, differences)


def difference_line(point: dict, ci: dict) -> str:
    """:func:`paired_differences`' figures as one line: each difference and its interval."""
    shown = [(k, u) for k, u in UNITS.items() if k in point]
    return ", ".join(f"{k} {point[k]:+.1f}{u} [{ci[k][0]:+.1f}, {ci[k][1]:+.1f}]" for k, u in shown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("demo_dir", help="the demo whose SFT model the runs started from")
    parser.add_argument(
        "runs", nargs="+", metavar="RUN[:ARM]", help="RL training folders (their newest checkpoint is evaluated), "
        "each played as ARM (default: --arm)"
    )  # fmt: skip
    parser.add_argument("--arm", choices=ARMS, default="grpo", help="how the runs play, and so the SFT start's mode")
    parser.add_argument("--eval-split", default=None, help="the split played (default: the demo's eval_split)")
    parser.add_argument("--eval-chains", type=int, default=100)
    parser.add_argument(
        "--trained-chains",
        type=int,
        default=None,
        metavar="K",
        help="the runs trained on the split's first K chains: also compare on those and the rest",
    )
    parser.add_argument(
        "--persistent", action="store_true", help="SAGE runs also play with one library for all chains (RUN-persistent)"
    )
    parser.add_argument("--workers", type=int, default=None, help="evaluation processes (default: the demo's)")
    parser.add_argument("--output", default="runs/rl-vs-sft", help="the evaluations are logged in OUTPUT/results")
    args = parser.parse_args()

    demo, out = Path(args.demo_dir), Path(args.output)
    cfg = replace(DemoConfig.load(demo / "demo_config.json"), sage_persistent_eval=args.persistent)
    sft = demo / "sft" / "model"
    start = SFT_AS_SAGE if args.arm == "sage" else "sft"  # the SFT model playing in the arm's own skill mode
    entries = {start: sft_as_sage_entry(cfg, sft) if start == SFT_AS_SAGE else agent_entries(cfg, sft, {})["sft"]}
    checkpoints = {}  # label -> checkpoint folder
    for run, _, arm in (spec.partition(":") for spec in args.runs):
        arm = arm or args.arm
        checkpoint = latest_checkpoint(Path(run) / "checkpoints")
        if checkpoint is None:
            parser.error(f"{run} has no checkpoint under {Path(run) / 'checkpoints'}")
        played = agent_entries(cfg, sft, {arm: checkpoint})
        name = Path(run).name
        # ReSkill's weights play with the guidance they accepted and without it (``reskill-weights``); SAGE's, if
        # asked, also with a library kept across chains.
        for label, entry in (
            (name, played[arm]),
            (f"{name}-weights", played.get(f"{arm}-weights")),
            (f"{name}-persistent", played.get(PERSISTENT)),
        ):
            if entry is not None:
                entries[label], checkpoints[label] = entry, checkpoint
    results = {}  # label -> episode log
    split, chains = args.eval_split or cfg.eval_split, args.eval_chains
    for label, entry in entries.items():
        summary = evaluate(entry_eval_config(cfg, label, entry, out / "results", split, chains, workers=args.workers))
        results[label] = logged_episodes(out, summary)
        where = f" ({checkpoints[label]})" if label in checkpoints else ""
        progress = f", progress {100 * summary['progress']:.1f}" if "progress" in summary else ""
        print(f"{label}{where}: TGC {100 * summary['tgc']:.1f}{progress}, SGC {100 * summary['sgc']:.1f}, steps/task "
              f"{summary['mean_steps']:.1f}, tokens/task {summary['mean_tokens']:.1f}")  # fmt: skip
    first, k = next(iter(checkpoints)), args.trained_chains
    for label in checkpoints:
        print(f"{label} vs {start}: {difference_line(*paired_differences(results[label], results[start]))}")
        if label != first:
            print(f"{label} vs {first}: {difference_line(*paired_differences(results[label], results[first]))}")
        for name, trained in () if k is None else ((f"chains < {k}", True), (f"chains >= {k}", False)):
            subset = [{key: e for key, e in results[x].items() if (key[1] < k) == trained} for x in (label, start)]
            if all(subset):
                tgc = [100 * figures(e)["tgc"] for e in subset]
                line = difference_line(*paired_differences(*subset))
                print(f"{label} vs {start}, {name}: TGC {tgc[0]:.1f} vs {tgc[1]:.1f}; {line}")


if __name__ == "__main__":
    main()
