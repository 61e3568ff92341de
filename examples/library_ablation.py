"""Which of a ReSkill arm's accepted guidance skills help, and which cost? Its last checkpoint on the same chains
with no library, the whole library, and each skill alone (``--leave-out``: also the library less each skill).

    python examples/library_ablation.py runs/demo-long --chains 100
    python examples/library_ablation.py runs/demo-quick --chains 2        # a smoke run (tests)

The demo folder's ReSkill arm (``--arm``, default ``reskill``) is evaluated as the demo's stage 4 evaluates it
(``sage_app.demo.agent_entries``: its prompt options, env settings and ``eval_split``), through the leaderboard
evaluator, into ``<demo>/ablation/``; the no-library and whole-library runs reuse the demo's own episode logs where
their settings match. Printed per variant: TGC and its paired 95% interval against no library (chains resampled
jointly, ``sage_app.demo.paired_ci``), and the turns per task. In the demo-long run the whole library cost 14 points
(docs/reskill.md); this says whether one skill carries that cost or each does.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from leaderboard.evaluate import evaluate, read_episodes
from sage_agents.reskill.controller import LIBRARY_DIR
from sage_app.demo import DemoConfig, agent_entries, entry_eval_config, paired_ci


def library_variants(library: Path, leave_out: bool) -> dict[str, list[Path]]:
    """``variant name -> the skill folders it keeps``: none, all, each alone and (``leave_out``) all but each; a
    variant that keeps the same skills as one before it (one skill alone is the whole of a one-skill library) is
    left out."""
    skills = sorted(path for path in library.iterdir() if (path / "SKILL.md").is_file())
    variants = {"none": [], "all": skills}
    candidates = [(f"only {s.name}", [s]) for s in skills]
    if leave_out:
        candidates += [(f"without {s.name}", [o for o in skills if o != s]) for s in skills]
    for name, kept in candidates:
        if kept not in variants.values():
            variants[name] = kept
    return variants


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("demo", type=Path, help="a demo output folder whose ReSkill arm has trained")
    parser.add_argument("--arm", default="reskill", help="the arm's label (reskill, reskill-seed1, ...)")
    parser.add_argument("--chains", type=int, default=100, help="chains of the demo's eval_split per variant")
    parser.add_argument("--leave-out", action="store_true", help="also evaluate the library less each skill")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    cfg = DemoConfig.load(args.demo / "demo_config.json")
    checkpoints = args.demo / args.arm / "checkpoints"
    checkpoint = checkpoints / (checkpoints / "latest").read_text().strip()
    library = checkpoint / LIBRARY_DIR
    if not library.is_dir():
        raise SystemExit(f"{checkpoint} holds no {LIBRARY_DIR}/: the arm accepted no guidance skill.")
    entries = agent_entries(cfg, args.demo / "sft" / "model", {args.arm: checkpoint})
    weights = args.arm.replace("reskill", "reskill-weights", 1)
    demo_entries = {"none": weights, "all": args.arm}  # their episode logs in the demo's results/ resume them

    logs = {}
    for name, skills in library_variants(library, args.leave_out).items():
        if name in demo_entries:
            label, output = demo_entries[name], args.demo / "results"
            entry = entries[label]
        else:
            label, output = f"{args.arm}-{name.replace(' ', '-')}", args.demo / "ablation"
            folder = output / "libraries" / label
            shutil.rmtree(folder, ignore_errors=True)
            for skill in skills:
                shutil.copytree(skill, folder / skill.name)
            agent, without, env_kwargs = entries[weights]
            entry = (agent, {**without, "skills_path": str(folder)}, env_kwargs)
        config = entry_eval_config(cfg, label, entry, output, cfg.eval_split, args.chains, workers=args.workers)
        summary = evaluate(config)
        logs[name] = (summary, read_episodes(output / f"{config.run_name}.episodes.jsonl", config.config_hash))

    none_summary, none_episodes = logs["none"]
    print(f"\n{args.arm} at {checkpoint.name}, {cfg.eval_split}, {args.chains} chains; paired 95% intervals vs none")
    print(f"{'variant':<40} {'TGC':>6} {'vs none [95% interval]':>24} {'turns/task':>10}")
    for name, (summary, episodes) in logs.items():
        gain = 100 * (summary["tgc"] - none_summary["tgc"])
        low, high = paired_ci(episodes, none_episodes, lambda a, b: {"tgc": 100 * (a["tgc"] - b["tgc"])})["tgc"]
        versus = f"{gain:+.1f} [{low:+.1f}, {high:+.1f}]"
        print(f"{name:<40} {100 * summary['tgc']:>6.1f} {versus:>24} {summary['mean_steps']:>10.1f}")


if __name__ == "__main__":
    main()
