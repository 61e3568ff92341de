"""How much room a policy leaves RL: pass@k per task from an evaluation that sampled each chain several times.

    python -m leaderboard.evaluate --agent grpo --label sft-sampled --seeds 0 1 2 3 4 5 6 7 --output runs/passk \\
        --agent-kwargs '{"model_path": "runs/demo/sft/model", "greedy": false, ...}' ...
    python examples/pass_at_k.py runs/passk/sft-sampled__SageChain-ALFWorld-v0__valid_unseen__default.json \\
        --greedy runs/demo/results/sft__SageChain-ALFWorld-v0__valid_unseen__default.json

GRPO moves probability toward what the policy's own samples did when they did better than their group. A task that
no sample completes gives no such signal, so the share of tasks that at least one of k samples completes (pass@k)
bounds what sampling-based RL can find in k tries, and the tasks that greedy play loses while some sample wins are
where it could lift the greedy policy that the leaderboard evaluates. Each task of each chain is one problem; with
n samples of which c succeeded, pass@k is the unbiased estimate 1 - C(n-c, k) / C(n, k) (Chen et al. 2021, "Evaluating
Large Language Models Trained on Code"), averaged over tasks; pass@1 is the sampled TGC. ``--greedy``: a summary of
the same chains played greedily (one seed), whose won and lost tasks are split by whether some sample won them.
``--by-type`` adds a column per task type (ALFWorld's six: a policy's room differs between them).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from math import comb

from leaderboard.evaluate import summary_episodes

Task = tuple[int, int]
"""A task of an evaluation: ``(chain, position in the chain)``."""


def task_outcomes(summary_path: str) -> tuple[dict[Task, list[bool]], dict[Task, str]]:
    """Each task's successes, one per seed that played its chain, and its task type (``""`` where the log names
    none), from the episode log a summary counts."""
    _, records = summary_episodes(summary_path)
    outcomes: dict[Task, list[bool]] = defaultdict(list)
    types: dict[Task, str] = {}
    for record in records:
        names = record.get("task_types") or [""] * len(record["success"])
        for position, (success, name) in enumerate(zip(record["success"], names, strict=True)):
            outcomes[record["chain"], position].append(bool(success))
            types[record["chain"], position] = name
    return dict(outcomes), types


def pass_at_k(n: int, c: int, k: int) -> float:
    """The probability that at least one of k samples drawn without replacement from n, c of them correct, is."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    return 1.0 - comb(n - c, k) / comb(n, k)


def mean_pass_at_k(outcomes: dict[Task, list[bool]], k: int) -> float:
    """pass@k averaged over the tasks (each needs at least k samples)."""
    return sum(pass_at_k(len(s), sum(s), k) for s in outcomes.values()) / len(outcomes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sampled", help="summary JSON of an evaluation that played each chain at several seeds")
    parser.add_argument("--greedy", help="summary JSON of the same chains played greedily")
    parser.add_argument("--k", type=int, nargs="+", default=None, help="k values (default: 1, 2, 4, ... up to n)")
    parser.add_argument("--by-type", action="store_true", help="also a column per task type")
    args = parser.parse_args()
    outcomes, types = task_outcomes(args.sampled)
    n = min(len(s) for s in outcomes.values())
    ks = args.k or [2**i for i in range(n.bit_length()) if 2**i <= n]
    if max(ks) > n or min(ks) < 1:
        parser.error(f"k must be 1 to {n}: some task was sampled only {n} times")
    print(f"{len(outcomes)} tasks, {n} samples each at least")
    columns = {"pass@k %": outcomes}  # header -> the tasks it averages over
    if args.by_type:
        columns = {f"all, {len(outcomes)} tasks": outcomes}
        for name in sorted(set(types.values())):
            group = {task: s for task, s in outcomes.items() if types[task] == name}
            columns[f"{name}, {len(group)}"] = group
    print("| k | " + " | ".join(columns) + " |\n|---|" + "---|" * len(columns))
    for k in ks:
        print(f"| {k} | " + " | ".join(f"{100 * mean_pass_at_k(tasks, k):.1f}" for tasks in columns.values()) + " |")
    if args.greedy:
        greedy, _ = task_outcomes(args.greedy)
        common = sorted(set(greedy) & set(outcomes))
        if not common:
            raise SystemExit(f"{args.greedy} and {args.sampled} played no task in common")
        won = [t for t in common if greedy[t][0]]
        lost = [t for t in common if not greedy[t][0]]
        rescued = [t for t in lost if any(outcomes[t])]
        dropped = [t for t in won if not any(outcomes[t])]
        print(
            f"greedy: {len(won)} of {len(common)} tasks won ({100 * len(won) / len(common):.1f}%); of its "
            f"{len(lost)} lost tasks some sample won {len(rescued)}, so greedy play that won those would complete "
            f"{100 * (len(won) + len(rescued)) / len(common):.1f}%; {len(dropped)} tasks greedy won no sample did"
        )


if __name__ == "__main__":
    main()
