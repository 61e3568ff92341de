"""Every registered env through the checks its tests make, printed as one table (issue 22, "Show").

    python examples/check_envs.py                       # every registered env id
    python examples/check_envs.py --env SageChain-TextWorld-v0 --strings 2000

Per env: Gymnasium's ``check_env`` (and the warnings it gave), two copies reset with the same seed and stepped with
the same random admissible commands (their transcripts compared turn by turn), and random printable strings and
near-misses of the action grammar sent as actions (each must come back flagged ``info["action_valid"] = False``;
an exception out of ``step`` is counted, not raised). The checks are those of
``tests/sage_envs/test_registered_envs.py``, run by the same helpers; an env whose optional engine is missing
(ScienceWorld: the package or Java) is listed with the reason and skipped.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

from gymnasium.utils.env_checker import check_env

import sage_envs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checks live with the tests
from tests.sage_envs.test_registered_envs import (  # noqa: E402
    RANDOM_STRINGS,
    make_env,
    missing_engine,
    random_strings,
    rollout,
)


def checker(env_id: str) -> str:
    env = make_env(env_id)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # Not the checker's: scienceworld's simulator leaves a temporary folder to the garbage collector.
            warnings.simplefilter("ignore", ResourceWarning)
            check_env(env.unwrapped)
    except Exception as error:  # noqa: BLE001 - the table reports any failure
        return f"FAILS: {type(error).__name__}: {error}"
    finally:
        env.close()
    return f"passes, {len(caught)} warning(s)" + "".join(f"; {w.message}" for w in caught)


def same_seed(env_id: str, seed: int = 7) -> str:
    first, second = rollout(env_id, seed=seed), rollout(env_id, seed=seed)
    differ = [turn for turn, (a, b) in enumerate(zip(first, second, strict=True)) if a != b]
    return f"identical, {len(first)} turns" if not differ else f"DIFFER from turn {differ[0]}"


def fuzz(env_id: str, n: int) -> str:
    try:
        invalid = random_strings(env_id, n)
    except Exception as error:  # noqa: BLE001 - an exception out of step is what this check counts
        return f"RAISED {type(error).__name__}: {error}"
    return f"{invalid:,} / {n:,} flagged invalid, 0 exceptions"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", action="append", choices=sage_envs.ENV_IDS, help="an env id (default: all)")
    parser.add_argument("--strings", type=int, default=None, help="random strings per env (default: the tests')")
    args = parser.parse_args()
    print("| env | check_env | same seed, two copies | random strings as actions | seconds |")
    print("|---|---|---|---|---|")
    for env_id in args.env or sage_envs.ENV_IDS:
        reason = missing_engine(env_id)
        if reason is not None:
            print(f"| {env_id} | skipped: {reason} | | | |", flush=True)
            continue
        start = time.perf_counter()
        n = args.strings or RANDOM_STRINGS.get(env_id, 10_000)
        cells = [checker(env_id), same_seed(env_id), fuzz(env_id, n)]
        print(f"| {env_id} | {' | '.join(cells)} | {time.perf_counter() - start:.0f} |", flush=True)


if __name__ == "__main__":
    main()
