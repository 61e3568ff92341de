"""ScienceWorld transcripts under HotSpot's default identity hashes vs one constant hash (``JVM_OPTIONS``).

    python benchmarks/scienceworld_determinism.py --before 6 --repeats 2

For each JVM setting, each target task (a dev variation) is played twice along its gold sequence: in a simulator
that first played ``--before`` other dev variations, and in a fresh one. A turn whose observation differs between
the two is history-dependent: a chain env would read that variation differently after other chains (same seed,
another transcript). The steps are timed as well (per step the fastest of ``--repeats`` replays, the two settings
interleaved), so the last line gives what the constant hash costs per step.
"""

from __future__ import annotations

import argparse
import time

from sage_envs.domains.scienceworld.domain import (
    JVM_OPTIONS,
    ScienceWorldDomain,
    canonical,
    gold_sequence,
    parse_task_id,
    start_simulator,
)

SETTINGS = {"default hashes": "", "constant hash": JVM_OPTIONS}


def play(simulator, task_id: str) -> tuple[list[str], list[float]]:
    """The observations of the task's gold sequence and each step's seconds (step + valid actions, as the env)."""
    name, variation, simplifications = parse_task_id(task_id)
    simulator.load(name, variation, simplifications)
    texts, seconds = [canonical(str(simulator.look()))], []
    for command in gold_sequence(name, variation, simplifications):
        start = time.perf_counter()
        texts.append(canonical(str(simulator.server.step(command))))
        simulator.server.getValidActionObjectCombinationsJSON()
        seconds.append(time.perf_counter() - start)
    return texts, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--families",
        default="chemistry-mix-paint-tertiary-color,chemistry-mix-paint-secondary-color",
        help="comma-separated task families; the first dev variation of each is a target (default: the families "
        "whose chains failed to replay before JVM_OPTIONS)",
    )
    parser.add_argument("--before", type=int, default=6, help="variations the history simulator plays first")
    parser.add_argument("--repeats", type=int, default=2, help="timed fresh replays of each target per setting")
    args = parser.parse_args()
    tasks = ScienceWorldDomain().tasks("dev")
    families = args.families.split(",")
    targets = [next(t.task_id for t in tasks if t.task_type == family) for family in families]
    others = list(dict.fromkeys(t.task_id for t in tasks if t.task_type not in families))
    history = others[: args.before]
    differing = dict.fromkeys(SETTINGS, 0)
    fastest: dict[str, dict[tuple[str, int], float]] = {setting: {} for setting in SETTINGS}
    turns = 0
    for target in targets:
        for setting, options in SETTINGS.items():
            used, fresh = start_simulator(options), start_simulator(options)
            try:
                for task in history:
                    play(used, task)
                after, _ = play(used, target)
                first, _ = play(fresh, target)
                differing[setting] += sum(a != b for a, b in zip(after, first, strict=True))
                for _ in range(args.repeats):
                    _, seconds = play(fresh, target)
                    for i, s in enumerate(seconds):
                        key = (target, i)
                        fastest[setting][key] = min(s, fastest[setting].get(key, s))
            finally:
                used.close()
                fresh.close()
        turns += len(after)
        print(f"{target}: {len(after)} turns; differing so far {differing}", flush=True)
    print(f"{len(targets)} targets after {len(history)} other variations, {turns} turns per setting:")
    for setting in SETTINGS:
        ms = 1000 * sum(fastest[setting].values()) / len(fastest[setting])
        print(f"  {setting:>15}: {differing[setting]} turns read differently after the history; {ms:.1f} ms/step")
    ratio = sum(fastest["constant hash"].values()) / sum(fastest["default hashes"].values())
    print(f"constant hash / default hashes, step time: {ratio:.2f}x")


if __name__ == "__main__":
    main()
