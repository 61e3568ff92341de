"""What an ALFWorld agent took: per evaluation episode log, how often it picked up an object the task is not about.

    python examples/objects_taken.py runs/demo/results/sft__SageChain-ALFWorld-v0__valid_unseen__default.episodes.jsonl

An ALFWorld task names one object type ("put a clean soapbar in toilet"; its id carries it:
``pick_clean_then_place_in_recep-SoapBar-None-Toilet``). From each task's ``actions`` in a leaderboard episode log
(``leaderboard.evaluate`` writes one beside each summary) the script counts the tasks won, the tasks in which the agent
took an object of another type (and how many of those it lost), the tasks it lost without ever taking the task's
object, and the turns that put an object back where it was taken the turn before. One markdown row per log. Plain
commands only: a skill call's own commands are not in ``actions``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

TASK_ID = re.compile(r"(?:pick_\w+|look_at_obj_in_light)-([A-Za-z]+)-")
"""The object type in an ALFWorld task id (generated and official games alike)."""
TAKE = re.compile(r"take ([a-z]+) \d+ from (.+)")
PUT = re.compile(r"(?:move ([a-z]+) \d+ to|put ([a-z]+) \d+ in/on) (.+)")


def task_object(task_id: str) -> str:
    """The object type a task id names, lower case (``soapbar``)."""
    found = TASK_ID.search(task_id)
    if not found:
        raise ValueError(f"not an ALFWorld task id: {task_id!r}")
    return found[1].lower()


def task_counts(task_id: str, actions: list[str], won: bool) -> dict[str, int]:
    """One task's counts (each 0 or 1 but ``put_back``, the number of turns that undid the turn before)."""
    wanted = task_object(task_id)
    taken = [m[1] for a in actions if (m := TAKE.fullmatch(a))]
    put_back = 0
    for before, action in zip(actions, actions[1:], strict=False):
        take, put = TAKE.fullmatch(before), PUT.fullmatch(action)
        put_back += bool(take and put and (put[1] or put[2]) == take[1] and put[3] == take[2])
    other = any(kind != wanted for kind in taken)
    return {
        "tasks": 1,
        "won": int(won),
        "took_other": int(other),
        "lost_after_other": int(other and not won),
        "lost_never_took_it": int(not won and wanted not in taken),
        "put_back": put_back,
    }


def log_counts(path: Path) -> dict[str, int]:
    """The sums of :func:`task_counts` over every task of an episode log."""
    totals: dict[str, int] = {}
    for line in path.read_text().splitlines():
        episode = json.loads(line)
        for task_id, actions, won in zip(episode["task_ids"], episode["actions"], episode["success"], strict=True):
            for key, value in task_counts(task_id, actions, won).items():
                totals[key] = totals.get(key, 0) + value
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", type=Path, help="leaderboard episode logs (*.episodes.jsonl)")
    args = parser.parse_args()
    print("| log | tasks | won | took another object | lost after that | lost, never took the task's object "
          "| put back at once (turns) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for path in args.logs:
        c = log_counts(path)
        n = c["tasks"]
        print(f"| {path} | {n} | {c['won']} | {c['took_other']} ({100 * c['took_other'] / n:.1f}%) "
              f"| {c['lost_after_other']} | {c['lost_never_took_it']} | {c['put_back']} |")  # fmt: skip


if __name__ == "__main__":
    main()
