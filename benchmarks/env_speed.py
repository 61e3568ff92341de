"""Engine steps/s vs chain-env steps/s on the same games and command sequences, side by side.

    python benchmarks/env_speed.py --games 4 --steps 30
    python benchmarks/env_speed.py --env SageChain-TextWorld-v0 --env-kwargs '{"rooms": 6}' --games 3 --repeats 2

Both columns replay one fixed command sequence per game (admissible commands picked by a seeded rng), so the ratio
is the chain env's overhead over the bare engine (admissibility check, skills text, printable observation, info
dict). Per step the engine column calls ``game.step`` and ``game.admissible_commands`` (the env needs both: the
step, and ``info["admissible_commands"]`` for the next turn). A reset is a game load, the engine's reset and the
first state's admissible commands (which the env's reset info holds) in both columns, so the env's first step gets
no state for free.

Each game is replayed ``--repeats`` times per column on a fresh load, the two columns interleaved, and every step is
timed on its own: the ratio sums, per step, the fastest of its repeats (min-of-N timing; a ~0.1 ms step rarely
straddles a preemption, so this stays stable on a busy shared machine, where timing whole replays swings by +-10%).
The timer calls are the same in both columns. The last line gives the whole-replay ratio as well.

The env's library is empty by default; ``--with-skills`` starts every chain from a library of 3 program and 2 guidance
skills (env ``skills="both"``), so the skills text and the ``skill_library`` info list cost something.
"""

from __future__ import annotations

import argparse
import json
import time

import gymnasium as gym
import numpy as np

import sage_envs
from sage_envs import Skill, SkillLibrary
from sage_envs.skills import parse_definition


def command_sequence(game, steps: int, rng: np.random.Generator) -> list[str]:
    game.reset()
    commands = []
    for _ in range(steps):
        admissible = game.admissible_commands()
        command = admissible[int(rng.integers(len(admissible)))]
        commands.append(command)
        result = game.step(command)
        if result.won or result.lost:  # the chain env ends the task there (a lost task: ScienceWorld, TextWorld)
            break
    return commands


def skill_library() -> SkillLibrary:
    library = SkillLibrary(
        [
            Skill(name="check_all", kind="guidance", text="Check every receptacle once before you give up."),
            Skill(name="after_look", kind="guidance", text="Stop looking.", trigger="action_pattern", pattern="^look"),
        ]
    )
    for name in ("fetch", "fetch_open", "place"):
        body = "    go to {place}\n    take {obj} from {place}\n"
        skill, _ = parse_definition(f"skill {name}(obj, place):\n{body}")
        skill.description = f"{name}: go to place and take obj from it"
        library.add(skill)
    return library


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--env", default="SageChain-ALFWorld-v0", help="registered env id")
    parser.add_argument("--env-kwargs", type=json.loads, default={}, help="JSON dict for gym.make")
    parser.add_argument("--split", default=None, help="default: the domain's first evaluation split")
    parser.add_argument(
        "--repeats", type=int, default=5, help="replays per game and column (per step, the fastest counts)"
    )
    parser.add_argument("--with-skills", action="store_true", help="start each chain from a 5-skill library")
    args = parser.parse_args()

    skills = "both" if args.with_skills else "program"
    split = args.split or sage_envs.domain_class(args.env).splits[1]
    env = gym.make(
        args.env, chain_length=1, split=split, max_steps_per_task=10_000, skills=skills, **args.env_kwargs
    ).unwrapped
    options = {"skill_library": skill_library()} if args.with_skills else {}
    rng = np.random.default_rng(0)
    engine_steps: list[float] = []  # per step: the fastest of the repeats
    env_steps: list[float] = []
    engine_replay = env_replay = engine_reset = env_reset = 0.0  # per game: the fastest of the repeats, summed
    for chain in range(args.games):
        (task,) = env.chains[chain]
        commands = command_sequence(env.domain.load(task), args.steps, rng)
        runs: dict[str, list[list[float]]] = {"engine": [], "env": []}
        resets: dict[str, list[float]] = {"engine": [], "env": []}
        for _ in range(args.repeats):
            # Both columns start from a freshly loaded game, so neither profits from the other's warm caches.
            start = time.perf_counter()
            game = env.domain.load(task)
            game.reset()
            game.admissible_commands()
            resets["engine"].append(time.perf_counter() - start)
            durations = []
            for command in commands:
                start = time.perf_counter()
                game.step(command)
                game.admissible_commands()
                durations.append(time.perf_counter() - start)
            runs["engine"].append(durations)
            game.close()

            start = time.perf_counter()
            env.reset(options={"chain": chain, **options})
            resets["env"].append(time.perf_counter() - start)
            durations = []
            for command in commands:
                start = time.perf_counter()
                env.step(command)
                durations.append(time.perf_counter() - start)
            runs["env"].append(durations)
        engine_steps += map(min, zip(*runs["engine"], strict=True))
        env_steps += map(min, zip(*runs["env"], strict=True))
        engine_replay += min(map(sum, runs["engine"]))
        env_replay += min(map(sum, runs["env"]))
        engine_reset += min(resets["engine"])
        env_reset += min(resets["env"])

    n_steps = len(engine_steps)
    engine_time, env_time = sum(engine_steps), sum(env_steps)
    library = "5 skills" if args.with_skills else "empty"
    print(f"games={args.games} steps={n_steps} repeats={args.repeats} library={library}")
    print(f"env={args.env} split={split} env_kwargs={args.env_kwargs}")
    print(f"{'':12s}{'steps/s':>12s}{'us/step':>12s}{'resets/s':>12s}")
    for name, total, reset in (("engine", engine_time, engine_reset), ("chain env", env_time, env_reset)):
        print(f"{name:12s}{n_steps / total:12.1f}{1e6 * total / n_steps:12.0f}{args.games / reset:12.2f}")
    print(f"chain env / engine time per step: {env_time / engine_time:.3f}x")
    print(f"(whole replays, fastest per game: {env_replay / engine_replay:.3f}x; noisier on a shared machine)")


if __name__ == "__main__":
    main()
