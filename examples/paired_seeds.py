"""Two agents over several seeds: each seed's paired difference, the mean and spread over seeds, all seeds pooled.

    python examples/paired_seeds.py runs/rl-vs-sft-kl:reskill-200-kl-listen-s1:grpo-200-kl-listen-s1 \\
        runs/rl-vs-sft-kl-s2:reskill-200-kl-listen-s2:grpo-200-kl-listen-s2 \\
        runs/rl-vs-sft-kl-s3:reskill-200-kl-listen-s3:grpo-200-kl-listen-s3 --margin 5

Each argument is one seed, ``FOLDER:FIRST:SECOND``: two entries that ``leaderboard.evaluate`` logged under
``FOLDER/results`` (``examples/rl_vs_sft.py --output FOLDER`` logs each run under its folder's name) after playing
the same chains. Prints, per seed, FIRST vs SECOND with its paired 95% interval (chains resampled jointly,
:mod:`rl_vs_sft`): that interval is the evaluation's noise for these two fixed models, not the training's. The
training's is what the seeds show: the mean and standard deviation of the per-seed differences. The pooled line
plays all seeds' chains as one set (resampled together). ``--margin M`` counts the seeds where FIRST's TGC is at
least M points above SECOND's with the interval's lower end above 0 (issue 21's goal is M = 5 at every seed).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from rl_vs_sft import UNITS, difference_line, figures, paired_differences  # examples/ is on sys.path when run

from leaderboard.evaluate import summary_episodes
from sage_app.demo import meets


def logged(folder: str, label: str) -> dict:
    """The episodes that the summary of the entry ``label`` under ``folder/results`` counts, by ``(seed, chain)``."""
    found = sorted((Path(folder) / "results").glob(f"{label}__*.json"))
    if len(found) != 1:
        raise SystemExit(f"{folder}/results holds {len(found)} summaries of {label!r}, not one")
    _, records = summary_episodes(found[0])
    return {(r["seed"], r["chain"]): r for r in records}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("seeds", nargs="+", metavar="FOLDER:FIRST:SECOND", help="one seed's two evaluated entries")
    parser.add_argument("--margin", type=float, default=None, help="count the seeds where FIRST leads by this many "
                        "TGC points, interval above 0")  # fmt: skip
    args = parser.parse_args()
    pairs, points, met = [], [], 0
    for spec in args.seeds:
        parts = spec.split(":")
        if len(parts) != 3 or not all(parts):
            parser.error(f"{spec!r} is not FOLDER:FIRST:SECOND")
        folder, first, second = parts
        pair = logged(folder, first), logged(folder, second)
        if not set(pair[0]) & set(pair[1]):
            raise SystemExit(f"{first} and {second} in {folder} played no chain in common")
        point, ci = paired_differences(*pair)
        tgc = [100 * figures(log)["tgc"] for log in pair]
        print(f"{folder}: {first} TGC {tgc[0]:.1f} vs {second} {tgc[1]:.1f}; {difference_line(point, ci)}")
        met += args.margin is not None and meets(point["tgc"], args.margin) and ci["tgc"][0] > 0
        pairs.append(pair)
        points.append(point)
    if len(points) > 1:
        by_key = {k: [p[k] for p in points] for k in points[0]}
        spread = ", ".join(
            f"{k} {statistics.mean(v):+.1f}{UNITS[k]} +- {statistics.stdev(v):.1f}" for k, v in by_key.items()
        )
        print(f"mean +- sd over {len(points)} seeds: {spread}")
        # Keys gain the seed's index, so that the same chain of two seeds stays two chains.
        pooled = [{(i, *key): r for i, pair in enumerate(pairs) for key, r in pair[side].items()} for side in (0, 1)]
        tgc = [100 * figures(log)["tgc"] for log in pooled]
        chains = len(set(pooled[0]) & set(pooled[1]))
        line = difference_line(*paired_differences(*pooled))
        print(f"pooled ({chains} chains): TGC {tgc[0]:.1f} vs {tgc[1]:.1f}; {line}")
    if args.margin is not None:
        print(f"first >= second + {args.margin:g} TGC points, interval above 0: {met} of {len(points)} seeds")


if __name__ == "__main__":
    main()
