"""Define and reuse a skill: write two skills in the skill language, reuse them in the next task, save and load them.

    python examples/define_skill.py                    # the first valid_seen chain of two "put a X in Y" tasks
    python examples/define_skill.py --chain 15 --split valid_seen

In task 1 the script defines ``find_and_take(obj)`` (visit each receptacle, open it when the observation says it is
closed, take the first object whose name is ``obj``, stop) and ``put_in(obj, place)`` (which calls it, then puts
what it holds on ``place``), calling ``put_in`` in the same action: ``info["skills_created"]`` names each skill as
the env stores it. Task 2 calls ``put_in`` again, a reuse (``info["skill_reuse"]``). The library is then written
as SKILL.md folders, read back, and handed to the next chain (``reset(options={"skill_library": ...})``), whose
tasks call the skills without defining them: used, but not reused (they were not created in that chain).
The grammar is in docs/skills.md.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

import gymnasium as gym

import sage_envs  # noqa: F401  (registers the env ids)
from sage_envs.skills import SkillLibrary

FIND_AND_TAKE = """\
skill find_and_take(obj):
    # Visit each receptacle, opening closed ones, and take the first obj found.
    for r in receptacles:
        go to {r}
        if "is closed" in observation:
            open {r}
        for o in objects:
            if " {obj} " in " {o} ":
                take {o} from {r}
                return"""

# The spaces around the names keep "apple" from matching "pineapple 1", and "cup" from "cupboard".
PUT_IN = """\
skill put_in(obj, place):
    # Find obj, take it, and put it in or on the first receptacle named place.
    call find_and_take({obj})
    for p in receptacles:
        if " {place} " in " {p} ":
            go to {p}
            if "is closed" in observation:
                open {p}
            for o in inventory:
                move {o} to {p}
            return"""

TASK = re.compile(r"put (?:a|an|some) (\w+) (?:in|on) (\w+)")
"""The task text of ``pick_and_place_simple``: ``put a tomato in sinkbasin``, ``put some spraybottle on toilet``."""


def task_names(task: str) -> tuple[str, str]:
    """The object and the receptacle named by a ``put a X in Y`` task."""
    match = TASK.fullmatch(task)
    if match is None:
        raise ValueError(f"task {task!r} is not of the form 'put a X in Y'; pick a pick_and_place_simple chain.")
    return match.group(1), match.group(2)


def put_chains(env: gym.Env) -> list[int]:
    """The full-length chains whose every task is a ``put a X in Y`` task (``pick_and_place_simple``)."""
    return [i for i, chain in enumerate(env.unwrapped.chains) if len(chain) == env.unwrapped.chain_length
            and all(task.task_type == "pick_and_place_simple" for task in chain)]  # fmt: skip


def act(env: gym.Env, action: str) -> tuple[dict, dict]:
    """Send one action, print what came back and return ``(obs, info)``."""
    obs, _, _, _, info = env.step(action)
    lines = action.splitlines()
    feedback = (info["previous_observation"] or obs["observation"]).splitlines()
    print(f"> {lines[0]}" + (f" ... {lines[-1]} ({len(lines)} lines)" if len(lines) > 1 else ""))
    print(
        f"  valid={info['action_valid']} engine steps={info['primitive_steps']} won={info['task_success']} "
        f"created={info['skills_created']} used={info['skills_used']} reused={info['skill_reuse']}"
    )
    print(f"  last feedback: {feedback[-1] if feedback else ''}")
    return obs, info


def call_put_in(env: gym.Env, task: str) -> tuple[dict, dict]:
    """Solve a ``put a X in Y`` task with one call of the stored skill."""
    obj, place = task_names(task)
    return act(env, f"call put_in({obj}, {place})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="valid_seen", choices=["train", "valid_seen", "valid_unseen"])
    parser.add_argument("--chain", type=int, help="a chain of pick_and_place_simple tasks (default: the first)")
    args = parser.parse_args()

    env = gym.make("SageChain-ALFWorld-v0", split=args.split, skills="program")
    chains = put_chains(env)
    chain = chains[0] if args.chain is None else args.chain
    obs, _ = env.reset(options={"chain": chain})
    print(f"=== chain {chain} of {args.split}, task 1: {obs['task']}")
    act(env, FIND_AND_TAKE)  # a definition without calls is stored as soon as it parses
    obj, place = task_names(obs["task"])
    obs, info = act(env, f"{PUT_IN}\ncall put_in({obj}, {place})")  # defined and called in one action
    print(f"=== task 2: {obs['task']}")
    obs, info = call_put_in(env, obs["task"])
    print(f"chain {chain}: successes {info['chain_successes']}, library {info['skill_library']}")

    with tempfile.TemporaryDirectory() as tmp:
        env.unwrapped.library.save(tmp)  # one SKILL.md folder per skill
        print(f"=== saved: {sorted(p.name for p in Path(tmp).iterdir())}")
        print((Path(tmp) / "put-in" / "SKILL.md").read_text().strip())
        library = SkillLibrary.load(tmp)
    following = next((c for c in chains if c > chain), chains[0])
    obs, _ = env.reset(options={"chain": following, "skill_library": library})
    print(f"=== chain {following} with the loaded library {library.names()}")
    for task in range(env.unwrapped.chain_length):
        print(f"=== task {task + 1}: {obs['task']}")
        obs, info = call_put_in(env, obs["task"])
    print(f"chain {following}: successes {info['chain_successes']}")
    env.close()


if __name__ == "__main__":
    main()
