"""How often a trained policy's greedy constrained choice equals the expert's action, on the expert's own path.

    python examples/expert_agreement.py runs/demo/sft/model --skills none --chains 0 10
    python examples/expert_agreement.py runs/demo-skills/sft/model --skills program --chains 0 4 \
        --expert-skills place_in heat_then_place cool_then_place clean_then_place   # a demo with expert_skills set
    python examples/expert_agreement.py runs/demo/sft/model --config runs/demo/demo_config.json --split valid_unseen \
        --chains 0 20 --by-verb   # the prompt format a run trained with; one row per expert command's first word

The expert plays each chain; at every turn the policy is asked what it would do (greedy constrained decoding with
the demo's prompt format) and the expert's action is what is sent to the env. A quick check of an SFT warm start
before spending RL time on it (an SFT model that mostly disagrees on train chains will not succeed on its own).
"""

from __future__ import annotations

import argparse

import gymnasium as gym

import sage_envs  # noqa: F401
from sage_agents.models import load_policy
from sage_agents.policy import LLMPolicy
from sage_app.demo import DemoConfig, skill_templates
from sage_envs.domains.alfworld import AlfworldExpert


def expert_agreement(
    policy: LLMPolicy,
    env: gym.Env,
    chains: range,
    *,
    use_skills: bool,
    skills: list[str] | None = None,
    by_verb: dict[str, list[int]] | None = None,
) -> tuple[int, int]:
    """``(turns where the policy's greedy choice equals the expert's action, turns)`` on the expert's path.

    ``skills``: the expert's skills in use (``AlfworldExpert(skills=...)``; None = all). ``by_verb``: a dict that
    gathers, per first word of the expert's action (``go``, ``take``, ``skill``, ...), the same two counts and a third:
    the turns where the policy chose otherwise, repeating an action already sent in the task (a revisit, for ``go``).
    """
    agree = turns = 0
    for chain in chains:
        expert = AlfworldExpert(use_skills=use_skills, skills=skills)
        obs, info = env.reset(seed=0, options={"chain": chain})
        history: list[tuple[str, str]] = []
        while True:
            action = expert.act(obs, info)
            choice = policy.act_batch([obs], [info], [history], greedy=True)[0].text
            agreed = choice.strip() == action.strip()
            agree += agreed
            turns += 1
            if by_verb is not None:
                counts = by_verb.setdefault(action.split(maxsplit=1)[0], [0, 0, 0])
                counts[0] += agreed
                counts[1] += 1
                counts[2] += not agreed and choice.strip() in {a.strip() for _, a in history}
            before = obs["observation"]
            obs, _, terminated, truncated, info = env.step(action)
            history = [] if info["new_task"] else [*history, (before, action)]
            if terminated or truncated:
                break
    return agree, turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_path")
    parser.add_argument("--skills", choices=["none", "program"], default="none")
    parser.add_argument("--chains", type=int, nargs=2, default=[0, 10], metavar=("FIRST", "END"))
    parser.add_argument("--split", default="train")
    parser.add_argument("--expert-skills", nargs="+", default=None, help="as DemoConfig.expert_skills (default all)")
    parser.add_argument("--config", help="a demo's demo_config.json: its prompt format (default: DemoConfig's)")
    parser.add_argument("--by-verb", action="store_true", help="also one line per first word of the expert's action")
    args = parser.parse_args()

    cfg = DemoConfig.load(args.config) if args.config else DemoConfig()
    model, tokenizer = load_policy(args.model_path)
    model.eval()
    templates = skill_templates(args.expert_skills) if args.skills == "program" else []
    policy = LLMPolicy(model, tokenizer, constrained=True, skill_templates=templates, **cfg.prompt_kwargs)
    env = gym.make("SageChain-ALFWorld-v0", split=args.split, skills=args.skills, **cfg.env_kwargs)
    use_skills = args.skills != "none"
    by_verb: dict[str, list[int]] = {}
    agree, turns = expert_agreement(
        policy, env, range(*args.chains), use_skills=use_skills, skills=args.expert_skills, by_verb=by_verb
    )
    print(f"agreement {agree}/{turns} = {agree / max(1, turns):.2f} ({args.skills} skills, chains {args.chains})")
    if args.by_verb:
        for verb, (agreed, total, repeated) in sorted(by_verb.items(), key=lambda item: -item[1][1]):
            print(f"  {verb}: {agreed}/{total} = {agreed / total:.2f}; of the {total - agreed} others, {repeated} "
                  "repeat an action already sent in the task")  # fmt: skip


if __name__ == "__main__":
    main()
