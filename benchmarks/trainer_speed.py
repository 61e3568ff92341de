"""Per-step speed of the native trainer, the TRL adapter and TRL's GRPOTrainer, side by side in one run.

    python benchmarks/trainer_speed.py                        # G=8, 1 turn, 32 new tokens, 3 timed steps
    python benchmarks/trainer_speed.py --group-size 8 --max-new-tokens 16 --steps 2 --turns 1

All three start from copies of one randomly initialised tiny model (``sage_agents.models.build_tiny_model``,
built offline), play ``SageChain-ALFWorld-v0`` (split ``train``, ``chain_length=1``, ``max_steps_per_task=
--turns``) with G rollouts of one chain per step, and make one optimizer step per step with the same lr,
clip range, ``beta=0``, loss ``grpo``, no std scaling, temperature 1, ``max_new_tokens``, CPU and fp32, no
gradient checkpointing. Each is timed per step after one warm-up step; medians over ``--steps`` steps.

* ``native``: ``sage_agents.trainer.Trainer(TrainConfig(algo="grpo"))``, ``train_step()``.
* ``TRL adapter``: ``sage_agents.integrations.trl.make_trl_trainer`` (``backend="trl"``): TRL's
  ``GRPOTrainer`` whose ``rollout_func`` plays the chains with the project's rollout; TRL does the update.
* ``TRL GRPOTrainer single-turn``: plain ``trl.GRPOTrainer`` with its own generation (``model.generate``) on
  the first-turn prompts of the same chains, and a reward function that plays each completion as one action in
  the env (success = reward). This is TRL's home ground; it can only play one turn, so with ``--turns 1`` (the
  default) all three rows do the same work, and with more turns the native and adapter rows do more.

The native trainer and the adapter draw the same chains and env seeds (the same sampler); the baseline's
dataset holds the first-turn prompts of those chains. Columns: ``step s`` = median wall seconds per step;
``rollout s`` = generation + env part (TRL single-turn: its ``_generate_and_score_completions``, generation +
reward); ``update s`` = the rest (advantages, forward/backward, optimizer, framework); ``turns`` = policy turns
per step; ``gen tok`` = generated tokens per step; ``x TRL`` = TRL single-turn step s / that row's step s (> 1:
faster than TRL's GRPOTrainer).

Wall times on a shared machine are noisy: run with ``nice`` on an idle machine, and compare medians.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks.rollout_speed import ENV_ID, table  # noqa: E402 (sets the offline environment variables)
from sage_agents.config import TrainConfig  # noqa: E402
from sage_agents.models import build_tiny_model, count_parameters  # noqa: E402
from sage_agents.policy import LLMPolicy, parse_action  # noqa: E402
from sage_agents.rollout import step_seeds  # noqa: E402


def train_config(args: argparse.Namespace, out_dir: str, **overrides: Any) -> TrainConfig:
    """The settings every row shares."""
    return TrainConfig(
        algo="grpo",
        group_size=args.group_size,
        chains_per_step=1,
        total_steps=1 + args.steps,
        max_new_tokens=args.max_new_tokens,
        lr=args.lr,
        beta=0.0,
        loss_type="grpo",
        scale_std=False,
        no_action_penalty=None,  # every rollout plays --turns turns unless it wins
        env_id=ENV_ID,
        env_kwargs={"chain_length": 1, "max_steps_per_task": args.turns},
        report_to=[],
        progress=False,
        save_every=0,
        output_dir=out_dir,
        seed=args.seed,
        cpu=True,
        **overrides,
    )


class StepTimer:
    """A transformers ``TrainerCallback`` recording each optimizer step's wall-clock begin and end."""

    def __init__(self):
        from transformers import TrainerCallback

        timer = self

        class Callback(TrainerCallback):
            def on_step_begin(self, args_, state, control, **kwargs):
                timer.begin.append(time.perf_counter())

            def on_step_end(self, args_, state, control, **kwargs):
                timer.end.append(time.perf_counter())

        self.begin: list[float] = []
        self.end: list[float] = []
        self.callback = Callback()


def medians(steps: list[dict[str, float]]) -> dict[str, float]:
    """Median of each figure over the timed steps (the first, warm-up step dropped)."""
    timed = steps[1:]
    return {k: statistics.median(s[k] for s in timed) for k in timed[0]}


def run_native(args, model, tok, out_dir: str) -> dict[str, float]:
    from sage_agents.trainer import Trainer

    trainer = Trainer(train_config(args, out_dir), model=copy.deepcopy(model), tokenizer=tok)
    steps = []
    for _ in range(1 + args.steps):
        t0 = time.perf_counter()
        m = trainer.train_step()
        wall = time.perf_counter() - t0
        turns = [t for ro in trainer.last_rollouts for t in ro.turns]
        steps.append(
            {
                "step": wall,
                "rollout": m["charts/rollout_seconds"],
                "update": wall - m["charts/rollout_seconds"],
                "turns": len(turns),
                "gen_tok": sum(len(t.completion_ids) for t in turns),
            }
        )
    trainer.close()
    return medians(steps)


def run_adapter(args, model, tok, out_dir: str) -> dict[str, float]:
    from sage_agents.integrations.trl import make_trl_trainer

    timer = StepTimer()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")  # TRL's experimental rollout_func warning
        trainer = make_trl_trainer(
            train_config(args, out_dir, backend="trl", trl_args={"save_strategy": "no"}),
            model=copy.deepcopy(model),
            tokenizer=tok,
            callbacks=[timer.callback],
        )
        rollout, spans = trainer.rollout_func, []

        def timed_rollout(prompts: list[Any], grpo_trainer: Any) -> dict[str, list]:
            t0 = time.perf_counter()
            out = rollout(prompts, grpo_trainer)
            turns = [t for ro in rollout.last_rollouts for t in ro.turns]
            spans.append((time.perf_counter() - t0, len(turns), sum(len(t.completion_ids) for t in turns)))
            return out

        trainer.rollout_func = timed_rollout
        trainer.train()
    for env in rollout.envs:
        env.close()
    steps = []
    for begin, end, (roll, turns, gen) in zip(timer.begin, timer.end, spans, strict=True):
        steps.append(
            {"step": end - begin, "rollout": roll, "update": end - begin - roll, "turns": turns, "gen_tok": gen}
        )
    return medians(steps)


def run_trl_single_turn(args, model, tok, out_dir: str) -> dict[str, float]:
    """Plain GRPOTrainer: its own generation on the first-turn prompts of the native trainer's chains."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    env = gym.make(ENV_ID, split="train", chain_length=1, max_steps_per_task=args.turns)
    policy = LLMPolicy(model, tok, max_new_tokens=args.max_new_tokens, temperature=1.0)
    # the native trainer's sampler (Trainer.next_chains, one process) and its per-step env seeds (Trainer.rollout)
    chains = np.random.default_rng(args.seed).integers(env.unwrapped.num_chains, size=1 + args.steps).tolist()
    seeds = [step_seeds(args.seed, step, rank=0, n=1)[0] for step in range(1 + args.steps)]
    prompts = []
    for chain, seed in zip(chains, seeds, strict=True):
        obs, info = env.reset(seed=seed, options={"chain": chain})
        prompts.append(policy.prompt(obs, [], info["admissible_commands"]))

    def env_success(completions: list[str], chain: list[int], seed: list[int], **kwargs: Any) -> list[float]:
        rewards = []
        for text, c, s in zip(completions, chain, seed, strict=True):
            env.reset(seed=s, options={"chain": c})
            _, reward, _, _, info = env.step(parse_action(text).text)
            rewards.append(float(info.get("task_success", False)))
        return rewards

    timer = StepTimer()
    generation: list[tuple[float, Any]] = []
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        config = GRPOConfig(
            output_dir=out_dir,
            per_device_train_batch_size=args.group_size,
            num_generations=args.group_size,
            gradient_accumulation_steps=1,
            max_steps=1 + args.steps,
            learning_rate=args.lr,
            lr_scheduler_type="constant",
            beta=0.0,
            epsilon=0.2,
            loss_type="grpo",
            scale_rewards="none",
            max_grad_norm=1.0,
            temperature=1.0,
            max_completion_length=args.max_new_tokens,
            gradient_checkpointing=False,
            use_cpu=True,
            bf16=False,
            fp16=False,
            save_strategy="no",
            report_to="none",
            logging_steps=1,
            disable_tqdm=True,
            shuffle_dataset=False,
            seed=args.seed,
        )
        dataset = Dataset.from_dict({"prompt": prompts, "chain": chains, "seed": seeds})
        trainer = GRPOTrainer(
            model=copy.deepcopy(model),
            reward_funcs=env_success,
            args=config,
            train_dataset=dataset,
            processing_class=tok,
            callbacks=[timer.callback],
        )
        generate = trainer._generate_and_score_completions

        def timed_generate(inputs: Any) -> Any:
            t0 = time.perf_counter()
            out = generate(inputs)
            generation.append((time.perf_counter() - t0, out))
            return out

        trainer._generate_and_score_completions = timed_generate
        trainer.train()
    env.close()
    steps = []
    for begin, end, (gen_s, out) in zip(timer.begin, timer.end, generation, strict=True):
        gen_tok = int(out["completion_mask"].sum())
        steps.append(
            {
                "step": end - begin,
                "rollout": gen_s,
                "update": end - begin - gen_s,
                "turns": args.group_size,
                "gen_tok": gen_tok,
            }
        )
    return medians(steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--group-size", type=int, default=8, help="G: rollouts per chain (num_generations)")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="generation budget per turn")
    parser.add_argument("--steps", type=int, default=3, help="timed steps (after one warm-up step)")
    parser.add_argument("--turns", type=int, default=1, help="max_steps_per_task (native and adapter rows)")
    parser.add_argument("--lr", type=float, default=1e-4, help="learning rate of every trainer")
    parser.add_argument("--seed", type=int, default=0, help="chain sampler and env seeds")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model, tok = build_tiny_model(seed=0)
    import transformers
    import trl

    print(
        f"tiny llama: {count_parameters(model) / 1e6:.2f}M params, vocab {len(tok)}; torch {torch.__version__}, "
        f"transformers {transformers.__version__}, trl {trl.__version__}; threads={torch.get_num_threads()}\n"
        f"G={args.group_size}, {ENV_ID} chain_length=1, turns={args.turns}, max_new_tokens={args.max_new_tokens}, "
        f"median of {args.steps} step(s) after 1 warm-up step"
    )
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        results = {
            "native: sage_agents Trainer": run_native(args, model, tok, os.path.join(tmp, "native")),
            "TRL adapter: make_trl_trainer (backend=trl)": run_adapter(args, model, tok, os.path.join(tmp, "adapter")),
            f"TRL {trl.__version__} GRPOTrainer single-turn": run_trl_single_turn(
                args, model, tok, os.path.join(tmp, "trl")
            ),
        }
    baseline = list(results.values())[-1]
    rows = [
        [name, f"{r['step']:.2f}", f"{r['rollout']:.2f}", f"{r['update']:.2f}", f"{r['turns']:.0f}",
         f"{r['gen_tok']:.0f}", f"{baseline['step'] / r['step']:.2f}"]
        for name, r in results.items()
    ]  # fmt: skip
    print(table(["trainer step", "step s", "rollout s", "update s", "turns", "gen tok", "x TRL"], rows))
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
