"""How long a policy's prompt remembers what one command told it: the expert plays, the prompts are rendered.

    python examples/prompt_memory.py --env SageChain-TextWorld-v0 --split train --chains 10 \
        --remember "examine cookbook" --history 1 3 6 30

A policy sees the task, its last ``history_turns`` (observation, action) pairs, a list of its earlier actions and
the current observation (``LLMPolicy.prompt``). Where a task needs something one observation said many turns
earlier (a TextWorld recipe is read once, from the cookbook, and followed for the rest of the task), a short window
drops it. The domain's expert plays the first chains of a split without skills; at each of its turns the prompt
the policy would get is rendered at every history window asked for, and the script counts, over the turns that
come after the task's first command starting with ``--remember``, the share whose prompt still holds what that
command returned. It prints one markdown row per window, with the mean prompt length in the tiny model's tokens
(what a window costs), and how many of the expert's turns are moves (commands starting with ``--move``), which
depend on the house's map rather than on anything a prompt says.
"""

from __future__ import annotations

import argparse
import json

import gymnasium as gym

import sage_envs  # noqa: F401  (registers the env ids)
from sage_agents.models import build_tiny_model
from sage_agents.policy import LLMPolicy
from sage_envs import domain_class

HELD_CHARS = 200
"""A reply counts as held when its first this many characters are in the prompt (history turns are cut at 600)."""


def expert_turns(env_id: str, split: str, chains: int, **env_kwargs) -> list[list[tuple[dict, str, str]]]:
    """Each task the expert played, as its turns ``(observation, action, reply)``, tasks in chain order."""
    env = gym.make(env_id, split=split, skills="none", **env_kwargs)
    expert = domain_class(env_id).expert(use_skills=False)
    tasks = []
    for chain in range(chains):
        obs, info = env.reset(seed=chain, options={"chain": chain})
        expert.reset()
        turns, done = [], False
        while not done:
            action = expert.act(obs, info)
            following, _, terminated, truncated, info = env.step(action)
            reply = info["previous_observation"] if info["new_task"] else following["observation"]
            turns.append((obs, action, reply))
            if info["new_task"] or terminated or truncated:
                tasks.append(turns)
                turns = []
            obs, done = following, terminated or truncated
    env.close()
    return tasks


def memory_row(policy: LLMPolicy, tasks: list[list[tuple[dict, str, str]]], remember: str) -> dict:
    """Turns after the remembered command, how many of their prompts hold its reply; the mean prompt tokens."""
    after = held = tokens = turns = 0
    for task in tasks:
        history, reply = [], None
        for obs, action, following in task:
            prompt = policy.prompt(obs, history, ())
            tokens += len(policy.tokenizer(prompt, add_special_tokens=False).input_ids)
            turns += 1
            if reply is not None:
                after += 1
                held += reply.strip()[:HELD_CHARS] in prompt
            if reply is None and action.startswith(remember):
                reply = following
            history.append((obs["observation"], action))
    return {"after": after, "held": held, "tokens": tokens / max(1, turns)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="SageChain-TextWorld-v0", help="a registered env id")
    parser.add_argument("--split", default="train", help="the split whose first chains the expert plays")
    parser.add_argument("--chains", type=int, default=10, help="chains played")
    parser.add_argument("--remember", default="examine cookbook", help="the command whose reply is followed")
    parser.add_argument("--move", default="go ", help="commands counted as moves (a prefix)")
    parser.add_argument("--history", type=int, nargs="+", default=[1, 3, 6, 30], help="history windows (turns)")
    parser.add_argument("--env-kwargs", type=json.loads, default={"max_steps_per_task": 30}, help="JSON, to gym.make")
    args = parser.parse_args()

    tasks = expert_turns(args.env, args.split, args.chains, **args.env_kwargs)
    model, tokenizer = build_tiny_model(hidden=32, layers=1, env_id=args.env)  # only renders prompts
    actions = [action for task in tasks for _, action, _ in task]
    read = sum(any(action.startswith(args.remember) for _, action, _ in task) for task in tasks)
    moves = sum(action.startswith(args.move) for action in actions)
    print(f"{args.env} {args.split}: {args.chains} chains, {len(tasks)} tasks, {len(actions)} expert turns; "
          f"{read} tasks run {args.remember!r}; {moves} turns are moves ({args.move.strip()!r})")  # fmt: skip
    print(f"| history turns | turns after {args.remember!r} | its reply in the prompt | prompt tokens |")
    print("|---|---|---|---|")
    for window in args.history:
        row = memory_row(LLMPolicy(model, tokenizer, history_turns=window), tasks, args.remember)
        share = 100 * row["held"] / max(1, row["after"])
        print(f"| {window} | {row['after']} | {row['held']} ({share:.0f}%) | {row['tokens']:.0f} |")


if __name__ == "__main__":
    main()
