"""The TRL backend: SAGE's advantages through TRL's own normalisation, packed multi-turn samples, training."""

from __future__ import annotations

import copy
import dataclasses
import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from sage_agents.algos.sage import group_rewards, position_advantages
from sage_agents.config import ConfigError, TrainConfig
from sage_agents.integrations.trl import VLLMPolicy, make_trl_trainer, pack_task
from sage_agents.policy import completion_logprobs
from sage_agents.rollout import ChainRollout, Turn, rollout_chains
from sage_agents.trainer import Trainer
from sage_app.cli import app
from tests.sage_agents.fake_env import FAST_TRAIN, FakeChainEnv

FAST = dict(FAST_TRAIN, backend="trl", cpu=True)


def config(tmp_path, **overrides):
    return TrainConfig(**{**FAST, "output_dir": str(tmp_path / "run"), **overrides})


def recorded_rollouts(n_chains, group, length, seed=0):
    """Deterministic chain rollouts with every reward case: successes, skill reuse, early stops, short chains."""
    rng = np.random.default_rng(seed)
    rollouts = []
    for c in range(n_chains):
        chain_len = length if c % 2 == 0 else length - 1  # a scenario remainder: shorter than the env's L
        for _ in range(group):
            ro = ChainRollout(chain=c, task_success=[False] * chain_len, played=[False] * chain_len)
            ro.no_action = [False] * chain_len
            for k in range(chain_len):
                ro.played[k] = True
                for _ in range(int(rng.integers(1, 4))):
                    ids = rng.integers(4, 60, size=int(rng.integers(1, 5))).tolist()
                    prompt = rng.integers(4, 60, size=int(rng.integers(2, 8))).tolist()
                    ro.turns.append(Turn(k, prompt, ids, [-1.0] * len(ids), "a", "command", "command", True, 0.0, 1))
                if rng.random() < 0.15:  # a reply with no parseable action ends the chain
                    ro.no_action[k] = True
                    break
                ro.task_success[k] = bool(rng.random() < 0.5)
            ro.reuse = {(j, k) for j in range(chain_len) for k in range(j) if rng.random() < 0.5}
            rollouts.append(ro)
    return rollouts


@pytest.mark.parametrize("scale_std", [False, True])
@pytest.mark.parametrize("algo", ["sage", "grpo"])
def test_trl_advantages_equal_the_native_trainers_on_the_same_rollouts(tiny, tmp_path, scale_std, algo):
    model, tok = tiny
    group, length, chains = 4, 3, 3
    cfg = config(tmp_path, algo=algo, scale_std=scale_std, group_size=group, chains_per_step=chains)
    rollouts = recorded_rollouts(chains, group, length)
    env_fn = lambda: FakeChainEnv(chain_length=length)  # noqa: E731

    native = Trainer(
        dataclasses.replace(cfg, backend="native"), model=copy.deepcopy(model), tokenizer=tok, env_fn=env_fn
    )
    rows, _ = native.build_rows(rollouts)
    trainer = make_trl_trainer(cfg, model=copy.deepcopy(model), tokenizer=tok, env_fn=env_fn)
    rollout = trainer.rollout_func
    trainer.rollout_func = lambda prompts, tr: rollout.samples(rollouts, tok.eos_token_id)  # recorded, not played
    trainer.model.train()
    n_rows = chains * group * length
    out = trainer._generate_and_score_completions([{"prompt": ""} for _ in range(n_rows)])  # TRL's own path
    trl_adv = out["advantages"].cpu()  # (n_rows,) position-major within each chain

    checked = 0
    for c in range(chains):
        chunk = rollouts[c * group : (c + 1) * group]
        rewards, valid = group_rewards(chunk, mode=cfg.effective_reward_mode, no_action_penalty=cfg.no_action_penalty)
        expected = position_advantages(rewards, valid, scale_std=scale_std)  # (G, L')
        for k in range(length):
            for g in range(group):
                got = float(trl_adv[c * group * length + k * group + g])
                want = float(expected[g, k]) if k < expected.shape[1] else 0.0
                assert got == pytest.approx(want, abs=1e-6), (c, k, g)
                checked += abs(want) > 0
    assert checked > 10  # the rollouts give many non-zero advantages
    row_index = 0  # and every native per-turn row carries its task's TRL advantage
    for i, ro in enumerate(rollouts):
        c, g = divmod(i, group)
        for turn in ro.turns:
            assert rows[row_index]["adv"] == pytest.approx(
                float(trl_adv[c * group * length + turn.task_index * group + g]), abs=1e-6
            )
            row_index += 1
    assert row_index == len(rows)
    mask = out["completion_mask"] * out["tool_mask"]  # env text (later turns' prompts) is out of the loss
    for i, ro in enumerate(rollouts):
        c, g = divmod(i, group)
        for k in range(length):
            policy_tokens = sum(len(t.completion_ids) for t in ro.turns_of(k))
            assert int(mask[c * group * length + k * group + g].sum()) == policy_tokens


@pytest.mark.parametrize("loss_type", ["grpo", "dapo"])
@pytest.mark.parametrize("restricted", [False, True])
def test_trl_gradient_is_close_to_the_native_gradient_on_the_same_rollouts(tiny, tmp_path, loss_type, restricted):
    """The approximations (docs/agents.md): later turns are scored after the earlier turns of their task, and a
    constrained token's log-prob is the full-vocabulary one, not the one restricted to the tokens it was drawn
    among (forced tokens are masked in both). ``restricted=False`` drops the allowed sets, leaving the first."""
    from trl.trainer.utils import split_tensor_dict

    model, tok = tiny
    cfg = config(tmp_path, group_size=8, loss_type=loss_type, seed=1)
    env_fn = lambda: FakeChainEnv(chain_length=2, max_steps_per_task=6)  # noqa: E731
    native = Trainer(
        dataclasses.replace(cfg, backend="native"), model=copy.deepcopy(model), tokenizer=tok, env_fn=env_fn
    )
    rollouts = native.rollout()
    for turn in (t for ro in rollouts for t in ro.turns if not restricted):  # as if sampled unconstrained
        with torch.no_grad():
            logp, _, _ = completion_logprobs(model, [turn.prompt_ids], [turn.completion_ids], pad_id=tok.pad_token_id)
        turn.logprobs, turn.allowed = logp[0].tolist(), None
    rows, _ = native.build_rows(rollouts)
    native.model.train()
    native.accumulate_gradients(rows, native.loss_weights(rows))
    g_native = torch.cat([p.grad.flatten() for p in native.model.parameters()])
    trainer = make_trl_trainer(cfg, model=copy.deepcopy(model), tokenizer=tok, env_fn=env_fn)
    rollout = trainer.rollout_func
    trainer.rollout_func = lambda prompts, tr: rollout.samples(rollouts, tok.eos_token_id)
    trainer.model.train()
    out = trainer._generate_and_score_completions([{"prompt": ""} for _ in range(rollout.rows_per_chain)])
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
    for micro in split_tensor_dict(out, trainer.args.steps_per_generation):  # TRL's own micro-batches
        trainer.compute_loss(trainer.model, micro).backward()
    g_trl = torch.cat([p.grad.flatten() for p in trainer.model.parameters()])
    cosine = float(torch.nn.functional.cosine_similarity(g_native, g_trl, dim=0))
    ratio = float(g_trl.norm() / g_native.norm())
    turns = sum(len(r.turns) for r in rollouts)
    print(f"\n{loss_type}, restricted={restricted}: {turns} turns, cosine {cosine:.4f}, norm ratio {ratio:.4f}")
    assert g_native.norm() > 0
    if restricted:  # seeds 1-4: cosine 0.95-0.98 / 0.71-0.86, norm ratio 1.07-1.35 / 1.32-2.32 (grpo / dapo)
        assert cosine > (0.9 if loss_type == "grpo" else 0.6) and 0.8 < ratio < 2.5
    else:
        assert cosine > 0.95 and 0.9 < ratio < 1.1


def test_packed_task_scores_its_first_turn_exactly_and_masks_env_text(tiny):
    from sage_agents.policy import LLMPolicy

    model, tok = tiny
    env = FakeChainEnv(chain_length=2, max_steps_per_task=3)
    policy = LLMPolicy(model, tok, max_new_tokens=6)
    torch.manual_seed(0)
    (ro,) = rollout_chains([env], policy, [1], [0])
    turns = ro.turns_of(0)
    prompt, completion, _, mask = pack_task(turns, tok.eos_token_id)
    assert sum(mask) == sum(len(t.completion_ids) for t in turns) and len(mask) == len(completion)
    with torch.no_grad():
        packed, _, _ = completion_logprobs(model, [prompt], [completion], pad_id=tok.pad_token_id)  # (1, T)
        native = [
            completion_logprobs(model, [t.prompt_ids], [t.completion_ids], pad_id=tok.pad_token_id)[0][0] for t in turns
        ]
    ours = packed[0][torch.tensor(mask, dtype=torch.bool)]
    first = len(turns[0].completion_ids)
    torch.testing.assert_close(ours[:first], native[0], atol=1e-5, rtol=0)  # same context: same log-probs
    gap = (ours[first:] - torch.cat(native[1:])).abs().mean() if len(turns) > 1 else torch.tensor(0.0)
    print(f"\nlater turns: mean |logp(packed) - logp(own prompt)| = {float(gap):.4f} over {len(ours) - first} tokens")
    assert pack_task([], tok.eos_token_id) == ([tok.eos_token_id], [tok.eos_token_id], [0.0], [0])


def test_two_trl_steps_change_every_trainable_parameter(tiny, tmp_path):
    model, tok = tiny
    cfg = config(tmp_path, total_steps=2)
    trainer = make_trl_trainer(cfg, model=copy.deepcopy(model), tokenizer=tok, env_fn=lambda: FakeChainEnv(easy=True))
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    after = dict(trainer.model.named_parameters())
    assert [n for n in before if torch.equal(before[n], after[n])] == []
    logs = [r for r in trainer.state.log_history if "env/task_success" in r]
    assert len(logs) == 2 and logs[0]["grad_norm"] > 0
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["charts/step"] for r in lines if "env/task_success" in r] == [1.0, 2.0]


def test_reskill_assigns_versions_inside_the_trl_rollout(tiny, tmp_path):
    model, tok = tiny
    cfg = config(tmp_path, algo="reskill", total_steps=2, reskill_min_reservoir=0)
    trainer = make_trl_trainer(cfg, model=copy.deepcopy(model), tokenizer=tok, env_fn=lambda: FakeChainEnv(easy=True))
    reskill, arms = trainer.rollout_func.reskill, []
    original = reskill.assign

    def assign(n):
        libraries = original(n)
        arms.append(list(reskill._arms))  # the arm ("new" / "old") of each rollout slot
        return libraries

    reskill.assign = assign
    trainer.train()
    # step 1 fills the reservoir and the creator proposes a version; step 2 tests it inside the group
    assert arms[0] == [""] * cfg.group_size and sorted(set(arms[1])) <= ["new", "old"] and len(arms[1]) == 4
    assert "reskill/p_new" in trainer.state.log_history[1]


class FakeVLLM:
    """TRL's ``VLLMGeneration.generate`` contract: top-k log-probs per token, the sampled token's first."""

    max_completion_length = 999

    def generate(self, prompts, images, num_generations):
        self.seen = (prompts, self.max_completion_length)
        completions = [[7, 8] for _ in prompts]
        return prompts, completions, [[[-0.5, -2.0], [-0.25]] for _ in prompts], None


def test_vllm_policy_generates_through_trls_vllm_engine(tiny):
    model, tok = tiny
    policy = VLLMPolicy(model, tok, vllm=FakeVLLM(), max_new_tokens=5)
    (out,) = policy.generate(["go to box 1"])
    assert out.completion_ids == [7, 8] and out.logprobs == [-0.5, -0.25]
    assert policy.vllm.seen == ([policy.encode("go to box 1")], 5)  # a turn's budget


def test_backend_config_is_validated():
    with pytest.raises(ConfigError, match="backend='gpu'"):
        TrainConfig(backend="gpu")
    with pytest.raises(ConfigError, match="only applies to backend='trl'"):
        TrainConfig(trl_args={"use_vllm": True})
    with pytest.raises(ConfigError, match="eval_every=5.*backend='native'"):
        TrainConfig(backend="trl", eval_every=5)


def test_sage_train_with_backend_trl_trains_through_the_adapter(tmp_path, monkeypatch):
    env_id = "SageChain-FakeTrl-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=lambda split, **kwargs: FakeChainEnv(easy=True, **kwargs))
    import sage_agents.trainer

    monkeypatch.setattr(sage_agents.trainer, "Trainer", None)  # the native trainer must not be reached
    sets = [f"env_id={env_id}", "backend=trl", "total_steps=1", "group_size=2", "tiny_hidden=32", "tiny_layers=1"]
    sets += ["constrained=true", "progress=false", "cpu=true", f"output_dir={tmp_path / 'run'}", 'report_to=["jsonl"]']
    result = CliRunner().invoke(app, ["train", *[x for s in sets for x in ("--set", s)]])
    assert result.exit_code == 0, result.output
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert "rewards/sage_reward/mean" in rows[0] and "env/task_success" in rows[0]
