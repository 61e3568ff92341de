"""Was a ReSkill version better than the library it was tested against, comparing within training steps?

Each GRPO step plays one chain, so the arms of a test meet different chains in different proportions (Thompson
sampling moves rollouts to the arm it favours). This test conditions on each step: the step's successes are spread
over its rollouts at random, and the new arm's total is compared with that null distribution (exactly).

    python examples/reskill_within_step.py runs/reskill_alfworld/run4/reskill/lifecycle.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

from sage_agents.reskill.thompson import within_step_p


def within_step_test(steps: list[tuple[int, int, int, int]]) -> tuple:
    """``steps`` = (n_new, successes_new, n_old, successes_old) per step -> (observed, expected, P(>= observed)).

    P is exact (:func:`sage_agents.reskill.thompson.within_step_p`, the p-value the accept decisions log).
    """
    observed = sum(s_new for _, s_new, _, _ in steps)
    expected = sum(n_new * (s_new + s_old) / (n_new + n_old) for n_new, s_new, n_old, s_old in steps if n_new + n_old)
    return observed, expected, within_step_p([(s_new, n_new, s_old, n_old) for n_new, s_new, n_old, s_old in steps])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lifecycle", help="a run's reskill/lifecycle.jsonl")
    args = parser.parse_args()
    tests: dict[int, list[tuple[int, int, int, int]]] = defaultdict(list)
    for line in open(args.lifecycle):
        event = json.loads(line)
        if event["event"] == "tested":
            n_new, n_old = int(event["n_new"]), int(event["n_old"])
            s_new = round((event["success_new"] or 0) * n_new)
            s_old = round((event["success_old"] or 0) * n_old)
            tests[event["version"]].append((n_new, s_new, n_old, s_old))
    every_step = [step for steps in tests.values() for step in steps]
    for version, steps in [*((f"v{v}", steps) for v, steps in tests.items()), ("all tests", every_step)]:
        n_new, s_new, n_old, s_old = (sum(column) for column in zip(*steps, strict=True))
        observed, expected, p = within_step_test(steps)
        print(f"{version}: new {s_new}/{n_new}, old {s_old}/{n_old}; within steps {observed} successes vs "
              f"{expected:.1f} expected, P(>= {observed}) = {p:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
