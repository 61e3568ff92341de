"""Wall time of each hostile skill turn in the ALFWorld chain env. Goal: slowest hostile turn < 50 ms.

    python benchmarks/hostile_turns.py --repeats 5

The turns are the corpus of ``tests/sage_envs/skills/hostile_corpus.py`` (the two attacks measured in issue 18,
deep loops, long substitutions, fan-out, recursion), with loops over ``receptacles``. For each turn a fresh chain
is reset, the turn's setup definitions are sent, then only the attacking ``step`` is timed; per turn the fastest of
``--repeats`` runs counts (min-of-N: the machine is shared). Every turn must end invalid within the primitive step
limit. Exits non-zero when the slowest turn misses the goal.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import gymnasium as gym

import sage_envs  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the corpus lives with the tests
from tests.sage_envs.skills.hostile_corpus import hostile_turns  # noqa: E402

GOAL_SECONDS = 0.050


def time_turn(env, turn, chain: int) -> tuple[float, dict]:
    env.reset(options={"chain": chain})
    for action in turn.setup:
        _, _, _, _, info = env.step(action)
        if not info["action_valid"]:
            raise SystemExit(f"{turn.name}: setup definition refused: {info['message']}")
    start = time.perf_counter()
    _, _, _, _, info = env.step(turn.attack)
    return time.perf_counter() - start, info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per turn (the fastest counts)")
    parser.add_argument("--split", default="valid_seen")
    parser.add_argument("--chain", type=int, default=0, help="the chain whose first game the turns play in")
    args = parser.parse_args()

    env = gym.make("SageChain-ALFWorld-v0", split=args.split, max_steps_per_task=1000).unwrapped
    limit = env.limits.max_primitive_steps_per_call
    env.reset(options={"chain": args.chain})
    receptacles = len(env._game.entities()["receptacles"])
    print(f"ALFWorld {args.split} chain {args.chain} ({receptacles} receptacles), limits: {env.limits}")
    print(f"{'hostile turn':42s} {'ms':>8s} {'steps':>5s}  message")
    slowest = ("", 0.0)
    for turn in hostile_turns("receptacles"):
        runs = [time_turn(env, turn, args.chain) for _ in range(args.repeats)]
        seconds, info = min(runs, key=lambda run: run[0])
        if info["action_valid"] or info["primitive_steps"] > limit:
            raise SystemExit(f"{turn.name}: not stopped within the limits: {info}")
        print(f"{turn.name:42s} {seconds * 1e3:8.2f} {info['primitive_steps']:5d}  {info['message'][:70]}")
        slowest = max(slowest, (turn.name, seconds), key=lambda item: item[1])
    env.close()
    met = slowest[1] < GOAL_SECONDS
    print(
        f"slowest hostile turn: {slowest[0]} {slowest[1] * 1e3:.2f} ms "
        f"(goal: slowest hostile turn < {GOAL_SECONDS * 1e3:.0f} ms): {'met' if met else 'MISSED'}"
    )
    if not met:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
