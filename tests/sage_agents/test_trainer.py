import ast
import copy
import dataclasses
import inspect
import json
import math
import os

import pytest
import torch

from sage_agents.algos.grpo import LOSS_TYPES
from sage_agents.checkpoints import metric_curve, read_metrics
from sage_agents.config import ConfigError, TrainConfig
from sage_agents.trainer import Trainer, rows_with_gradient
from tests.sage_agents.fake_env import FAST_TRAIN, FakeChainEnv

FAST = FAST_TRAIN


def make_trainer(tiny, tmp_path, name="run", **overrides):
    model, tok = tiny
    cfg = TrainConfig(**{**FAST, "output_dir": str(tmp_path / name), **overrides})
    return Trainer(cfg, model=copy.deepcopy(model), tokenizer=tok, env_fn=lambda: FakeChainEnv(easy=True))


def params(trainer):
    return {n: p.detach().clone() for n, p in trainer.accelerator.unwrap_model(trainer.model).named_parameters()}


def test_every_config_field_has_a_one_line_docstring_below_it():
    tree = ast.parse(inspect.getsource(TrainConfig))
    body = tree.body[0].body
    fields = [(i, s) for i, s in enumerate(body) if isinstance(s, ast.AnnAssign)]
    assert len(fields) >= 30
    for i, stmt in fields:
        doc = body[i + 1]
        assert isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant), stmt.target.id
        assert isinstance(doc.value.value, str) and "\n" not in doc.value.value.strip(), stmt.target.id


@pytest.mark.parametrize(
    "kwargs, pieces",
    [
        ({"algo": "ppo"}, ["algo='ppo'", "one of", "set algo"]),
        ({"group_size": 1}, ["group_size=1", "at least 2", ">= 2"]),
        ({"lr": 0.0}, ["lr=0.0", "> 0", "1e-6"]),
        ({"loss_type": "bnpo"}, ["loss_type='bnpo'", "dr_grpo"]),
        ({"no_action_penalty": 1.0}, ["no_action_penalty=1.0", "<= 0", "None"]),
        ({"reward_mode": "score"}, ["reward_mode='score'", "one of", "'progress'"]),
        ({"report_to": ["wandb"]}, ["report_to=['wandb']", "jsonl"]),
        ({"top_p": 0.0}, ["top_p=0.0", "(0, 1]"]),
        ({"dtype": "fp8"}, ["dtype='fp8'", "one of", "float32"]),
        ({"mixed_precision": "bf17"}, ["mixed_precision='bf17'", "one of", "bf16"]),
        ({"lora_r": -1}, ["lora_r=-1", "non-negative", "use 0"]),
        ({"lora_r": 8, "lora_dropout": 1.0}, ["lora_dropout=1.0", "[0, 1)", "0.05"]),
        ({"lora_r": 8, "lora_target_modules": []}, ["lora_target_modules=[]", "non-empty list", "None"]),
        ({"lora_target_modules": ["q_proj"]}, ["lora_target_modules=['q_proj']", "LoRA on", "lora_r > 0"]),
        ({"backend": "trl", "lora_r": 8}, ["lora_r=8", "backend='trl'", "lora_r=0"]),
        ({"backend": "trl", "mixed_precision": "bf16"}, ["mixed_precision='bf16'", "trl_args", "bf16"]),
        ({"train_chains": 0}, ["train_chains=0", "positive integer", "None (all chains)"]),
        ({"lr_scheduler_type": "exponential"}, ["lr_scheduler_type='exponential'", "one of", "linear"]),
    ],
)
def test_config_errors_name_value_rule_and_fix(kwargs, pieces):
    with pytest.raises(ConfigError) as err:
        TrainConfig(**kwargs)
    assert all(p in str(err.value) for p in pieces), str(err.value)


def test_train_chains_limits_the_chains_training_draws_from(tiny, tmp_path):
    everything = make_trainer(tiny, tmp_path, "all", chains_per_step=1)
    assert everything.num_chains == 4  # the fake env's split
    first_two = make_trainer(tiny, tmp_path, "two", chains_per_step=1, train_chains=2)
    assert first_two.num_chains == 2
    drawn = {c for _ in range(50) for c in first_two.next_chains()}
    assert drawn == {0, 1}  # 50 draws of two chains: both seen, none beyond
    assert make_trainer(tiny, tmp_path, "more", train_chains=99).num_chains == 4  # capped at the split's size


def test_config_defaults_follow_the_paper_and_round_trip():
    cfg = TrainConfig()
    assert (cfg.algo, cfg.group_size, cfg.lr, cfg.beta, cfg.scale_std) == ("sage", 8, 1e-6, 0.0, False)
    assert cfg.no_action_penalty == -1.0 and cfg.effective_reward_mode == "skill"
    assert TrainConfig(algo="grpo").effective_reward_mode == "outcome"
    assert TrainConfig.from_dict(json.loads(cfg.to_json())) == cfg
    with pytest.raises(ConfigError, match="unknown TrainConfig fields"):
        TrainConfig.from_dict({"lrr": 1})


def test_two_steps_change_every_trainable_parameter(tiny, tmp_path):
    trainer = make_trainer(tiny, tmp_path, total_steps=2, report_to=["jsonl", "tensorboard"])
    before = params(trainer)
    history = trainer.train()
    after = params(trainer)
    unchanged = [n for n in before if torch.equal(before[n], after[n])]
    assert not unchanged
    assert [h["charts/step"] for h in history] == [1.0, 2.0]
    for key in (
        "env/task_success",
        "env/chain_success",
        "losses/policy_loss",
        "losses/grad_norm",
        "charts/turns",
    ):
        assert key in history[0]
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["charts/step"] == 2.0
    assert any(p.name.startswith("events.out.tfevents") for p in (tmp_path / "run" / "tb").iterdir())
    ckpts = sorted(os.listdir(tmp_path / "run" / "checkpoints"))
    assert ckpts == ["latest", "step_0000002"]  # save at the end; no temporary folders left
    files = set(os.listdir(tmp_path / "run" / "checkpoints" / "step_0000002"))
    assert {"model", "state", "trainer_state.json", "skill_library.json"} <= files
    state = set(os.listdir(tmp_path / "run" / "checkpoints" / "step_0000002" / "state"))
    # accelerate's save_state: optimizer, scheduler, RNGs; the weights only once, in model/
    assert {"optimizer.bin", "custom_checkpoint_0.pkl", "random_states_0.pkl"} <= state
    assert not any(name.startswith(("model", "pytorch_model")) for name in state), state


def test_resume_is_exact(tiny, tmp_path):
    full = make_trainer(tiny, tmp_path, "full", total_steps=3, save_every=1)
    full_history = full.train()
    part = make_trainer(tiny, tmp_path, "part", total_steps=2, save_every=1)
    part.train()
    del part  # "killed" after step 2
    resumed = make_trainer(tiny, tmp_path, "part", total_steps=3, save_every=1, resume=True)
    assert resumed.step == 2
    resumed.train()
    a, b = params(full), params(resumed)
    assert all(torch.equal(a[n], b[n]) for n in a)

    def read(name):
        return [{k: v for k, v in r.items() if not k.endswith("_seconds")} for r in read_metrics(tmp_path / name)]

    assert read("full") == read("part") and len(read("full")) == len(full_history) == 3
    assert sorted(os.listdir(tmp_path / "part" / "checkpoints")) == ["latest", "step_0000002", "step_0000003"]


def test_periodic_greedy_eval_logs_a_curve_without_perturbing_training_and_resumes(tiny, tmp_path):
    plain = make_trainer(tiny, tmp_path, "plain", total_steps=3)
    plain.train()
    evaluated = make_trainer(tiny, tmp_path, "eval", total_steps=3, eval_every=2, eval_chains=3)
    evaluated.train()
    a, b = params(plain), params(evaluated)
    assert all(torch.equal(a[n], b[n]) for n in a)  # greedy play draws no random numbers from training's streams
    rows = read_metrics(tmp_path / "eval")
    evals = [r for r in rows if "eval/task_success" in r]
    assert [r["charts/step"] for r in evals] == [0.0, 2.0, 3.0]  # before training, every 2 steps, at the end
    assert all(0.0 <= r["eval/task_success"] <= 1.0 and "env/task_success" not in r for r in evals)
    assert len(rows) == 3 + 3
    curve = metric_curve(tmp_path / "eval", "eval/task_success")
    assert curve == [(int(r["charts/step"]), r["eval/task_success"]) for r in evals]
    assert [step for step, _ in metric_curve(tmp_path / "eval", "env/task_success")] == [1, 2, 3]
    assert read_metrics(tmp_path / "no-run") == [] and metric_curve(tmp_path / "no-run", "eval/task_success") == []

    part = make_trainer(tiny, tmp_path, "part", total_steps=2, save_every=1, eval_every=2, eval_chains=3)
    part.train()
    del part  # "killed" after step 2
    resumed = make_trainer(tiny, tmp_path, "part", total_steps=3, eval_every=2, eval_chains=3, resume=True)
    resumed.train()

    def read(name):
        return [{k: v for k, v in r.items() if not k.endswith("_seconds")} for r in read_metrics(tmp_path / name)]

    assert read("part") == read("eval")


def test_gradient_accumulation_matches_one_big_batch(tiny, tmp_path):
    trainer = make_trainer(tiny, tmp_path, group_size=3, beta=0.1, loss_type="grpo")
    rows, _ = trainer.build_rows(trainer.rollout())
    weights = trainer.loss_weights(rows)
    trainer.add_reference_logprobs(rows)
    grads = []
    for size in (1, 4, len(rows)):
        trainer.config.micro_batch_size = size
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer.accumulate_gradients(rows, weights)
        grads.append([p.grad.clone() for p in trainer.model.parameters()])
    assert any(g.abs().sum() > 0 for g in grads[0])
    for other in grads[1:]:
        for a, b in zip(grads[0], other, strict=True):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-7), (a - b).abs().max() / a.abs().max()


def rows_half_without_advantage(trainer):
    """Rows of one rollout of ``trainer``, every other one with advantage 0 and the rest with +-1."""
    rows, _ = trainer.build_rows(trainer.rollout())
    assert len(rows) >= 4
    for i, r in enumerate(rows):
        r["adv"] = 0.0 if i % 2 else (1.0 if i % 4 == 0 else -1.0)
    return rows


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_rows_without_advantage_leave_the_gradient_unchanged_when_left_out(tiny, tmp_path, loss_type):
    trainer = make_trainer(tiny, tmp_path, group_size=3, beta=0.0, loss_type=loss_type)
    rows = rows_half_without_advantage(trainer)
    weights = trainer.loss_weights(rows)
    kept, kept_weights, share = rows_with_gradient(rows, weights)
    assert len(kept) == (len(rows) + 1) // 2 and all(r["adv"] != 0 for r in kept)
    assert 0 < share < 1
    grads, entropy = [], []
    for batch, w in ((rows, weights), (kept, kept_weights), (kept, kept_weights / share)):
        trainer.optimizer.zero_grad(set_to_none=True)
        entropy.append(trainer.accumulate_gradients(batch, w)["losses/entropy"])
        grads.append([p.grad.clone() for p in trainer.model.parameters()])
    assert any(g.abs().sum() > 0 for g in grads[0])
    for a, b in zip(grads[0], grads[1], strict=True):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-8), (a - b).abs().max()
    # The entropy metric over the kept rows, rescaled by their share, is their mean: their weights renormalized.
    assert entropy[1] / share == pytest.approx(entropy[2], rel=1e-5)


def test_update_without_kl_skips_rows_without_advantage_to_the_same_weights(tiny, tmp_path, monkeypatch):
    import sage_agents.trainer as trainer_module

    updated, calls = [], []
    for name in ("skip", "all"):
        trainer = make_trainer(tiny, tmp_path, name, group_size=3, beta=0.0)
        rows = rows_half_without_advantage(trainer)
        if name == "all":
            monkeypatch.setattr(trainer_module, "rows_with_gradient", lambda rows, w: (rows, w, 1.0))
        micro_step = trainer._micro_step
        monkeypatch.setattr(trainer, "_micro_step", lambda b, w, f=micro_step: calls.append(len(b)) or f(b, w))
        stats = trainer.update(rows)
        updated.append((params(trainer), stats, sum(calls)))
        calls.clear()
    (skipped, skip_stats, skip_rows), (full, full_stats, full_rows) = updated
    assert skip_rows == (full_rows + 1) // 2  # half the forward and backward passes
    # Adam's first step moves a weight by ~lr whatever its gradient's size, so float noise on a near-0 gradient
    # (the rows are summed in another order) moves a few weights by up to ~1e-6; a wrong row moves many by ~lr.
    assert all(torch.allclose(skipped[n], full[n], rtol=0, atol=1e-2 * FAST["lr"]) for n in full)
    assert any(not torch.equal(skipped[n], tiny[0].state_dict()[n]) for n in skipped)  # it did move
    assert skip_stats["losses/grad_norm"] == pytest.approx(full_stats["losses/grad_norm"], rel=1e-4)


def test_rows_with_gradient_keeps_one_row_when_no_row_has_an_advantage():
    rows = [{"completion_ids": [1, 2], "adv": 0.0}, {"completion_ids": [3], "adv": 0.0}]
    kept, weights, share = rows_with_gradient(rows, torch.tensor([0.25, 0.5]))
    assert kept == rows[:1] and weights.tolist() == [0.25] and share == pytest.approx(0.5)
    assert rows_with_gradient(rows[:1], torch.ones(1)) == (rows[:1], pytest.approx(torch.ones(1)), 1.0)


def test_micro_batches_hold_every_row_once_in_prompt_order(tiny, tmp_path):
    trainer = make_trainer(tiny, tmp_path, micro_batch_size=3)
    prompts = [[5, 1], [1, 2, 3], [5, 1], [1, 2], [0], [1, 2, 3], [5]]
    micro = trainer.micro_batches([{"prompt_ids": p} for p in prompts])
    order = [i for batch in micro for i in batch]
    assert sorted(order) == list(range(len(prompts))) and [len(b) for b in micro] == [3, 3, 1]
    assert [prompts[i] for i in order] == sorted(prompts)  # equal prompts side by side: their prefix runs once
    assert order.index(1) + 1 == order.index(5) and order.index(0) + 1 == order.index(2)  # stable among equals


def test_kl_clipping_epochs_and_loss_variants_run(tiny, tmp_path):
    trainer = make_trainer(
        tiny,
        tmp_path,
        total_steps=1,
        beta=0.05,
        ppo_epochs=2,
        loss_type="dapo",
        eps_high=0.28,
        sequence_unit="turn",
        scale_std=True,
        warmup_steps=2,
    )
    metrics = trainer.train()[0]
    assert metrics["losses/kl"] >= 0 and 0 <= metrics["losses/clip_ratio"] <= 1
    assert metrics["charts/learning_rate"] == pytest.approx(5e-4)  # warm-up step 1 of 2


@pytest.mark.parametrize(
    "schedule, factors",
    [("linear", [3 / 4, 2 / 4, 1 / 4]), ("cosine", [(1 + math.cos(math.pi * s / 4)) / 2 for s in (1, 2, 3)])],
)
def test_a_decaying_schedule_ends_one_step_after_the_run_so_its_last_step_still_trains(
    tiny, tmp_path, schedule, factors
):
    trainer = make_trainer(tiny, tmp_path, total_steps=3, lr=1e-3, lr_scheduler_type=schedule)
    rates = [m["charts/learning_rate"] for m in trainer.train()]
    assert rates == pytest.approx([1e-3 * f for f in factors])


def test_grpo_free_generation_with_no_action_penalty(tiny, tmp_path):
    from sage_agents.algos.sage import group_rewards

    trainer = make_trainer(tiny, tmp_path, algo="grpo", constrained=False, max_new_tokens=4, total_steps=1)
    metrics = trainer.train()[0]
    stopped = [ro for ro in trainer.last_rollouts if any(ro.no_action)]
    assert metrics["env/no_action_rate"] > 0 and stopped  # an untrained tiny model writes garbage
    for ro in stopped:  # the chain ended at the first reply with no parseable action
        k = ro.no_action.index(True)
        assert ro.turns[-1].parsed_kind == "none" and ro.turns[-1].task_index == k
        assert not any(ro.played[k + 1 :])
        rewards, valid = group_rewards([ro], mode="outcome")
        assert rewards[0, k] == -1.0 and valid[0].tolist() == ro.played


def test_every_metric_is_documented(tiny, tmp_path):
    import re
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    metrics = make_trainer(tiny, tmp_path, total_steps=1, beta=0.1, step_advantage_weight=1.0).train()[0]
    for key in metrics:
        assert re.sub(r"pos\d+$", "pos{k}", key) in docs, key
    for field in TrainConfig.__dataclass_fields__:
        assert f"`{field}`" in docs, field


def test_the_trainconfig_table_names_no_removed_field():
    import re
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    table = docs.split("\n## TrainConfig\n", 1)[1].split("\n## ", 1)[0]
    named = [
        name
        for line in table.splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`(\w+)`", line.split(" | ")[0])
    ]
    assert len(named) > 40  # the table was found and parsed
    assert [name for name in named if name not in TrainConfig.__dataclass_fields__] == []


def test_skill_bank_keeps_only_skills_the_reward_paid_for():
    from types import SimpleNamespace

    from sage_agents.rollout import ChainRollout
    from sage_envs.skills import SkillLibrary
    from sage_envs.skills.dsl import parse_definition

    def skill(name, task):
        made, _ = parse_definition(f"skill {name}(x):\n    go to {{x}}")
        return dataclasses.replace(made, created_in_task=task)

    def env(*skills):
        return SimpleNamespace(unwrapped=SimpleNamespace(library=SkillLibrary(skills)))

    paid = ChainRollout(chain=0, task_success=[True, True], reuse={(1, 0)})  # made in 0, reused by a success
    failed_reuser = ChainRollout(chain=0, task_success=[True, False], reuse={(1, 0)})
    never_reused = ChainRollout(chain=0, task_success=[True, True])
    trainer = SimpleNamespace(skill_bank=SkillLibrary())
    trainer.envs = [env(skill("kept", 0), skill("late", 1)), env(skill("a", 0)), env(skill("b", 0))]
    Trainer.bank_skills(trainer, [paid, failed_reuser, never_reused])
    assert trainer.skill_bank.names() == ["kept"] and trainer.skill_bank.get("kept").uses == 0
    Trainer.bank_skills(trainer, [paid, failed_reuser, never_reused])  # the same definition again: no new version
    assert len(trainer.skill_bank.history("kept")) == 1


def test_a_config_saved_before_token_level_decoding_still_loads_with_a_warning(tmp_path):
    saved = {**TrainConfig(output_dir=str(tmp_path)).to_dict(), "candidate_score": "mean", "template_headers": True}
    with pytest.warns(UserWarning, match="candidate_score"):
        config = TrainConfig.from_dict(saved)
    assert config.output_dir == str(tmp_path)
    with pytest.raises(ConfigError, match="unknown TrainConfig fields"):
        TrainConfig.from_dict({**config.to_dict(), "candidate_scor": "mean"})  # a typo still fails
