"""What an ALFWorld agent took: per evaluation episode log, how often it picked up an object the task is not about.

    python examples/objects_taken.py runs/demo/results/sft__SageChain-ALFWorld-v0__valid_unseen__default.episodes.jsonl

An ALFWorld task names one object type ("put a clean soapbar in toilet"; its id carries it:
``pick_clean_then_place_in_recep-SoapBar-None-Toilet``). From each task's ``actions`` in a leaderboard episode log
(``leaderboard.evaluate`` writes one beside each summary) the script counts the tasks won, the tasks in which the agent
took an object of another type (and how many of those it lost), the tasks it lost without ever taking the task's
object, the tasks it lost after taking the task's object back from where it had put it (a two-object task's loop:
the first object placed, then carried off again), and the turns that put an object back where it was taken the
turn before. With ``--expert`` (the log of an expert that played the same chains without skills) it also counts,
among the tasks lost without the task's object, those whose agent never went where the expert took it, and the
distinct places those agents went to (a search that circles), and the lost tasks whose first turn off the expert's
path went somewhere else (both turns a ``go to``: the agent chose where to look, not what to do). Last, the lost
tasks that ended in a cycle: their last :data:`CYCLE_TURNS` actions repeat with a short period (``go to drawer 1``,
``go to drawer 2``, ``go to drawer 1``, ...), which a greedy policy in a deterministic game, its prompt barely changing,
does not leave (``LLMPolicy``'s ``skip_repeated_actions``). One markdown row per log, or with ``--by-type`` per log
and task type. Plain commands only: a skill call's own commands are not in ``actions``.

    python examples/objects_taken.py --by-type \
        --expert leaderboard/results/expert-no-skills__SageChain-ALFWorld-v0__valid_unseen__default.episodes.jsonl \
        runs/rl-vs-sft/results/*__valid_unseen__default.episodes.jsonl
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

TASK_ID = re.compile(r"(pick_\w+|look_at_obj_in_light)-([A-Za-z]+)-")
"""The task type and object type in an ALFWorld task id (generated and official games alike)."""
TAKE = re.compile(r"take (([a-z]+) \d+) from (.+)")
PUT = re.compile(r"(?:move|put) (([a-z]+) \d+) (?:to|in/on) (.+)")
"""Both put grammars: the wheel's ``move X to Y`` and the official games' ``put X in/on Y``."""
Move = tuple[str, str, str, str]
"""A parsed take or put command: ``("take" | "put", object, object type, receptacle)``."""
CYCLE_TURNS = 12
"""A task ended in a cycle when its last this many actions repeat with a period of at most half as many."""


def parse_move(action: str) -> Move | None:
    """The :data:`Move` of a take or put command; None for any other action."""
    for kind, pattern in (("take", TAKE), ("put", PUT)):
        if found := pattern.fullmatch(action):
            return kind, found[1], found[2], found[3]
    return None


def _task_id_parts(task_id: str) -> tuple[str, str]:
    found = TASK_ID.search(task_id)
    if not found:
        raise ValueError(f"not an ALFWorld task id: {task_id!r}")
    return found[1], found[2].lower()


def task_object(task_id: str) -> str:
    """The object type a task id names, lower case (``soapbar``)."""
    return _task_id_parts(task_id)[1]


def task_type(task_id: str) -> str:
    """The task type a task id names (``pick_clean_then_place_in_recep``)."""
    return _task_id_parts(task_id)[0]


def task_counts(task_id: str, actions: list[str], won: bool, expert: list[str] | None = None) -> dict[str, int]:
    """One task's counts (each 0 or 1 but ``put_back``, the number of turns that undid the turn before, and
    ``places_searched``, the distinct places gone to in a task lost without its object). ``expert``: the actions of
    an expert in the same task (None: not known)."""
    wanted = task_object(task_id)
    found_at = expert_find(task_id, expert) if expert is not None else None
    # the first turn off the expert's path; a game is deterministic, so until then both saw the same observations
    off = next(((mine, theirs) for mine, theirs in zip(actions, expert or [], strict=False) if mine != theirs), None)
    moves = [parse_move(action) for action in actions]  # None for the turns that neither take nor put
    taken = [move[2] for move in moves if move and move[0] == "take"]
    put_back = sum(  # a put the very turn after the take, of the same object to the same place
        bool(took and put and took[0] == "take" and put[0] == "put" and (took[1], took[3]) == (put[1], put[3]))
        for took, put in zip(moves, moves[1:], strict=False)
    )
    placed: set[tuple[str, str]] = set()  # (object, receptacle) pairs of the task's type put down so far
    took_back = False
    for verb, obj, kind, place in filter(None, moves):
        if verb == "put" and kind == wanted:
            placed.add((obj, place))
        elif verb == "take" and (obj, place) in placed:
            took_back = True
    other = any(kind != wanted for kind in taken)
    lost_without_it = not won and wanted not in taken
    gone_to = {action for action in actions if action.startswith("go to ")}
    return {
        "tasks": 1,
        "won": int(won),
        "took_other": int(other),
        "lost_after_other": int(other and not won),
        "lost_never_took_it": int(lost_without_it),
        "lost_never_went_to_it": int(lost_without_it and found_at is not None and f"go to {found_at}" not in gone_to),
        "lost_went_elsewhere": int(not won and off is not None and all(a.startswith("go to ") for a in off)),
        "places_searched": len(gone_to) if lost_without_it else 0,
        "lost_took_back_placed": int(not won and took_back),
        "put_back": put_back,
        "lost_in_cycle": int(not won and cycle_period(actions) > 0),
    }


def cycle_period(actions: list[str], turns: int = CYCLE_TURNS) -> int:
    """The shortest period (at most ``turns // 2``) with which the last ``turns`` actions repeat; 0: none, or fewer
    actions."""
    tail = actions[-turns:]
    if len(tail) < turns:
        return 0
    return next((period for period in range(1, turns // 2 + 1) if tail[period:] == tail[:-period]), 0)


def expert_find(task_id: str, actions: list[str]) -> str | None:
    """Where an expert's ``actions`` in a task first took the task's object (None: never)."""
    wanted = task_object(task_id)
    moves = filter(None, map(parse_move, actions))
    return next((place for verb, _, kind, place in moves if (verb, kind) == ("take", wanted)), None)


def expert_paths(path: Path) -> dict[str, list[str]]:
    """An expert's episode log, task id -> its actions in that task (the first time it played the task)."""
    paths: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        episode = json.loads(line)
        for task_id, actions in zip(episode["task_ids"], episode["actions"], strict=True):
            paths.setdefault(task_id, actions)
    return paths


def log_counts(
    path: Path, by_type: bool = False, expert: dict[str, list[str]] | None = None
) -> dict[str, dict[str, int]]:
    """The sums of :func:`task_counts` over every task of an episode log, per task type or all under ``"all"``."""
    totals: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        episode = json.loads(line)
        for task_id, actions, won in zip(episode["task_ids"], episode["actions"], episode["success"], strict=True):
            group = totals.setdefault(task_type(task_id) if by_type else "all", {})
            counts = task_counts(task_id, actions, won, (expert or {}).get(task_id))
            for key, value in counts.items():
                group[key] = group.get(key, 0) + value
    return dict(sorted(totals.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", type=Path, help="leaderboard episode logs (*.episodes.jsonl)")
    parser.add_argument("--by-type", action="store_true", help="one row per log and task type")
    parser.add_argument("--expert", type=Path, help="an expert's episode log of the same chains, played without skills")
    args = parser.parse_args()
    expert = expert_paths(args.expert) if args.expert else None
    print("| log | task type | tasks | won | took another object | lost after that | lost, never took the task's "
          "object | of those, never went where the expert took it | their distinct places (mean) "
          "| lost, first off the expert's path to another place | lost, took back an object it had placed "
          "| put back at once (turns) | lost, ended in a cycle |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for path in args.logs:
        for kind, c in log_counts(path, args.by_type, expert).items():
            n, searched = c["tasks"], c["lost_never_took_it"]
            never_went, elsewhere = (c["lost_never_went_to_it"], c["lost_went_elsewhere"]) if expert else ("-", "-")
            places = f"{c['places_searched'] / searched:.1f}" if searched else "-"
            print(f"| {path} | {kind} | {n} | {c['won']} | {c['took_other']} ({100 * c['took_other'] / n:.1f}%) "
                  f"| {c['lost_after_other']} | {searched} | {never_went} | {places} | {elsewhere} "
                  f"| {c['lost_took_back_placed']} | {c['put_back']} | {c['lost_in_cycle']} |")  # fmt: skip


if __name__ == "__main__":
    main()
