"""How much of a policy model's next-token probability falls on the actions constrained decoding offers it.

    python examples/option_mass.py leaderboard/results/sage__SageChain-TextWorld-v0__valid__default.json --chains 8
    python examples/option_mass.py leaderboard/results/sft__SageChain-TextWorld-v0__valid__default.json --agent policy

Plays the first chains of a leaderboard entry (its summary JSON: agent, env, agent and env settings) with the
entry's own agent, greedily, and at every turn reads the model's distribution over the completion's first token:
the probability it gives the first tokens of what the turn offers (the admissible commands, ``call``, ``skill``),
and, once the agent has acted, the probability of ending the action there (EOS after the action's tokens).
Constrained decoding acts whatever these are, since it renormalises over what is offered; they say whether the
model learned where an action starts and ends. The demo's ALFWorld SFT model puts 86% (median 97%) on the offered
first tokens, the TextWorld demo's 2.5-epoch model 19% (docs/textworld.md, "Trained agents"); a model that puts
little there acts on what remains of its probability.
"""

from __future__ import annotations

import argparse
import json
import statistics

import gymnasium as gym
import torch

import sage_envs  # noqa: F401  (registers the envs)
from sage_agents.registry import make_agent


def turn_probabilities(policy, prompt: str, action: str, offered: list[str]) -> tuple[float, float]:
    """After ``prompt``: the probability of a first token that begins one of ``offered``, and of EOS right after
    ``action``'s tokens (one forward of prompt + action: the model is causal)."""
    prompt_ids = policy.encode(prompt)
    ids = torch.tensor([[*prompt_ids, *policy.encode_option(action)]])
    with torch.no_grad():
        logits = policy.model(input_ids=ids).logits[0]
    first = logits[len(prompt_ids) - 1].float().softmax(-1)
    firsts = {policy.encode_option(text)[0] for text in offered}
    return float(first[sorted(firsts)].sum()), float(logits[-1].float().softmax(-1)[policy.eos_id])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("summary", help="a leaderboard entry's summary JSON (leaderboard/results/*.json)")
    parser.add_argument(
        "--agent", default=None, help="the registered agent to build (default: the entry's name; `policy` for `sft`)"
    )
    parser.add_argument("--chains", type=int, default=8, help="the entry's first chains to play")
    parser.add_argument("--max-turns", type=int, default=60, help="turns played per chain at most")
    args = parser.parse_args()
    summary = json.loads(open(args.summary).read())
    agent = make_agent(args.agent or summary["agent"], env_id=summary["env"], **summary["agent_kwargs"])
    policy = agent.policy
    env = gym.make(summary["env"], **summary["env_kwargs"])
    prompts = []  # the prompt of each turn, as the agent built it
    build = policy.prompt
    policy.prompt = lambda obs, history, admissible: prompts.append(build(obs, history, admissible)) or prompts[-1]
    masses, ends, kinds = [], [], {"definition": 0, "call": 0, "command": 0}
    for chain in range(args.chains):
        agent.reset()
        obs, info = env.reset(seed=0, options={"chain": chain})
        for _ in range(args.max_turns):
            action = agent.act(obs, info)
            offered = [*info.get("admissible_commands", []), "call", "skill"]
            mass, end = turn_probabilities(policy, prompts[-1], action, offered)
            masses.append(mass)
            ends.append(end)
            kind = "definition" if action.startswith("skill") else "call" if action.startswith("call") else "command"
            kinds[kind] += 1
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
    print(f"{summary['agent']} on {summary['env']} / {summary['split']}, {args.chains} chains, {len(masses)} turns")
    print(
        f"probability on the offered first tokens: mean {statistics.mean(masses):.3f}, "
        f"median {statistics.median(masses):.3f}, turns under 0.5: {sum(m < 0.5 for m in masses)}"
    )
    print(f"probability of EOS after the action taken: mean {statistics.mean(ends):.3f}")
    print("actions taken: " + ", ".join(f"{kind} {n}" for kind, n in kinds.items()))


if __name__ == "__main__":
    main()
