"""SFT loss on the action only vs on the whole text, at equal compute, for the demo's tiny model.

    python examples/sft_loss_ablation.py runs/demo/expert/pairs.jsonl --steps 500     # ~9 minutes on 2 cores
    python examples/sft_loss_ablation.py PAIRS --config DEMO/demo_config.json --steps 5 --chains 1 --held 5   # smoke

Trains two fresh tiny models (the demo's tokenizer, size and SFT settings, seed 0) for ``--steps`` optimizer steps
on the demo's rebalanced expert pairs, one with TRL's completion-only loss and one with the language-model loss
on prompt and completion, then prints for each: (1) how often, on the first ``--held`` (100) no-skill
``open ...`` pairs, the model gives the expert's command a higher log-likelihood than the same command with a
wrong receptacle number (copying "drawer 17" from the observation), and (2) greedy constrained agreement with the
expert on the expert's own path over the first ``--chains`` train chains (examples/expert_agreement.py's measure).
``--config``: the model size, SFT settings and turn limit of a demo's ``demo_config.json`` (default: DemoConfig's).
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile

import gymnasium as gym
import torch
from expert_agreement import expert_agreement  # examples/ is on sys.path when a script there runs

import sage_envs  # noqa: F401
from sage_agents.models import build_tiny_model, build_tokenizer
from sage_agents.policy import LLMPolicy
from sage_agents.sft import reweight_pairs, sft_warm_start
from sage_app.demo import DemoConfig


def completion_logprob(model, tokenizer, prompt: str, completion: str) -> float:
    """Summed log-probability of ``completion`` + EOS after ``prompt``."""
    start = len(tokenizer(prompt)["input_ids"])
    ids = tokenizer(prompt + completion)["input_ids"] + [tokenizer.eos_token_id]
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
    return sum(logp[i - 1, ids[i]].item() for i in range(start, len(ids)))


def number_copy_rate(model, tokenizer, pairs: list[dict[str, str]]) -> float:
    """Share of pairs where the expert's command beats the same command with its last number changed."""
    wins = 0
    for pair in pairs:
        number = int(re.findall(r"\d+", pair["completion"])[-1])
        wrong = re.sub(r"\d+$", str(number % 9 + 1 if number % 9 + 1 != number else 2), pair["completion"])
        right = completion_logprob(model, tokenizer, pair["prompt"], pair["completion"])
        wins += right > completion_logprob(model, tokenizer, pair["prompt"], wrong)
    return wins / len(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", help="the demo's expert/pairs.jsonl")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--chains", type=int, default=4, help="train chains of the agreement measure")
    parser.add_argument("--held", type=int, default=100, help="'open ...' pairs of the right-number measure")
    parser.add_argument("--config", help="a demo's demo_config.json (default: DemoConfig's defaults)")
    args = parser.parse_args()
    cfg = DemoConfig.load(args.config) if args.config else DemoConfig()
    raw = [json.loads(line) for line in open(args.pairs)]
    held = [p for p in raw if p["completion"].startswith("open ") and "Skills:" not in p["prompt"]][: args.held]
    tokenizer = build_tokenizer([p["prompt"] + "\n" + p["completion"] for p in raw])
    env = gym.make("SageChain-ALFWorld-v0", split="train", skills="none", **cfg.env_kwargs)
    for completion_only in (True, False):
        model, tokenizer = build_tiny_model(tokenizer, hidden=cfg.tiny_hidden, layers=cfg.tiny_layers, seed=0)
        with tempfile.TemporaryDirectory() as tmp:
            sft_warm_start(
                model, tokenizer, reweight_pairs(raw, cfg.sft_action_weights), output_dir=tmp, max_steps=args.steps,
                lr=cfg.sft_lr, batch_size=cfg.sft_batch_size, bf16=cfg.sft_bf16, max_length=1024,
                completion_only=completion_only, logging_steps=10**6,
            )  # fmt: skip
        model.eval()
        policy = LLMPolicy(model, tokenizer, constrained=True, **cfg.prompt_kwargs)
        loss = "action only" if completion_only else "whole text"
        agree, turns = expert_agreement(policy, env, range(args.chains), use_skills=False)
        print(f"{loss:>11}: right number {number_copy_rate(model, tokenizer, held):.2f}, "
              f"expert agreement {agree / turns:.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
