"""The skills a SAGE policy writes: how many, how many are not copies of its SFT data, and examples.

    python examples/written_skills.py runs/demo                       # the SAGE arm's last checkpoint
    python examples/written_skills.py runs/demo --model runs/demo/sft/model --chains 64

Plays ``--chains`` chains of ``--split`` with the demo's SAGE settings (``DemoConfig.sage_kwargs``: it writes
definitions under the skill DSL's grammar), sampling as in RL training, and compares every definition it wrote
with the definitions of the demo's SFT data (``expert/pairs.jsonl``, the varying expert's). A definition is
*new* when its text (without the trailing call) is not verbatim any SFT definition: the same comparison whatever
the SFT bodies are (a body's own ``call`` lines are indented, so they stay in the text compared; a whole-task
skill that calls sub-task skills under other names than any SFT chain gave them is new). It also counts the
definitions whose body calls other skills (whole-task skills).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import gymnasium as gym
import torch

import sage_envs  # noqa: F401  (registers the env ids)
from sage_agents.models import load_policy
from sage_agents.policy import LLMPolicy
from sage_agents.rollout import rollout_chains
from sage_app.demo import DemoConfig


def definition(action: str) -> str:
    """A define action's definition text, without its trailing (unindented) call lines."""
    return action.split("\ncall ", 1)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("demo_dir", help="a finished demo's --output-dir")
    parser.add_argument("--model", default=None, help="model folder (default: the SAGE arm's last checkpoint)")
    parser.add_argument("--split", default="train")
    parser.add_argument("--chains", type=int, default=32)
    parser.add_argument("--batch", type=int, default=8, help="chains played together")
    parser.add_argument("--examples", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    demo = Path(args.demo_dir)
    cfg = DemoConfig.load(demo / "demo_config.json")
    model_dir = args.model
    if model_dir is None:
        checkpoints = demo / "sage" / "checkpoints"
        model_dir = checkpoints / (checkpoints / "latest").read_text().strip() / "model"
    model, tokenizer = load_policy(model_dir)
    model.eval()
    policy = LLMPolicy(model, tokenizer, constrained=True, **cfg.sage_kwargs, **cfg.prompt_kwargs)
    pairs = [json.loads(line) for line in (demo / "expert" / "pairs.jsonl").read_text().splitlines()]
    seen = {definition(p["completion"]) for p in pairs if p["completion"].startswith("skill ")}

    torch.manual_seed(args.seed)
    envs = [gym.make(cfg.env_id, split=args.split, skills="program", **cfg.env_kwargs) for _ in range(args.batch)]
    written = []
    for start in range(0, args.chains, args.batch):
        chains = list(range(start, min(start + args.batch, args.chains)))
        rollouts = rollout_chains(envs[: len(chains)], policy, chains, [args.seed + c for c in chains])
        written += [definition(t.action) for ro in rollouts for t in ro.turns if t.action.startswith("skill ")]
    for env in envs:
        env.close()
    new = [text for text in written if text not in seen]
    headers = {text.split("\n", 1)[0] for text in written}
    print(f"model: {model_dir}")
    print(f"{len(written)} definitions written in {args.chains} sampled {args.split} chains, "
          f"{len(headers)} distinct headers")  # fmt: skip
    print(f"new (not verbatim any of the {len(seen)} SFT definitions): {len(new)} of {len(written)}")
    composed = [text for text in written if "\n    call " in text]  # a body line that calls a skill
    print(f"calling other skills (whole-task skills): {len(composed)} of {len(written)}")
    for text in new[: args.examples]:
        print(f"---\n{text}")


if __name__ == "__main__":
    main()
