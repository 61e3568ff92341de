"""Make an env and play it: the scripted ALFWorld expert plays a few chains, defining and reusing skills.

python examples/play_expert.py --chains 3 --split valid_seen
"""

from __future__ import annotations

import argparse

import gymnasium as gym

import sage_envs  # noqa: F401  (registers the env ids)
from sage_envs.domains.alfworld import AlfworldExpert


def play_chain(env: gym.Env, expert: AlfworldExpert, chain: int, verbose: bool) -> dict:
    """Play one chain with the expert; return per-task outcomes, turns and skill events."""
    obs, info = env.reset(options={"chain": chain})
    expert.reset()
    turns, primitive, created, reused = 0, 0, [], []
    if verbose:
        print(f"\n=== chain {chain} | task 1: {obs['task']}")
    terminated = False
    while not terminated:
        action = expert.act(obs, info)
        obs, reward, terminated, _, info = env.step(action)
        turns += 1
        primitive += info["primitive_steps"]
        created += info["skills_created"]
        reused += info["skill_reuse"]
        if verbose:
            print(f"> {action}".replace("\n", "\n  "))
            print(f"  {(info['previous_observation'] or obs['observation'])[:300]}".replace("\n", "\n  "))
            if info["new_task"]:
                print(f"--- task {info['task_index'] + 2}: {obs['task']}")
    return {"successes": info["chain_successes"], "turns": turns, "primitive_steps": primitive,
            "created": created, "reused": reused}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=3, help="how many chains to play")
    parser.add_argument("--split", default="valid_seen", choices=["train", "valid_seen", "valid_unseen"])
    parser.add_argument("--source", default="generated", choices=["generated", "official"])
    parser.add_argument("--skills", default="program", choices=["program", "none"])
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    args = parser.parse_args()

    env = gym.make("SageChain-ALFWorld-v0", split=args.split, source=args.source, skills=args.skills)
    expert = AlfworldExpert(use_skills=args.skills != "none")
    results = [play_chain(env, expert, i, not args.quiet) for i in range(min(args.chains, env.unwrapped.num_chains))]
    tasks = [s for r in results for s in r["successes"]]
    print("\n=== summary")
    print(f"chains={len(results)} tasks={len(tasks)} TGC={sum(tasks) / len(tasks):.2f} "
          f"SGC={sum(all(r['successes']) for r in results) / len(results):.2f} "
          f"turns/task={sum(r['turns'] for r in results) / len(tasks):.1f} "
          f"engine steps/task={sum(r['primitive_steps'] for r in results) / len(tasks):.1f}")  # fmt: skip
    print(f"skills created: {sorted({n for r in results for n in r['created']})}")
    print(f"skill reuses: {sum(len(r['reused']) for r in results)}")
    env.close()


if __name__ == "__main__":
    main()
