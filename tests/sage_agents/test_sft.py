import pytest
import torch

from sage_agents.policy import LLMPolicy, completion_logprobs
from sage_agents.rollout import rollout_chains, rollout_stats
from sage_agents.sft import PlanExpert, collect_expert_pairs, reweight_pairs, sft_warm_start
from tests.sage_agents.fake_env import FETCH_SKILL, FakeChainEnv, SkillExpert


def nll(policy, pairs):
    prompts = [policy.encode(p["prompt"]) for p in pairs]
    completions = [policy.encode(p["completion"]) + [policy.eos_id] for p in pairs]
    with torch.no_grad():
        logp, mask, _ = completion_logprobs(policy.model, prompts, completions, pad_id=policy.pad_id)
    return float(-(logp * mask).sum() / mask.sum())


def test_collect_expert_pairs_uses_the_policy_prompt(tiny):
    model, tok = tiny
    policy = LLMPolicy(model, tok, history_turns=2)
    pairs = collect_expert_pairs(FakeChainEnv(expert_plan=True), PlanExpert(), policy, chains=[0, 1])
    assert len(pairs) == 8  # 2 chains x 2 tasks x (go to, take)
    assert pairs[0]["completion"].startswith("go to box") and pairs[1]["completion"].startswith("take ")
    assert pairs[0]["prompt"].startswith("Task: ") and pairs[0]["prompt"].endswith("Action:\n")
    assert "History:" in pairs[1]["prompt"] and "History:" not in pairs[2]["prompt"]  # new task, new history
    skills = collect_expert_pairs(FakeChainEnv(expert_plan=True), SkillExpert(), policy, chains=[0])
    assert skills[0]["completion"].startswith("skill fetch(") and skills[1]["completion"].startswith("call ")
    failing = collect_expert_pairs(FakeChainEnv(), PlanExpert(), policy, chains=[0])  # no plan: "look"
    assert failing == []  # only successful tasks are kept by default


def test_sft_warm_start_lowers_expert_nll(tiny_copy, tmp_path, capsys):
    model, tok = tiny_copy
    policy = LLMPolicy(model, tok)
    pairs = collect_expert_pairs(FakeChainEnv(expert_plan=True, num_chains=4), SkillExpert(), policy)
    before = nll(policy, pairs)
    metrics = sft_warm_start(
        model, tok, pairs, output_dir=str(tmp_path), max_steps=6, lr=3e-3, batch_size=4, logging_steps=2
    )
    assert metrics["train_loss"] > 0 and nll(policy, pairs) < before - 0.5
    assert tok.padding_side == "left"  # restored for generation
    assert "'loss'" not in capsys.readouterr().out  # a progress bar, not a printed log line every 2 steps


def test_sft_prints_progress_lines_when_stdout_is_not_a_terminal(tiny_copy, tmp_path, capsys, monkeypatch):
    """Piped to a log (capsys is not a tty) the SFT stage prints plain lines: step, loss once logged, elapsed."""
    import re

    import sage_agents.progress

    model, tok = tiny_copy
    pairs = collect_expert_pairs(FakeChainEnv(expert_plan=True, num_chains=2), SkillExpert(), LLMPolicy(model, tok))
    monkeypatch.setattr(sage_agents.progress, "PLAIN_EVERY_SECONDS", 0.0)  # a line at every step
    sft_warm_start(model, tok, pairs, output_dir=str(tmp_path), max_steps=4, lr=1e-3, batch_size=4, logging_steps=2)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("sft: ")]
    steps = [int(re.match(r"sft: (\d+)/4", line).group(1)) for line in lines]
    assert steps[0] == 0 and steps[-1] == 4 and set(range(5)) <= set(steps)  # the start, every step, the end
    assert all(line.endswith("s elapsed") for line in lines)
    assert re.search(r"^sft: 4/4, loss \d+\.\d{3}, \d+s elapsed$", "\n".join(lines), re.MULTILINE)


def test_the_progress_bar_follows_the_trainer_steps_and_loss():
    from types import SimpleNamespace

    from sage_agents.sft import RichProgress

    bar, state = RichProgress(), SimpleNamespace(max_steps=4, global_step=1)
    bar.on_train_begin(None, state, None)
    state.global_step = 3
    bar.on_step_end(None, state, None)
    bar.on_log(None, state, None, logs={"loss": 0.5})
    task = bar.bar.tasks[0]
    assert (task.total, task.completed, task.fields["info"]) == (4, 3, "loss 0.500")
    bar.on_train_end(None, state, None)


@pytest.mark.slow
def test_sft_then_constrained_policy_defines_and_reuses_skills(tiny_copy, tmp_path):
    model, tok = tiny_copy
    policy = LLMPolicy(model, tok, constrained=True, skill_templates=[FETCH_SKILL])
    train = collect_expert_pairs(FakeChainEnv(expert_plan=True, num_chains=6), SkillExpert(), policy)
    sft_warm_start(model, tok, train, output_dir=str(tmp_path), epochs=40, lr=3e-3, batch_size=4)
    model.eval()
    envs = [FakeChainEnv(num_chains=6) for _ in range(6)]
    stats = rollout_stats(rollout_chains(envs, policy, list(range(6)), [0] * 6, greedy=True))
    # the box is not observable before acting, so success is partial; the skill behaviour is learned
    assert stats["env/task_success"] >= 0.5 and stats["env/skills_created"] >= 1.0
    assert stats["env/skill_reuse_rate"] >= 0.8


def test_bf16_sft_does_not_leak_autocast_into_the_rl_trainer(tiny_copy, tmp_path):
    from accelerate.state import AcceleratorState

    model, tok = tiny_copy
    pairs = collect_expert_pairs(
        FakeChainEnv(expert_plan=True), PlanExpert(), LLMPolicy(model, tok), chains=[0]
    )
    sft_warm_start(model, tok, pairs, output_dir=str(tmp_path), max_steps=1, batch_size=2, bf16=True)
    assert not AcceleratorState._shared_state or AcceleratorState().mixed_precision == "no"


def test_reweight_pairs_repeats_and_thins_by_action_verb():
    pairs = [{"prompt": f"p{i}", "completion": c} for i, c in enumerate(["take a", "go to b", "open c", ""] * 500)]
    out = reweight_pairs(pairs, {"take": 2.0, "go": 0.3, "open": 0.0}, seed=1)
    verbs = [p["completion"].split(maxsplit=1)[0] if p["completion"] else "" for p in out]
    assert verbs.count("take") == 1000  # every take pair exactly twice
    assert verbs.count("open") == 0
    assert verbs.count("") == 500  # unlisted words keep weight 1
    assert 100 < verbs.count("go") < 200  # 30% of 500 in expectation (150), binomial sd ~10
    assert reweight_pairs(pairs, {"go": 0.3}, seed=1) == reweight_pairs(pairs, {"go": 0.3}, seed=1)
    with pytest.raises(ValueError, match=">= 0"):
        reweight_pairs(pairs, {"go": -1.0})
