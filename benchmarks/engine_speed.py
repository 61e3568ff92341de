"""TextWorld's PDDL engine vs the native engine: the same games and command sequences, in one run.

    python benchmarks/engine_speed.py --games 10 --steps 50      # official games ($ALFWORLD_DATA)
    python benchmarks/engine_speed.py --games 6 --generated      # games built from the wheel's layouts

For each game one seeded command sequence is drawn (85% admissible commands, 15% invalid ones), then played
on TextWorld's engine (``AlfworldGame``: PddlEnv + AlfredDemangler, as ALFWorld runs it) and on
``NativeAlfworldGame``. A step is what an RL env does per turn: ``step(command)`` then
``admissible_commands()``. The native engine plays each sequence once on the freshly loaded game (cold: its
per-game caches of command texts and ``go to`` tables are empty, which is what an env user sees, since the chain
env loads a fresh game for every task), then replays it ``--repeat`` times (warm, a reset before each); both
rates are printed side by side with their ratio. Both transcripts are compared (feedback, won, admissible
commands at every step): the speed-up only counts when they are identical.

Times are CPU seconds of this process (``time.process_time``; fast-downward runs in-process, so it is
counted), which a busy shared machine disturbs far less than wall time; wall-clock rates are printed too.

Memory per env: native = Python heap of a fresh env (its compiled game + state), and what one more env
sharing the compiled game adds; TextWorld = the process's RSS growth when its first game loads
(fast-downward's library copy, the grounded task, TextWorld's state) plus the Python heap it allocates.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sage_envs.domains.alfworld.native_engine import NativeAlfworldGame  # noqa: E402

INVALID = ("look around", "take all", "go to nowhere 1", "xyzzy", "")


class Clock:
    """Accumulates CPU and wall time of the blocks it times."""

    def __init__(self) -> None:
        self.cpu = self.wall = 0.0

    def __enter__(self) -> Clock:
        self._cpu, self._wall = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.cpu += time.process_time() - self._cpu
        self.wall += time.perf_counter() - self._wall


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def command_sequence(game_path: Path, steps: int, seed: int) -> list[str]:
    """A seeded walk drawn on the native engine (identical transcripts make it valid on both)."""
    rng = random.Random(seed)
    game = NativeAlfworldGame(game_path)
    game.reset()
    commands = []
    for _ in range(steps):
        admissible = game.admissible_commands()
        if rng.random() < 0.15:
            command = rng.choice(INVALID)
        else:
            others = [c for c in admissible if not c.startswith("go to ")]
            command = rng.choice(others if others and rng.random() < 0.5 else admissible)
        commands.append(command)
        game.step(command)
    return commands


def play(game, commands: list[str]) -> list[tuple[str, bool, tuple[str, ...]]]:
    transcript = []
    for command in commands:
        result = game.step(command)
        transcript.append((result.observation, result.won, tuple(game.admissible_commands())))
    return transcript


def official_games(data_dir: Path, splits: list[str], count: int) -> list[Path]:
    from sage_envs.domains.alfworld.official import official_games as listing

    games = []
    for split in splits:
        if (data_dir / "json_2.1.1" / split).is_dir():
            games += [folder / "game.tw-pddl" for folder in listing(data_dir, split)]
    if len(games) > count:  # spread over the sorted list, so that every task type is in
        games = [games[int(i * len(games) / count)] for i in range(count)]
    return games


def generated_games(count: int) -> list[Path]:
    sys.path.insert(0, str(ROOT / "tests" / "sage_envs" / "domains"))
    from test_native_engine import generate_games

    folder = Path(tempfile.mkdtemp(prefix="engine_speed_"))
    return generate_games(folder, per_type=max(1, -(-count // 6)))[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=10, help="how many games")
    parser.add_argument("--steps", type=int, default=50, help="commands per game")
    parser.add_argument("--repeat", type=int, default=20, help="native replays of each sequence")
    parser.add_argument("--splits", default="valid_seen,valid_train", help="official splits to draw from")
    parser.add_argument("--data-dir", default=os.environ.get("ALFWORLD_DATA", str(ROOT.parent / "shared" / "alfworld")))
    parser.add_argument("--generated", action="store_true", help="generated games instead of official ones")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    if args.generated:
        games, source = generated_games(args.games), "generated (wheel layouts)"
    else:
        games, source = official_games(Path(args.data_dir), args.splits.split(","), args.games), "official"
    if not games:
        sys.exit(f"no games found under {args.data_dir}; set $ALFWORLD_DATA or pass --generated")

    argv = list(sys.argv)
    from sage_envs.domains.alfworld.textworld_engine import AlfworldGame  # TextWorld + fast-downward

    sys.argv = argv  # fast-downward overwrites it

    stock_load, stock_reset, stock_steps = Clock(), Clock(), Clock()
    native_load, native_reset, native_steps, native_step_only = Clock(), Clock(), Clock(), Clock()
    native_cold = Clock()  # the first play of each sequence on its freshly loaded game
    n_steps = n_native_steps = n_native_resets = 0
    identical = True
    stock_rss = stock_heap = 0
    print(f"{len(games)} {source} games x {args.steps} commands (native: x{args.repeat} replays); CPU time\n")
    print(f"{'':<62} {'TextWorld':>9} {'native us/step':>22} {'cold /':>6} {'ratio TextWorld /':>17}")
    print(f"{'game':<62} {'ms/step':>9} {'cold':>10} {'warm':>11} {'warm':>6} {'cold':>8} {'warm':>8}")
    for index, game_path in enumerate(games):
        commands = command_sequence(game_path, args.steps, args.seed + index)

        # TextWorld: load (first reset included), one more reset, the sequence.
        gc.collect()
        rss_before = rss_bytes()
        if index == 0:
            tracemalloc.start()
        with stock_load:
            stock = AlfworldGame(game_path)
            stock.reset()
        if index == 0:
            stock_heap = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            stock_rss = rss_bytes() - rss_before
        with stock_reset:
            stock.reset()
        cpu_before = stock_steps.cpu
        with stock_steps:
            expected = play(stock, commands)
        stock.close()
        n_steps += len(commands)
        per_stock = (stock_steps.cpu - cpu_before) / len(commands)

        # Native: load, the first (cold) play, checked against TextWorld's transcript, then warm replays.
        with native_load:
            native = NativeAlfworldGame(game_path)
            native.reset()
        cpu_before = native_cold.cpu
        with native_cold:
            transcript = play(native, commands)
        per_cold = (native_cold.cpu - cpu_before) / len(commands)
        identical &= transcript == expected
        cpu_before = native_steps.cpu
        for _ in range(args.repeat):
            with native_reset:
                native.reset()
            with native_steps:
                play(native, commands)
            native.reset()
            with native_step_only:
                for command in commands:
                    native.step(command)
        n_native_resets += args.repeat
        n_native_steps += len(commands) * args.repeat
        per_native = (native_steps.cpu - cpu_before) / (len(commands) * args.repeat)
        name = f"{game_path.parent.parent.name[:48]}/{game_path.parent.name[-12:]}"
        print(
            f"{name:<62} {per_stock * 1e3:9.1f} {per_cold * 1e6:10.1f} {per_native * 1e6:11.1f}"
            f" {per_cold / per_native:6.1f} {per_stock / per_cold:8.0f} {per_stock / per_native:8.0f}"
        )

    # Memory of native envs.
    gc.collect()
    tracemalloc.start()
    native = NativeAlfworldGame(games[0])
    native.reset()
    play(native, commands[:10])
    native_heap = tracemalloc.get_traced_memory()[0]
    second = NativeAlfworldGame(compiled=native.compiled)
    second.reset()
    second.admissible_commands()
    shared_heap = tracemalloc.get_traced_memory()[0] - native_heap
    tracemalloc.stop()

    def row(label: str, stock: float, native: float, digits: int = 0) -> None:
        print(f"{label:<36} {stock:14.2f} {native:14.{digits}f} {native / stock:9.0f}x")

    print()
    print(f"transcripts identical (feedback, won, admissible, every step): {'yes' if identical else 'NO'}")
    print(f"{'':<36} {'TextWorld':>14} {'native':>14} {'ratio':>10}")
    row("steps/s (step + admissible), CPU", n_steps / stock_steps.cpu, n_native_steps / native_steps.cpu)
    row("  native's first play (cold), CPU", n_steps / stock_steps.cpu, n_steps / native_cold.cpu)
    row("steps/s (step + admissible), wall", n_steps / stock_steps.wall, n_native_steps / native_steps.wall)
    print(f"{'steps/s (step only), CPU':<36} {'':>14} {n_native_steps / native_step_only.cpu:14.0f}")
    cold, warm = native_cold.cpu / n_steps, native_steps.cpu / n_native_steps
    print(f"native us/step (step + admissible), CPU: cold {cold * 1e6:.1f} (first play of a fresh game),", end=" ")
    print(f"warm {warm * 1e6:.1f} (replays): cold/warm {cold / warm:.1f}x")
    row("resets/s, CPU", len(games) / stock_reset.cpu, n_native_resets / native_reset.cpu)
    row("game loads/s (file -> opening), CPU", len(games) / stock_load.cpu, len(games) / native_load.cpu, 1)
    print(f"{'memory per env, MB':<36} {(stock_rss + stock_heap) / 2**20:14.1f} {native_heap / 2**20:14.2f}")
    print(f"  TextWorld: RSS +{stock_rss / 2**20:.1f} MB, Python heap {stock_heap / 2**20:.1f} MB (first game)")
    print(f"  native: {native_heap / 2**20:.2f} MB, +{shared_heap / 2**10:.0f} KB per extra env (shared game)")
    if not identical:
        sys.exit("transcripts differ: run tests/sage_envs/domains/test_native_engine.py")


if __name__ == "__main__":
    main()
