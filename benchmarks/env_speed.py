"""Engine steps/s vs chain-env steps/s on the same games and command sequences, side by side.

    python benchmarks/env_speed.py --games 4 --steps 30

Both columns replay one fixed command sequence per game (admissible commands picked by a seeded rng), so the ratio
is the chain env's overhead over the bare engine (skill rendering, info dicts, admissible checks). A reset is a
game load plus the engine's reset in both columns.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import sage_envs  # noqa: F401


def command_sequence(game, steps: int, rng: np.random.Generator) -> list[str]:
    game.reset()
    commands = []
    for _ in range(steps):
        admissible = game.admissible_commands()
        command = admissible[int(rng.integers(len(admissible)))]
        commands.append(command)
        if game.step(command).won:
            break
    return commands


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--split", default="valid_seen")
    args = parser.parse_args()

    env = gym.make("SageChain-ALFWorld-v0", chain_length=1, split=args.split, max_steps_per_task=10_000).unwrapped
    rng = np.random.default_rng(0)
    engine_time = env_time = engine_reset = env_reset = 0.0
    n_steps = 0
    for chain in range(args.games):
        (task,) = env.chains[chain]
        commands = command_sequence(env.domain.load(task), args.steps, rng)

        # Both columns start from a freshly loaded game, so neither profits from the other's warm caches.
        start = time.perf_counter()
        game = env.domain.load(task)
        game.reset()
        engine_reset += time.perf_counter() - start
        start = time.perf_counter()
        for command in commands:
            game.step(command)
            game.admissible_commands()
        engine_time += time.perf_counter() - start
        game.close()

        start = time.perf_counter()
        env.reset(options={"chain": chain})
        env_reset += time.perf_counter() - start
        start = time.perf_counter()
        for command in commands:
            env.step(command)
        env_time += time.perf_counter() - start
        n_steps += len(commands)

    print(f"games={args.games} steps={n_steps}")
    print(f"{'':12s}{'steps/s':>12s}{'resets/s':>12s}")
    print(f"{'engine':12s}{n_steps / engine_time:12.1f}{args.games / engine_reset:12.2f}")
    print(f"{'chain env':12s}{n_steps / env_time:12.1f}{args.games / env_reset:12.2f}")
    print(f"chain env / engine time per step: {env_time / engine_time:.3f}x")


if __name__ == "__main__":
    main()
