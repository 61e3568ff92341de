"""Where the rule creator's skills are shown on real ALFWorld failures, and what they say.

    python examples/rule_skills.py --chains 40 --noise 0.2
    python examples/rule_skills.py --chains 40 --noise 0.35 --text

Plays ``--chains`` chains of ``SageChain-ALFWorld-v0`` (``valid_seen``) with a noisy expert (the scripted
expert's command, or a random admissible one with probability ``--noise``), so that the reservoir holds both
successes and failures. For every assertion the engine keeps, the rule creator authors its skill; the script
reports, per skill, its source failures (failed episodes that break the assertion), the share of them in which
the skill is shown at a diagnosed turn (:func:`~sage_agents.reskill.creator.diagnosed_turns`) and the share of
all turns on which it is shown (a ``general`` trigger: 100%, however little it says about the situation).
"""

from __future__ import annotations

import argparse
import random

import gymnasium as gym

import sage_envs  # noqa: F401  (registers the env ids)
from sage_agents.baselines import make_expert
from sage_agents.reskill.assertions import AssertionEngine
from sage_agents.reskill.creator import RuleCreator, shown, source_failures
from sage_agents.reskill.reservoir import Episode


def play(chains: int, noise: float, seed: int = 0, max_steps: int = 20) -> list[Episode]:
    """One :class:`Episode` per task of ``chains`` noisy-expert chains."""
    rng = random.Random(seed)
    env = gym.make("SageChain-ALFWorld-v0", split="valid_seen", skills="guidance", max_steps_per_task=max_steps)
    expert = make_expert(use_skills=False)
    out = []
    for c in range(chains):
        obs, info = env.reset(seed=seed * 1000 + c)
        expert.reset()
        actions, observations, task, task_type, done = [], [], obs["task"], info["task_type"], False
        while not done:
            admissible = list(info["admissible_commands"])
            action = expert.act(obs, info) if rng.random() > noise else rng.choice(admissible)
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
            actions.append(action)
            # a task's last observation is the feedback that ended it (the returned one opens the next task)
            observations.append(info["previous_observation"] if info.get("new_task") else obs["observation"])
            if info.get("new_task") or done:
                out.append(Episode(actions, observations, bool(info["task_success"]), task_type, task))
                actions, observations, task, task_type = [], [], obs["task"], info["task_type"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", type=int, default=40)
    parser.add_argument("--noise", type=float, default=0.2, help="share of random admissible commands")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--text", action="store_true", help="print every skill's text")
    args = parser.parse_args()
    episodes = play(args.chains, args.noise, args.seed)
    wins = sum(ep.success for ep in episodes)
    print(f"{len(episodes)} episodes, {wins} successes")
    creator, total = RuleCreator(), sum(len(ep.actions) for ep in episodes)
    reached, shares = [], []
    for rates in AssertionEngine().refresh(episodes):
        skill, problems = creator.author(rates, episodes)
        if skill is None:
            print(f"--- {rates.assertion.description}: no skill ({problems[-1] if problems else ''})")
            continue
        sources = source_failures(rates, episodes)
        hit = sum(any(shown(skill, ep, t) for t in turns) for ep, turns in sources) / max(1, len(sources))
        share = sum(shown(skill, ep, t) for ep in episodes for t in range(len(ep.actions))) / max(1, total)
        reached.append(hit)
        shares.append(share)
        trigger = skill.trigger + (f" {skill.pattern}" if skill.pattern else "")
        print(
            f"--- {rates.assertion.description} ({rates.contrast:+.2f}), {skill.name} [{trigger}]: shown at a "
            f"diagnosed turn in {hit:.0%} of {len(sources)} source failures, on {share:.0%} of all turns"
        )
        if args.text:
            print(skill.text)
    n = max(1, len(reached))
    print(
        f"{len(reached)} skills; shown on >= 1 source failure at a diagnosed turn: {sum(h > 0 for h in reached)}/"
        f"{len(reached)}; mean share of source failures reached {sum(reached) / n:.0%}; mean share of turns shown "
        f"{sum(shares) / n:.0%}"
    )


if __name__ == "__main__":
    main()
