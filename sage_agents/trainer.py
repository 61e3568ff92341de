"""GRPO / SAGE trainer for LLM agents in the chain envs (one file, CleanRL spirit).

Beside TRL's ``GRPOTrainer``: ``backend="trl"`` (:mod:`sage_agents.integrations.trl`) trains the same envs,
rewards and advantages through ``GRPOTrainer``'s ``rollout_func``. This native trainer keeps the math in view in one
file (the same advantage, loss variants, clipping and k3 KL as TRL's: :mod:`sage_agents.algos.grpo`,
docs/agents.md) and scores each turn on its own prompt, exactly what the policy saw, where TRL packs a task's
turns into one sequence (the measured difference is in docs/agents.md, "TRL backend"). TRL's ``SFTTrainer`` does
the warm start (:mod:`sage_agents.sft`).

Loop per step: (1) pick ``chains_per_step`` chains, (2) play each G times (sequential rollout), (3) rewards
(skill-integrated or outcome) and per-position advantages, plus GiGPO's step-level one when
``step_advantage_weight`` > 0 (:mod:`sage_agents.algos.gigpo`), (4) ``ppo_epochs`` passes of clipped policy
gradient over every policy token with gradient accumulation, (5) log ``env/``, ``losses/``, ``charts/``
metrics, (6) checkpoint atomically. ``accelerate launch`` runs it data-parallel (each process plays its own
chains). ``algo="reskill"`` adds ReSkill (:mod:`sage_agents.reskill`): step (2) gives each rollout slot a library
version and, after (4), the controller tracks the versions' outcomes, decides tests and creates skills.

Library parts: ``accelerate`` (devices, DDP / FSDP / DeepSpeed, autocast ``mixed_precision``, ``save_state`` /
``load_state``), ``peft`` (LoRA), ``transformers.get_scheduler`` (warm-up). Weights are kept in ``dtype``
(float32 master weights by default, whatever the checkpoint's dtype). Rollouts generate with
``transformers``' ``generate`` (:mod:`sage_agents.decoding`: free, or constrained through
``prefix_allowed_tokens_fn``), recording log-probs of the distribution each token was drawn from.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import os
import random
import shutil
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sage_agents.algos.gigpo import step_advantages, task_returns
from sage_agents.algos.grpo import BatchCounts, batch_counts, merge_counts, policy_loss, row_weights
from sage_agents.algos.sage import group_rewards, position_advantages
from sage_agents.checkpoints import METRICS_FILE, latest_checkpoint, read_metrics
from sage_agents.config import ConfigError, TrainConfig
from sage_agents.decoding import choice_logprobs, trained_tokens
from sage_agents.evaluation import evaluate_policy
from sage_agents.policy import LLMPolicy, completion_logprobs
from sage_agents.rollout import ChainRollout, draw_chains, rollout_chains, rollout_stats, step_seeds
from sage_envs.skills import SkillLibrary

TIMING_METRICS = ("charts/step_seconds", "charts/rollout_seconds", "charts/update_seconds")


def build_model(config: TrainConfig) -> tuple[Any, Any]:
    """The policy to train: ``model_path`` loaded in ``dtype`` (master weights), else a fresh tiny model.

    A fresh tiny model's tokenizer knows the words of ``config.env_id``'s domain.
    """
    from sage_agents.models import build_tiny_model, load_policy

    if config.model_path:
        return load_policy(config.model_path, dtype=config.dtype)
    return build_tiny_model(
        hidden=config.tiny_hidden, layers=config.tiny_layers, seed=config.seed, env_id=config.env_id
    )


def make_envs(
    config: TrainConfig, n: int, split: str | None = None, env_kwargs: dict[str, Any] | None = None
) -> list[Any]:
    """``n`` envs of ``config.env_id`` on ``split`` (default ``config.split``), made with ``env_kwargs``.

    ``env_kwargs`` defaults to ``config.env_kwargs``; ``import sage_envs`` registers the ids.
    """
    import gymnasium as gym

    kwargs = dict(config.env_kwargs if env_kwargs is None else env_kwargs)
    if config.env_id.startswith("SageChain-"):
        import sage_envs  # noqa: F401

        if config.algo == "reskill":
            kwargs.setdefault("skills", "guidance")  # ReSkill's skills reach the policy through obs["skills"]
    return [gym.make(config.env_id, split=split or config.split, **kwargs) for _ in range(n)]


def trained_lengths(rows: Sequence[dict[str, Any]]) -> list[int]:
    """Trained tokens (or whole-option choices) of each row: what a loss variant counts."""
    return [sum(trained_tokens(r["completion_ids"], r.get("allowed"), r.get("choices"))) for r in rows]


def rows_with_gradient(
    rows: list[dict[str, Any]], weights: torch.Tensor
) -> tuple[list[dict[str, Any]], torch.Tensor, float]:
    """The rows whose advantage is not 0, their (n,) weights, and their share of the batch's token weight.

    Without a KL term a row's loss is ``-A * min(ratio, clip(ratio))``: a row with ``A = 0`` has a gradient of
    exactly 0, at any ratio, yet costs a forward and a backward pass (22-47% of the turns of the long runs: groups
    that all won or all lost a task). ``weights`` were computed over every row, so the kept rows' gradient is the
    whole batch's. The share rescales the entropy metric, a weighted sum, to the kept rows' mean. One row stays
    when none has an advantage, so that every process of a distributed run joins the gradient all-reduce.
    """
    keep = [i for i, r in enumerate(rows) if r["adv"] != 0] or [0]
    if len(keep) == len(rows):
        return rows, weights, 1.0
    token_weight = weights.cpu() * torch.tensor(trained_lengths(rows), dtype=weights.dtype)  # (N,)
    share = float(token_weight[keep].sum() / token_weight.sum()) if token_weight.sum() > 0 else 1.0
    return [rows[i] for i in keep], weights[keep], share or 1.0


class Trainer:
    """Train a policy with GRPO or SAGE; see the module docstring.

    Args:
        config: the settings.
        model: a causal LM to train (default: ``config.model_path`` or a fresh tiny model).
        tokenizer: its tokenizer.
        env_fn: ``env_fn() -> env`` to build the rollout envs (default: ``gymnasium.make(config.env_id)``).
    """

    def __init__(
        self,
        config: TrainConfig,
        *,
        model: Any = None,
        tokenizer: Any = None,
        env_fn: Callable[[], Any] | None = None,
    ):
        from accelerate import Accelerator, DistributedDataParallelKwargs
        from accelerate.state import AcceleratorState

        self.config = cfg = config
        if AcceleratorState._shared_state and AcceleratorState().mixed_precision != cfg.mixed_precision:
            # e.g. a transformers Trainer (the SFT warm start) left bf16 autocast in accelerate's singleton
            AcceleratorState._reset_state(reset_partial_state=False)
        # Processes run different numbers of micro-batches (rollout lengths differ): no per-forward buffer
        # broadcast, so the only collectives are the one gradient all-reduce per optimizer step.
        ddp = DistributedDataParallelKwargs(broadcast_buffers=False)
        self.accelerator = Accelerator(cpu=cfg.cpu, mixed_precision=cfg.mixed_precision, kwargs_handlers=[ddp])
        self.rank, self.world = self.accelerator.process_index, self.accelerator.num_processes
        random.seed(cfg.seed + self.rank)
        np.random.seed(cfg.seed + self.rank)
        torch.manual_seed(cfg.seed + self.rank)
        if model is None:
            model, tokenizer = build_model(cfg)
        self.tokenizer = tokenizer
        if cfg.dtype != "auto":  # master weights: AdamW at lr 1e-6 on bf16 weights would round most updates away
            model.to(getattr(torch, cfg.dtype))
        model.to(self.accelerator.device)
        self.out = Path(cfg.output_dir)
        self.ref_model = None  # with LoRA the reference is the base model: the adapter switched off
        if cfg.beta > 0 and not cfg.lora_r:
            self.ref_model = copy.deepcopy(model).eval().requires_grad_(False)
        if cfg.gradient_checkpointing:  # only active in train mode: rollouts keep their KV cache
            # transformers >= 5.2x renamed it (the old name warns); older releases only have the old one
            enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
            enable({"use_reentrant": False})
        if cfg.lora_r:
            model = self._add_lora(model)
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        from transformers import get_scheduler

        # One step longer than the run: the schedule runs one step ahead (below), so that a decaying schedule's
        # last step trains at lr / (total_steps + 1 - warmup), not at 0.
        self.scheduler = get_scheduler(
            cfg.lr_scheduler_type, optimizer, num_warmup_steps=cfg.warmup_steps, num_training_steps=cfg.total_steps + 1
        )
        with warnings.catch_warnings():  # no optimizer step yet: intended, see below
            warnings.filterwarnings("ignore", message=".*lr_scheduler.step.*", category=UserWarning)
            # transformers' warm-up gives step s the factor s / warmup (0 at s = 0: a whole rollout for nothing);
            # one step ahead, step s trains at (s + 1) / warmup, reaching the full rate at s = warmup - 1.
            self.scheduler.step()
        with warnings.catch_warnings():  # torch renamed broadcast_buffers; accelerate does not pass the new name
            warnings.filterwarnings("ignore", message=".*broadcast_buffers.*", category=FutureWarning)
            self.model, self.optimizer = self.accelerator.prepare(model, optimizer)
        # Not prepared: accelerate's scheduler wrapper steps once per process. Saved by save_state all the same.
        self.accelerator.register_for_checkpointing(self.scheduler)
        # The weights live in model/ (save_pretrained: what the evaluator loads; the adapter alone with LoRA), so
        # save_state keeps only optimizer, scaler, scheduler and RNGs. Under FSDP / DeepSpeed accelerate saves and
        # restores the sharded weights itself and these lists are empty.
        self.accelerator.register_save_state_pre_hook(lambda models, weights, _dir: weights.clear())
        self.accelerator.register_load_state_pre_hook(self._load_weights_hook)
        self.policy = LLMPolicy(self.accelerator.unwrap_model(self.model), tokenizer, **cfg.policy_kwargs)
        n_envs = cfg.group_size * cfg.chains_per_step
        self.envs = [env_fn() for _ in range(n_envs)] if env_fn else make_envs(cfg, n_envs)
        self._env_fn = env_fn
        self._eval_envs: list[Any] | None = None  # built on first evaluate()
        self.num_chains = cfg.chain_pool(int(self.envs[0].unwrapped.num_chains))
        self.chain_rng = np.random.default_rng(cfg.seed)
        self.step = 0
        self.last_rollouts: list[ChainRollout] = []
        # The program skills the skill-integrated reward paid for; the trained agent's library (docs/agents.md).
        self.skill_bank = SkillLibrary()
        self.ckpt_dir = self.out / "checkpoints"
        self.reskill = None  # algo="reskill": per-slot library versions, skill creation (docs/reskill.md)
        if cfg.algo == "reskill":
            if self.world > 1:
                raise ConfigError(
                    f"algo='reskill' runs in one process (got {self.world}); its version test and skill creator "
                    "are not synchronised across processes yet. Launch without accelerate's multi-process mode."
                )
            from sage_agents.reskill import ReSkill

            # The policy's tokenizer: the creator rejects guidance holding words the policy cannot read.
            self.reskill = ReSkill.from_config(
                cfg, output_dir=self.out if self.is_main else None, fresh=not cfg.resume, tokenizer=self.tokenizer
            )
        if cfg.resume:
            self.load_checkpoint()
        self._writer = None

    # ------------------------------------------------------------------ setup
    def _add_lora(self, model: Any) -> Any:
        """Wrap ``model`` in a peft LoRA model whose saved adapter names a local base folder.

        The base is ``model_path`` when the model came from there, else the initial model is written once to
        ``output_dir/base_model``: ``PeftModel.from_pretrained(base, checkpoint/model)`` and :func:`load_policy`
        need the base on disk, and nothing is ever fetched from the Hub.
        """
        from peft import LoraConfig, get_peft_model

        cfg = self.config
        base = Path(cfg.model_path).resolve() if cfg.model_path else None
        if base is None or not (base / "config.json").is_file():
            base = (self.out / "base_model").resolve()
            if self.is_main and not (base / "config.json").is_file():
                model.save_pretrained(base, safe_serialization=True)
                self.tokenizer.save_pretrained(base)
            self.accelerator.wait_for_everyone()
        if cfg.gradient_checkpointing:  # frozen embeddings: checkpointed blocks need an input that requires grad
            model.enable_input_require_grads()
        lora = LoraConfig(
            r=cfg.lora_r,
            lora_alpha=cfg.lora_alpha,
            lora_dropout=cfg.lora_dropout,
            target_modules=cfg.lora_target_modules or "all-linear",
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
        model.peft_config["default"].base_model_name_or_path = str(base)
        return model

    @property
    def is_main(self) -> bool:
        """True on the process that writes files."""
        return self.accelerator.is_main_process

    # ------------------------------------------------------------------ one step
    def next_chains(self) -> list[int]:
        """This process's chain indices for the next step (drawn for all processes, then sliced)."""
        return draw_chains(self.chain_rng, self.num_chains, self.config.chains_per_step, self.rank, self.world)

    def rollout(self) -> list[ChainRollout]:
        """Play this step's groups with the current policy (no gradients)."""
        cfg, group = self.config, self.config.group_size
        chains = [c for c in self.next_chains() for _ in range(group)]
        seeds = step_seeds(cfg.seed, self.step, self.rank, len(chains))
        self.model.eval()
        libraries = self.reskill.assign(len(chains)) if self.reskill is not None else None
        rollouts = rollout_chains(
            self.envs,
            self.policy,
            chains,
            seeds,
            stop_on_no_action=cfg.no_action_penalty is not None,
            skill_libraries=libraries,
        )
        self.bank_skills(rollouts)
        return rollouts

    def bank_skills(self, rollouts: Sequence[ChainRollout]) -> None:
        """Keep each program skill SAGE's reward paid for: made in task k, called by a later task j, both completed.

        The bank is the library a trained agent starts every chain from at evaluation (``skill_library/`` in
        each checkpoint): skills persist beyond the chain that made them. A newer definition of a name
        becomes its new version.
        """
        for env, ro in zip(self.envs, rollouts, strict=True):
            paid = {k for j, k in ro.reuse if ro.task_success[j] and ro.task_success[k]}
            library = getattr(env.unwrapped, "library", None) if paid else None
            for skill in library.programs() if isinstance(library, SkillLibrary) else ():
                if skill.created_in_task not in paid:
                    continue
                if skill.name not in self.skill_bank or self.skill_bank.get(skill.name).source != skill.source:
                    self.skill_bank.add(dataclasses.replace(skill, uses=0))

    def build_rows(self, rollouts: Sequence[ChainRollout]) -> tuple[list[dict[str, Any]], dict[str, float]]:
        """Rewards and per-position advantages for each group, then one row per policy turn."""
        cfg, group = self.config, self.config.group_size
        rows, rewards_all, adv_all, step_all, grouped = [], [], [], [], 0
        for start in range(0, len(rollouts), group):
            chunk = rollouts[start : start + group]
            rewards, valid = group_rewards(
                chunk, mode=cfg.effective_reward_mode, no_action_penalty=cfg.no_action_penalty
            )  # (G, L), (G, L)
            adv = position_advantages(rewards, valid, scale_std=cfg.scale_std)  # (G, L)
            rewards_all.append(rewards[valid])
            adv_all.append(adv[valid])
            step_adv, shared = self.step_advantages(chunk, rewards)  # (g, turn_i) -> omega * A^S
            step_all += step_adv.values()
            grouped += shared
            for g, ro in enumerate(chunk):
                for turn_i, turn in enumerate(ro.turns):
                    if not any(trained_tokens(turn.completion_ids, turn.allowed, turn.choices)):
                        continue  # nothing to train: no tokens, or every token forced by the constraint
                    k = turn.task_index
                    seq = (start + g, k) if cfg.sequence_unit == "trajectory" else (start + g, k, turn_i)
                    rows.append(
                        {
                            "prompt_ids": turn.prompt_ids,
                            "completion_ids": turn.completion_ids,
                            "old_logp": turn.logprobs,
                            "allowed": turn.allowed,
                            "choices": turn.choices,
                            "adv": float(adv[g, k]) + step_adv.get((g, turn_i), 0.0),
                            "seq": seq,
                        }
                    )
        rewards_flat, adv_flat = torch.cat(rewards_all), torch.cat(adv_all)
        stats = {
            "env/reward_mean": float(rewards_flat.mean()) if len(rewards_flat) else 0.0,
            "losses/advantage_abs_mean": float(adv_flat.abs().mean()) if len(adv_flat) else 0.0,
            # Turns of positions whose group all won or all lost: no policy gradient, only the KL term's.
            "losses/zero_advantage_turns": sum(r["adv"] == 0 for r in rows) / max(1, len(rows)),
        }
        if cfg.step_advantage_weight:
            stats["losses/step_advantage_abs_mean"] = sum(map(abs, step_all)) / max(1, len(step_all))
            stats["losses/step_grouped_share"] = grouped / max(1, len(step_all))
        return rows, stats

    def step_advantages(
        self, group: Sequence[ChainRollout], rewards: torch.Tensor
    ) -> tuple[dict[tuple[int, int], float], int]:
        """GiGPO's weighted step-level advantage ``omega * A^S`` of each turn ``(rollout g, turn i)`` of one group.

        Every turn of the group takes part in the step groups, forced ones too (they acted in a state); a task's
        reward ``rewards[g, k]`` arrives at its last turn (:mod:`sage_agents.algos.gigpo`). Also returns how many
        turns share their anchor state with another turn (the others get no step term). ``({}, 0)`` when off.
        """
        cfg = self.config
        if not cfg.step_advantage_weight:
            return {}, 0
        ids, returns, anchors = [], [], []
        for g, ro in enumerate(group):
            by_task: dict[int, list[int]] = {}
            for turn_i, turn in enumerate(ro.turns):
                by_task.setdefault(turn.task_index, []).append(turn_i)
            for k, turn_ids in by_task.items():
                ids += [(g, turn_i) for turn_i in turn_ids]
                returns += task_returns(len(turn_ids), float(rewards[g, k]), cfg.step_discount)
                if cfg.step_anchor == "prompt":
                    anchors += [(k, tuple(ro.turns[turn_i].prompt_ids)) for turn_i in turn_ids]
                else:  # the observation a turn acted on: its predecessor's; a task's first turns share its start
                    anchors += [(k, None), *((k, ro.turns[turn_i].observation) for turn_i in turn_ids[:-1])]
        adv = step_advantages(returns, anchors, scale_std=cfg.scale_std)  # (N,)
        visits = Counter(anchors)
        shared = sum(visits[a] > 1 for a in anchors)
        return {i: cfg.step_advantage_weight * float(a) for i, a in zip(ids, adv, strict=True)}, shared

    def loss_weights(self, rows: list[dict[str, Any]]) -> torch.Tensor:
        """(N,) per-row token weights of the configured loss variant, over the whole batch of every process.

        Each process holds part of the batch, so the counts a variant divides by (sequences, tokens, longest
        sequence) are merged over processes first. DDP (and FSDP / DeepSpeed) then *average* the gradients of
        the processes; the weights are multiplied by the number of processes so that this average is the sum
        over the whole batch, i.e. exactly the one-process gradient of the same batch (tests/sage_agents/
        test_distributed.py). A collective: every process must call it.
        """
        cfg = self.config
        seq_index = {s: i for i, s in enumerate(dict.fromkeys(r["seq"] for r in rows))}
        lengths = trained_lengths(rows)
        seq_ids = [seq_index[r["seq"]] for r in rows]
        totals = batch_counts(lengths, seq_ids)
        if self.world > 1:
            local = torch.tensor([[totals.sequences, totals.tokens, totals.longest]], device=self.accelerator.device)
            parts = self.accelerator.gather(local).tolist()  # (world, 3)
            totals = merge_counts([BatchCounts(*map(int, part)) for part in parts])
        return row_weights(lengths, cfg.loss_type, seq_ids, cfg.dr_grpo_max_len, totals) * self.world

    def micro_batches(self, rows: Sequence[dict[str, Any]]) -> list[list[int]]:
        """Row indices of each micro-batch of ``micro_batch_size``, rows taken in the order of their prompts.

        The gradient is a sum over rows, so the order is free; in prompt order the rows of a micro-batch share a
        long prompt prefix (a group's first turns are one prompt, its later turns share the task and the early
        history), which :func:`completion_logprobs` runs once.
        """
        order = sorted(range(len(rows)), key=lambda i: rows[i]["prompt_ids"])
        size = self.config.micro_batch_size
        return [order[i : i + size] for i in range(0, len(order), size)]

    def add_reference_logprobs(self, rows: list[dict[str, Any]]) -> None:
        """Set each row's ``ref_logp`` (T,): the reference model's log-probs, once per batch (not per PPO epoch)."""
        ref, switch_off = self.ref_model, contextlib.nullcontext()
        if ref is None:  # LoRA: the reference is the base model, i.e. the policy with its adapter switched off
            ref, switch_off = self.model, self.accelerator.unwrap_model(self.model).disable_adapter()
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad(), switch_off:
            for idx in self.micro_batches(rows):
                batch = [rows[i] for i in idx]
                logp, _, _ = self.logprobs(ref, batch)  # (B, T)
                for j, r in enumerate(batch):
                    r["ref_logp"] = logp[j, : len(r["completion_ids"])]  # (T_j,)
        self.model.train(was_training)

    def accumulate_gradients(self, rows: list[dict[str, Any]], weights: torch.Tensor) -> dict[str, float]:
        """Backward over ``rows`` in micro-batches; the summed gradient equals the full-batch gradient."""
        acc = self.accelerator
        micro = self.micro_batches(rows)
        sums: dict[str, float] = {}
        for m, idx in enumerate(micro):
            sync = contextlib.nullcontext() if m == len(micro) - 1 else acc.no_sync(self.model)
            with sync:  # DDP all-reduces only on the last micro-batch
                stats = self._micro_step([rows[i] for i in idx], weights[idx].to(acc.device))
            for key, value in stats.items():
                sums[key] = sums.get(key, 0.0) + value
        return sums

    def update(self, rows: list[dict[str, Any]]) -> dict[str, float]:
        """``ppo_epochs`` optimizer steps of the clipped objective over ``rows``."""
        cfg, acc = self.config, self.accelerator
        if not rows:
            return {"losses/policy_loss": 0.0, "losses/grad_norm": 0.0}
        weights = self.loss_weights(rows)  # (N,), from every row: the loss variant's counts are the whole batch's
        entropy_share = 1.0
        if cfg.beta > 0:
            self.add_reference_logprobs(rows)
        else:
            rows, weights, entropy_share = rows_with_gradient(rows, weights)
        self.model.train()
        sums: dict[str, float] = {}
        params = [p for p in self.model.parameters() if p.requires_grad]
        for _ in range(cfg.ppo_epochs):
            self.optimizer.zero_grad(set_to_none=True)
            stats = self.accumulate_gradients(rows, weights)
            if cfg.max_grad_norm > 0:
                stats["losses/grad_norm"] = float(acc.clip_grad_norm_(params, cfg.max_grad_norm))
            else:
                grads = [p.grad.norm() for p in params if p.grad is not None]
                stats["losses/grad_norm"] = float(torch.norm(torch.stack(grads)))
            self.optimizer.step()
            stats["losses/entropy"] /= entropy_share
            for key, value in stats.items():
                sums[key] = sums.get(key, 0.0) + value / cfg.ppo_epochs
        self.optimizer.zero_grad(set_to_none=True)
        return sums

    def logprobs(
        self, model: Any, batch: Sequence[dict[str, Any]], with_entropy: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """``(logp, mask, entropy)`` (B, T) of ``batch``'s rows under ``model``.

        Per token, or per choice for rows decoded by whole options: the distribution each was sampled from.
        """
        prompts, completions = [r["prompt_ids"] for r in batch], [r["completion_ids"] for r in batch]
        by_options = {r.get("choices") is not None for r in batch}
        assert len(by_options) == 1, "a batch mixes rows decoded by whole options with rows decoded token by token"
        if by_options.pop():
            return choice_logprobs(
                model, prompts, completions, [r["choices"] for r in batch], temperature=self.config.temperature,
                with_entropy=with_entropy,
            )  # fmt: skip
        return completion_logprobs(
            model, prompts, completions, temperature=self.config.temperature, pad_id=self.policy.pad_id,
            with_entropy=with_entropy, allowed=[r.get("allowed") for r in batch],
        )  # fmt: skip

    def _micro_step(self, batch: list[dict[str, Any]], weights: torch.Tensor) -> dict[str, float]:
        cfg, device = self.config, self.accelerator.device
        logp, mask, entropy = self.logprobs(self.model, batch, with_entropy=True)  # (B, T) each
        old = torch.zeros_like(logp)  # (B, T)
        for i, r in enumerate(batch):
            old[i, : len(r["old_logp"])] = torch.tensor(r["old_logp"], device=device)
        adv = torch.tensor([r["adv"] for r in batch], device=device)  # (B,)
        ref = None
        if cfg.beta > 0:
            assert all("ref_logp" in r for r in batch), "add_reference_logprobs(rows) runs before the update"
            ref = torch.zeros_like(logp)  # (B, T)
            for i, r in enumerate(batch):
                ref[i, : len(r["ref_logp"])] = r["ref_logp"]
        loss, stats = policy_loss(
            logp,
            old,
            adv,
            mask,
            weights,
            eps_low=cfg.eps_low,
            eps_high=cfg.eps_high,
            beta=cfg.beta,
            ref_logp=ref,
        )
        self.accelerator.backward(loss)
        out = {f"losses/{k}": float(v) for k, v in stats.items()}
        out["losses/loss"] = float(loss.detach())
        out["losses/entropy"] = float((entropy * weights[:, None] * mask).sum())
        return out

    def train_step(self) -> dict[str, float]:
        """Roll out, update, and return this step's metrics (averaged over processes)."""
        t0 = time.perf_counter()
        rollouts = self.rollout()
        t1 = time.perf_counter()
        rows, reward_stats = self.build_rows(rollouts)
        chain_length = int(self.envs[0].unwrapped.chain_length)  # every process reports the same positions
        learning_rate = self.scheduler.get_last_lr()[0]
        metrics = {**rollout_stats(rollouts, chain_length), **reward_stats, **self.update(rows)}
        self.scheduler.step()
        t2 = time.perf_counter()
        self.last_rollouts = rollouts
        self.step += 1
        if self.reskill is not None:
            metrics.update(self.reskill.observe(rollouts, self.step))
        metrics.update(
            {
                "charts/learning_rate": learning_rate,
                "charts/tokens_generated": float(sum(len(r["completion_ids"]) for r in rows)),
                "charts/turns": float(len(rows)),
                "charts/rollout_seconds": t1 - t0,
                "charts/update_seconds": t2 - t1,
                "charts/step_seconds": t2 - t0,
            }
        )
        if self.world > 1:
            metrics = self.mean_over_processes(metrics)
        metrics["charts/step"] = float(self.step)
        return metrics

    def mean_over_processes(self, metrics: dict[str, float]) -> dict[str, float]:
        """Each metric averaged over processes; every process must hold the same keys (a collective).

        The values travel in one tensor ordered by key, so a process with another key set would reduce a tensor
        of another size (a crash or a hang): the key sets are compared first and a difference raises.
        """
        from accelerate.utils import gather_object

        keys = sorted(metrics)
        key_sets = gather_object([keys])  # one list per process
        if any(other != keys for other in key_sets):
            diff = sorted(set().union(*map(set, key_sets)) - set(keys).intersection(*map(set, key_sets)))
            raise RuntimeError(
                f"processes logged different metric keys (differing: {diff}); every process must report the "
                "same keys, e.g. rollout_stats(rollouts, chain_length) with the env's configured chain_length."
            )
        values = torch.tensor([metrics[k] for k in keys], device=self.accelerator.device)
        values = self.accelerator.reduce(values, reduction="mean")
        return dict(zip(keys, values.tolist(), strict=True))

    # ------------------------------------------------------------------ loop and logging
    def train(self) -> list[dict[str, float]]:
        """Train until ``config.total_steps``; return the metrics of the steps run here."""
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

        from sage_agents.progress import Progress  # plain progress lines in a log

        cfg, history = self.config, []
        if self.is_main:
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / "config.json").write_text(cfg.to_json())
            if self.step == 0:  # a fresh run (or a resume that found no checkpoint) starts a fresh log
                (self.out / METRICS_FILE).unlink(missing_ok=True)
        columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn()]
        columns += [TimeRemainingColumn(), TextColumn("{task.fields[info]}")]
        with Progress(*columns, disable=not (cfg.progress and self.is_main)) as bar:
            task = bar.add_task(cfg.algo, total=cfg.total_steps, completed=self.step, info="")
            if cfg.eval_every and self.step == 0:
                self.log(self.evaluate())
            while self.step < cfg.total_steps:
                metrics = self.train_step()
                history.append(metrics)
                self.log(metrics)
                if cfg.eval_every and (self.step % cfg.eval_every == 0 or self.step == cfg.total_steps):
                    self.log(self.evaluate())
                info = f"TGC {metrics['env/task_success']:.2f} R {metrics['env/reward_mean']:.2f}"
                bar.update(task, completed=self.step, info=info)
                if (cfg.save_every and self.step % cfg.save_every == 0) or self.step == cfg.total_steps:
                    self.save_checkpoint()
        if self._writer is not None:
            self._writer.flush()
        return history

    def evaluate(self) -> dict[str, float]:
        """Greedy play of the first ``eval_chains`` chains of ``eval_split`` (the same chains and seeds every time).

        Played by :func:`sage_agents.evaluation.evaluate_policy`, the leaderboard evaluator's path: ``group_size``
        chains in lockstep, a finished chain's env starting the next at once. SAGE starts each chain from its
        skill bank (unless ``eval_from_bank`` is off) and ReSkill from its current library, as the leaderboard
        evaluator does with a trained agent.
        Returns ``charts/step`` and the ``eval/*`` statistics (the ``env/*`` names of docs/agents.md; main process
        only, the others return ``{}``).
        """
        cfg = self.config
        if not self.is_main:
            return {}
        if self._eval_envs is None:
            n = cfg.group_size
            fn = self._env_fn
            self._eval_envs = [fn() for _ in range(n)] if fn else make_envs(cfg, n, cfg.eval_split, cfg.eval_env_kwargs)
        library = None
        if cfg.algo == "sage" and cfg.eval_from_bank and len(self.skill_bank):
            library = self.skill_bank
        elif self.reskill is not None:
            library = self.reskill.registry.env_library("current")
        chains = list(range(min(cfg.eval_chains, int(self._eval_envs[0].unwrapped.num_chains))))
        self.model.eval()
        envs = self._eval_envs[: len(chains)]
        _, stats = evaluate_policy(self.policy, envs, chains, [cfg.seed + c for c in chains], skill_library=library)
        return {"charts/step": float(self.step), **{"eval/" + k.split("/", 1)[1]: v for k, v in stats.items()}}

    def log(self, metrics: dict[str, float]) -> None:
        """Append to metrics.jsonl and TensorBoard (main process only)."""
        if not self.is_main:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        if "jsonl" in self.config.report_to:
            with open(self.out / METRICS_FILE, "a") as f:
                f.write(json.dumps(metrics, sort_keys=True) + "\n")
        if "tensorboard" in self.config.report_to:
            if self._writer is None:
                from torch.utils.tensorboard import SummaryWriter

                self._writer = SummaryWriter(str(self.out / "tb"), purge_step=self.step)
            for key, value in metrics.items():
                self._writer.add_scalar(key, value, self.step)

    # ------------------------------------------------------------------ checkpoints

    def _persistent_libraries(self) -> list[Any] | None:
        """Each env's library as a dict when they persist across chains (``library_scope="persistent"``)."""
        envs = [env.unwrapped for env in self.envs]
        if all(getattr(e, "library_scope", None) == "persistent" and hasattr(e, "library") for e in envs):
            return [e.library.to_dict() for e in envs]
        return None

    def save_checkpoint(self) -> Path:
        """Write ``checkpoints/step_N`` atomically: a temporary folder renamed with ``os.replace``.

        Holds the model + tokenizer in ``model/`` (``save_pretrained``; with LoRA the adapter, which
        ``PeftModel.from_pretrained(base, model/)`` and :func:`~sage_agents.models.load_policy` load), accelerate's
        ``save_state`` in ``state/`` (optimizer, scheduler, grad scaler, every process's RNG states), the trainer
        state (step, chain sampler), the last chains' libraries, the persistent ones, and the skill bank
        (``skill_bank.json`` with history, ``skill_library/`` as SKILL.md folders).
        """
        acc = self.accelerator
        final = self.ckpt_dir / f"step_{self.step:07d}"
        tmp = self.ckpt_dir / f".tmp_step_{self.step:07d}"
        if self.is_main:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        acc.wait_for_everyone()
        acc.save_state(str(tmp / "state"))
        libraries = self._persistent_libraries()
        if libraries is not None:  # every env of every process carries its own library
            (tmp / f"skill_libraries_{self.rank}.json").write_text(json.dumps(libraries))
        weights = acc.get_state_dict(self.model)  # every process: gathers sharded (FSDP / ZeRO-3) weights
        if self.is_main:
            acc.unwrap_model(self.model).save_pretrained(tmp / "model", state_dict=weights, safe_serialization=True)
            self.tokenizer.save_pretrained(tmp / "model")
            state = {
                "step": self.step,
                "world": self.world,
                "chain_rng": self.chain_rng.bit_generator.state,  # the same on every process
                "config": self.config.to_dict(),
            }
            (tmp / "trainer_state.json").write_text(json.dumps(state, indent=2))
            summaries = [ro.library for ro in self.last_rollouts]
            (tmp / "skill_library.json").write_text(json.dumps(summaries, indent=2))
            (tmp / "skill_bank.json").write_text(json.dumps(self.skill_bank.to_dict()))
            self.skill_bank.save(tmp / "skill_library")  # SKILL.md folders, for the evaluator and for people
            if self.reskill is not None:
                self.reskill.save(tmp, self.step)
        acc.wait_for_everyone()
        if self.is_main:
            if final.exists():
                trash = final.with_name(final.name + ".old")
                os.replace(final, trash)
                shutil.rmtree(trash)
            os.replace(tmp, final)
            latest_tmp = self.ckpt_dir / ".latest.tmp"
            latest_tmp.write_text(final.name)
            os.replace(latest_tmp, self.ckpt_dir / "latest")
            kept = sorted(p for p in self.ckpt_dir.glob("step_*") if p.is_dir())
            for old in kept[: -self.config.keep_checkpoints]:
                shutil.rmtree(old)
        acc.wait_for_everyone()
        return final

    def latest_checkpoint(self) -> Path | None:
        """The newest complete checkpoint folder, or None (:func:`sage_agents.checkpoints.latest_checkpoint`)."""
        return latest_checkpoint(self.ckpt_dir)

    def _load_weights_hook(self, models: list[Any], input_dir: str) -> None:
        """``load_state`` pre-hook: load the weights from the checkpoint's ``model/`` (see ``save_checkpoint``)."""
        if not models:  # FSDP / DeepSpeed: accelerate restores its own sharded copy
            return
        folder = Path(input_dir).parent / "model"
        model = self.accelerator.unwrap_model(self.model)
        if self.config.lora_r:
            from peft import set_peft_model_state_dict
            from safetensors.torch import load_file

            set_peft_model_state_dict(model, load_file(folder / "adapter_model.safetensors"))
        else:
            from transformers import AutoModelForCausalLM

            saved = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=model.dtype)
            model.load_state_dict(saved.state_dict())
        models.clear()

    def load_checkpoint(self, path: str | os.PathLike | None = None) -> None:
        """Restore weights, optimizer, scheduler, RNG states, step and library; trim metrics.jsonl to that step."""
        path = Path(path) if path else self.latest_checkpoint()
        if path is None:
            return  # nothing to resume from: start fresh
        self.accelerator.load_state(str(path / "state"))  # weights through _load_weights_hook
        state = json.loads((path / "trainer_state.json").read_text())
        self.step = int(state["step"])
        self.chain_rng.bit_generator.state = state["chain_rng"]
        if self.reskill is not None:
            self.reskill.load(path, self.step)
        if (path / "skill_bank.json").exists():
            self.skill_bank = SkillLibrary.from_dict(json.loads((path / "skill_bank.json").read_text()))
        library_file = path / f"skill_libraries_{self.rank}.json"
        if library_file.exists():
            for env, state in zip(self.envs, json.loads(library_file.read_text()), strict=True):
                env.unwrapped.library = type(env.unwrapped.library).from_dict(state)
        metrics = self.out / METRICS_FILE
        if self.is_main and metrics.exists():
            rows = [row for row in read_metrics(self.out) if row.get("charts/step", 0) <= self.step]
            tmp = metrics.with_suffix(".jsonl.tmp")
            tmp.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))
            os.replace(tmp, metrics)

    def close(self) -> None:
        """Close the envs and the TensorBoard writer."""
        for env in [*self.envs, *(self._eval_envs or [])]:
            env.close()
        if self._writer is not None:
            self._writer.close()
