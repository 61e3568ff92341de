"""TRL backend: train any registered SageChain env with TRL's ``GRPOTrainer`` (``TrainConfig.backend="trl"``).

The chains are played by the project's own rollout (:func:`sage_agents.rollout.rollout_chains` with an
:class:`~sage_agents.policy.LLMPolicy`) inside TRL's ``rollout_func``; TRL does the rest (rewards -> group
advantages -> clipped loss -> optimizer, checkpoints, logging, vLLM weight sync). How SAGE maps onto it
(arXiv 2512.17102; docs/agents.md, "TRL backend"):

* One TRL *completion* is one task attempt, (rollout g, chain position k). Its ``prompt_ids`` are the first
  turn's prompt; its ``completion_ids`` are that turn's completion, then every later turn's own prompt (environment
  text: ``env_mask`` 0, never in the loss) and completion (``env_mask`` 1). Each policy token is therefore
  preceded by exactly the prompt it was sampled from; the earlier turns in front of that prompt are the one
  difference from the native trainer, which scores each turn on its prompt alone (measured in docs/agents.md).
* Completions are ordered position-major (:func:`position_major`) and ``num_generations = G``. TRL normalises
  rewards over consecutive blocks of G completions, so a block is position k of the G rollouts of one chain and
  TRL's ``R - mean`` (``scale_rewards="none"``) or ``(R - mean) / (std + 1e-4)`` (``"group"``) equals SAGE's
  per-position advantage (:func:`sage_agents.algos.sage.position_advantages`) exactly.
* An unplayed position (the chain stopped on a reply with no action, or is shorter than L) has reward ``None``:
  TRL leaves it out of the group mean and gives it advantage 0, as SAGE's ``valid`` mask does. Its completion is
  one masked EOS token (TRL needs one completion per row).
* Constrained decoding samples each token from the model's softmax restricted to the tokens its grammar allows
  (:mod:`sage_agents.decoding`); TRL's loss cannot take a per-token restriction, so it differentiates the
  full-vocabulary log-prob of those tokens instead (the one approximation of this backend for constrained
  policies; the native trainer uses the restricted one). Forced tokens (a single allowed id) are left out of the
  loss through ``env_mask``, as in the native trainer.
* ReSkill (``algo="reskill"``): the controller gives every rollout slot a library version before the chains are
  played and observes their outcomes right after (the native trainer observes after the update; the controller
  never reads the model, so the order does not matter).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sage_agents.algos.sage import group_rewards
from sage_agents.config import ConfigError, TrainConfig
from sage_agents.decoding import Plan, trained_tokens
from sage_agents.policy import Completion, LLMPolicy, parse_action
from sage_agents.rollout import ChainRollout, Turn, draw_chains, rollout_chains, rollout_stats, step_seeds


# ---------------------------------------------------------------------------------------------- LAYOUT
def position_major(rewards: torch.Tensor, valid: torch.Tensor, length: int) -> list[float | None]:
    """(G, L') per-position rewards -> G * length TRL rewards, position-major, None where unplayed.

    Row ``k * G + g`` is (rollout g, position k), so TRL's consecutive groups of G are SAGE's per-position
    groups (arXiv 2512.17102, advantages per chain position across the group). Positions ``L' <= k < length``
    (a chain shorter than the env's ``chain_length``) are unplayed.
    """
    group, positions = rewards.shape  # (G, L')
    return [
        float(rewards[g, k]) if k < positions and valid[g, k] else None for k in range(length) for g in range(group)
    ]


def pack_task(turns: Sequence[Turn], eos_id: int) -> tuple[list[int], list[int], list[float], list[int]]:
    """The turns of one task attempt as one TRL sample: ``(prompt_ids, completion_ids, logprobs, env_mask)``.

    The first turn's prompt is the prompt; each later turn's prompt is environment text inside the completion
    (mask 0, log-prob 0), and so are the tokens constrained decoding forced. No turn with tokens (an unplayed
    position): one masked EOS.
    """
    turns = [t for t in turns if t.completion_ids]
    if not turns:
        return [eos_id], [eos_id], [0.0], [0]
    completion, logprobs, mask = [], [], []
    for i, turn in enumerate(turns):
        if i:
            completion += turn.prompt_ids
            logprobs += [0.0] * len(turn.prompt_ids)
            mask += [0] * len(turn.prompt_ids)
        completion += turn.completion_ids
        logprobs += turn.logprobs
        mask += [int(trained) for trained in trained_tokens(turn.completion_ids, turn.allowed)]
    return list(turns[0].prompt_ids), completion, logprobs, mask


# ---------------------------------------------------------------------------------------------- ROLLOUT
class VLLMPolicy(LLMPolicy):
    """An :class:`LLMPolicy` whose free generation runs on TRL's vLLM engine (``use_vllm``, any ``vllm_mode``).

    Constrained decoding (``constrained=True``) stays on the trained model. ``vllm`` is the trainer's
    ``vllm_generation``; TRL syncs its weights before each ``rollout_func`` call.
    """

    def __init__(self, model: Any, tokenizer: Any, *, vllm: Any, **kwargs: Any):
        super().__init__(model, tokenizer, **kwargs)
        self.vllm = vllm

    def generate(
        self,
        prompts: Sequence[str],
        *,
        greedy: bool = False,
        plans: Sequence[Plan] | None = None,
        commands: Sequence[Collection[str]] | None = None,
    ) -> list[Completion]:
        """Sample one completion per prompt with vLLM (TRL's temperature and top_p; ``greedy`` is not used)."""
        if plans is not None:
            return super().generate(prompts, greedy=greedy, plans=plans, commands=commands)
        prompt_ids = [self.encode(p) for p in prompts]
        self.vllm.max_completion_length = self.max_new_tokens  # a turn's budget, not the packed task's
        _, completion_ids, logprobs, _ = self.vllm.generate(prompts=prompt_ids, images=None, num_generations=1)
        out = []
        for ids, comp, lps in zip(prompt_ids, completion_ids, logprobs, strict=True):
            text = self.tokenizer.decode(comp, skip_special_tokens=True)
            out.append(Completion(ids, list(comp), [lp[0] for lp in lps], text, parse_action(text)))  # top-1 = sampled
        return out


class SageRollout:
    """TRL ``rollout_func`` (``__call__``) and reward function (:meth:`sage_reward`) for SageChain groups.

    Args:
        config: the run's settings (group size, reward mode, policy options, seed).
        envs: ``group_size * chains_per_step`` chain envs.
        reskill: a :class:`sage_agents.reskill.ReSkill` controller for ``algo="reskill"``, else None.
    """

    def __init__(self, config: TrainConfig, envs: Sequence[Any], reskill: Any = None):
        self.config, self.envs, self.reskill = config, list(envs), reskill
        self.length = int(self.envs[0].unwrapped.chain_length)  # L: longest chain of the env
        self.num_chains = config.chain_pool(int(self.envs[0].unwrapped.num_chains))
        self.chain_rng = np.random.default_rng(config.seed)  # the native trainer's chain sampler
        self.policy: LLMPolicy | None = None
        self.last_rollouts: list[ChainRollout] = []
        self.metrics: dict[str, float] = {}

    @property
    def rows_per_chain(self) -> int:
        """TRL completions per chain played: one per (rollout, position)."""
        return self.config.group_size * self.length

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list]:
        """Play ``len(prompts) / rows_per_chain`` chains G times each and return them as TRL samples."""
        cfg, acc = self.config, trainer.accelerator
        n_chains, extra = divmod(len(prompts), self.rows_per_chain)
        if extra or n_chains * cfg.group_size > len(self.envs):
            raise ConfigError(
                f"TRL handed the rollout {len(prompts)} rows; it needs a multiple of group_size * chain_length = "
                f"{self.rows_per_chain} and at most {len(self.envs) // cfg.group_size} chains; build the trainer "
                "with make_trl_trainer, which sizes GRPOConfig's batches from TrainConfig."
            )
        rank, step = acc.process_index, trainer.state.global_step
        drawn = draw_chains(self.chain_rng, self.num_chains, n_chains, rank, acc.num_processes)
        chains = [c for c in drawn for _ in range(cfg.group_size)]
        policy = self._policy(trainer)
        training = policy.model.training
        policy.model.eval()
        libraries = self.reskill.assign(len(chains)) if self.reskill is not None else None
        try:
            rollouts = rollout_chains(
                self.envs[: len(chains)],
                policy,
                chains,
                step_seeds(cfg.seed, step, rank, len(chains)),  # the native trainer's seeds
                stop_on_no_action=cfg.no_action_penalty is not None,
                skill_libraries=libraries,
            )
        finally:
            policy.model.train(training)
        self.last_rollouts = rollouts
        self.metrics = rollout_stats(rollouts, self.length)
        if self.reskill is not None:
            self.metrics.update(self.reskill.observe(rollouts, step + 1))
        return self.samples(rollouts, policy.eos_id if policy.eos_id is not None else policy.pad_id)

    def samples(self, rollouts: Sequence[ChainRollout], eos_id: int) -> dict[str, list]:
        """Rollouts (groups of G in order) -> the ``rollout_func`` dict: position-major rows with ``sage_reward``."""
        cfg, group = self.config, self.config.group_size
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": []}
        out["sage_reward"] = []
        for start in range(0, len(rollouts), group):
            chunk = rollouts[start : start + group]
            rewards, valid = group_rewards(
                chunk, mode=cfg.effective_reward_mode, no_action_penalty=cfg.no_action_penalty
            )  # (G, L'), (G, L')
            out["sage_reward"] += position_major(rewards, valid, self.length)
            for k in range(self.length):
                for ro in chunk:
                    prompt, completion, logprobs, mask = pack_task(ro.turns_of(k), eos_id)
                    out["prompt_ids"].append(prompt)
                    out["completion_ids"].append(completion)
                    out["logprobs"].append(logprobs)
                    out["env_mask"].append(mask)
        return out

    def sage_reward(
        self, completions: list[Any], sage_reward: list[float | None], log_metric: Callable | None = None, **_: Any
    ) -> list[float | None]:
        """TRL reward function: the per-(g, k) rewards; logs the step's ``env/`` (and ``reskill/``) metrics."""
        for name, value in self.metrics.items() if log_metric is not None else ():
            log_metric(name, value)
        return list(sage_reward)

    def _policy(self, trainer: Any) -> LLMPolicy:
        model = trainer.accelerator.unwrap_model(trainer.model)
        if self.policy is None:
            kwargs = self.config.policy_kwargs
            if trainer.use_vllm:
                self.policy = VLLMPolicy(model, trainer.processing_class, vllm=trainer.vllm_generation, **kwargs)
            else:
                self.policy = LLMPolicy(model, trainer.processing_class, **kwargs)
        self.policy.model = model
        return self.policy


# ---------------------------------------------------------------------------------------------- TRAINER
def grpo_args(config: TrainConfig, rows: int) -> dict[str, Any]:
    """``GRPOConfig`` kwargs equivalent to ``config`` for ``rows`` completions per process and step.

    One generation per optimizer step: micro-batches of the largest divisor of ``rows`` up to
    ``micro_batch_size``, accumulated over the rest. ``config.trl_args`` overrides any of these.
    """
    cfg = config
    batch = max(d for d in range(1, min(rows, cfg.micro_batch_size) + 1) if rows % d == 0)
    args = {
        "output_dir": cfg.output_dir,
        "num_generations": cfg.group_size,
        "per_device_train_batch_size": batch,
        "gradient_accumulation_steps": rows // batch,
        "max_steps": cfg.total_steps,
        "learning_rate": cfg.lr,
        "lr_scheduler_type": cfg.lr_scheduler_type,
        "warmup_steps": cfg.warmup_steps,
        "weight_decay": cfg.weight_decay,
        "max_grad_norm": cfg.max_grad_norm,
        "seed": cfg.seed,
        "loss_type": cfg.loss_type,
        "scale_rewards": "group" if cfg.scale_std else "none",
        "beta": cfg.beta,
        "epsilon": cfg.eps_low,
        "epsilon_high": cfg.eps_high,
        "num_iterations": cfg.ppo_epochs,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "max_completion_length": cfg.dr_grpo_max_len or cfg.max_new_tokens,  # dr_grpo's L_max (vLLM: per turn)
        "save_strategy": "steps",
        "save_steps": cfg.save_every or cfg.total_steps,
        "save_total_limit": cfg.keep_checkpoints,
        "logging_steps": 1,
        "report_to": ["tensorboard"] if "tensorboard" in cfg.report_to else "none",
        "disable_tqdm": not cfg.progress,
        "use_cpu": cfg.cpu,
        "bf16": False,  # TRL defaults to bf16 and gradient checkpointing; the native trainer to neither
        "gradient_checkpointing": False,
        "shuffle_dataset": False,
    }
    return {**args, **cfg.trl_args}


def make_trl_trainer(
    config: TrainConfig,
    *,
    model: Any = None,
    tokenizer: Any = None,
    env_fn: Callable[[], Any] | None = None,
    callbacks: Sequence[Any] = (),
) -> Any:
    """A ``trl.GRPOTrainer`` that trains ``config`` (same arguments as :class:`sage_agents.trainer.Trainer`).

    The train dataset is a placeholder (TRL's sampler needs one): the chains are drawn by the rollout exactly as
    the native trainer draws them. ``trainer.rollout_func`` is the :class:`SageRollout`.
    """
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from sage_agents.trainer import build_model, make_envs

    cfg = config
    if model is None:
        model, tokenizer = build_model(cfg)
    n_envs = cfg.group_size * cfg.chains_per_step
    envs = [env_fn() for _ in range(n_envs)] if env_fn else make_envs(cfg, n_envs)
    reskill = None
    if cfg.algo == "reskill":
        from sage_agents.reskill import ReSkill

        reskill = ReSkill.from_config(cfg, output_dir=cfg.output_dir)
    rollout = SageRollout(cfg, envs, reskill)
    args = GRPOConfig(**grpo_args(cfg, rollout.rows_per_chain * cfg.chains_per_step))
    if reskill is not None and args.world_size > 1:
        raise ConfigError(
            f"algo='reskill' runs in one process (got {args.world_size}); launch the TRL backend without "
            "accelerate's multi-process mode."
        )
    placeholder = Dataset.from_dict({"prompt": [""] * (args.generation_batch_size // cfg.group_size)})

    class JsonlMetrics(TrainerCallback):
        """Append TRL's logged metrics to ``output_dir/metrics.jsonl`` (``report_to`` has ``jsonl``)."""

        def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
            if state.is_world_process_zero and logs and "jsonl" in cfg.report_to:
                Path(cfg.output_dir).mkdir(parents=True, exist_ok=True)
                with open(Path(cfg.output_dir) / "metrics.jsonl", "a") as f:
                    f.write(json.dumps({"charts/step": float(state.global_step), **logs}, sort_keys=True) + "\n")

    return GRPOTrainer(
        model=model,
        reward_funcs=rollout.sage_reward,
        args=args,
        train_dataset=placeholder,
        processing_class=tokenizer,
        rollout_func=rollout,
        callbacks=[JsonlMetrics(), *callbacks],
    )


def train_trl(config: TrainConfig, **kwargs: Any) -> Any:
    """Build with :func:`make_trl_trainer` (same keyword arguments), train ``total_steps``; return the trainer."""
    trainer = make_trl_trainer(config, **kwargs)
    try:
        trainer.train()
    finally:
        for env in trainer.rollout_func.envs:
            env.close()
    return trainer
