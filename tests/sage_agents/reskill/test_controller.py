"""ReSkill end to end: per-slot libraries through the real chain env, the lifecycle, and ``algo="reskill"`` training."""

import copy
import json
import os
import random

import pytest
import torch

from sage_agents.config import ConfigError, TrainConfig
from sage_agents.reskill import (
    Bundle,
    LifecycleLog,
    Operation,
    ReSkill,
    RuleCreator,
    ThompsonTracker,
    plot_lifecycle,
    read_lifecycle,
)
from sage_agents.reskill.creator import Creator
from sage_agents.rollout import rollout_chains
from sage_agents.trainer import Trainer
from tests.sage_agents.fake_env import FAST_TRAIN, FakeChainEnv
from tests.sage_agents.reskill.test_assertions import make_heat_reservoir
from tests.sage_agents.test_rollout import ScriptedPolicy

sage_envs = pytest.importorskip("sage_envs")
toy = pytest.importorskip("tests.sage_envs.toy_domain")


def toy_env():
    return sage_envs.SageChainEnv(
        toy.ToyDomain(), chain_length=2, max_steps_per_task=4, expert_plan=True, skills="guidance"
    )


def guided_policy(helps, seed=0):
    """Random admissible commands; once any guidance skill is shown, follow the expert (helps) or stall."""
    rng = random.Random(seed)

    def act(obs, info, history):
        if "Guidance:" in obs["skills"]:
            return info["expert_plan"][0] if helps else "look"
        return rng.choice(info["admissible_commands"])

    return ScriptedPolicy(act)


def run(controller, policy, steps, slots=8):
    envs = [toy_env() for _ in range(slots)]
    for step in range(1, steps + 1):
        libraries = controller.assign(slots)
        seeds = [step * 100 + i for i in range(slots)]
        rollouts = rollout_chains(envs, policy, [step % 2] * slots, seeds, skill_libraries=libraries)
        controller.observe(rollouts, step)


def make_controller(tmp_path=None, **kw):
    lifecycle = LifecycleLog(tmp_path / "lifecycle.jsonl" if tmp_path else None)
    tracker = ThompsonTracker(min_steps=3, min_episodes=30)
    return ReSkill(RuleCreator(), tracker=tracker, lifecycle=lifecycle, min_reservoir=32, **kw)


def test_guidance_reaches_the_policy_through_the_observation():
    seen = []
    policy = ScriptedPolicy(lambda obs, info, hist: seen.append(obs["skills"]) or info["admissible_commands"][0])
    controller = make_controller()
    controller.registry.propose(
        Bundle([Operation("add", "tip", sage_envs.Skill(name="tip", kind="guidance", text="Go to box 1 first."))]), 0
    )
    controller.tracker.start(1, 0)
    libraries = controller.assign(8)
    arms = controller._arms
    assert {"new", "old"} == set(arms)  # P(new) = 0.5 for fresh priors; seed 0 draws both
    rollout_chains([toy_env() for _ in range(8)], policy, [0] * 8, list(range(8)), skill_libraries=libraries)
    assert any("Guidance:\n- tip: Go to box 1 first." in s for s in seen) and "" in seen


def test_helpful_skills_are_created_tested_and_accepted(tmp_path):
    controller = make_controller(tmp_path)
    run(controller, guided_policy(helps=True), steps=15)
    events = read_lifecycle(tmp_path / "lifecycle.jsonl")
    kinds = [e["event"] for e in events]
    assert {"created", "tested", "accepted"} <= set(kinds) and "rejected" not in kinds
    accepted = [e for e in events if e["event"] == "accepted"]
    assert all(e["posterior"]["new"]["mean"] > e["posterior"]["old"]["mean"] for e in accepted)
    assert all(e["posterior"]["steps"] >= 3 and e["posterior"]["episodes"] >= 30 for e in accepted)
    assert all(e["posterior"]["within_step_z"] > 0 for e in accepted)  # a skill that helps is ahead within steps
    live = {s.name for s in controller.registry.active_skills()}
    assert live and live <= {e["skill"] for e in events if e["event"] == "created"}
    created = next(e for e in events if e["event"] == "created")
    assert {"version", "op", "skill", "trigger", "pattern", "text", "reason", "creator", "step"} <= set(created)
    tested = next(e for e in events if e["event"] == "tested")
    assert 0.15 <= tested["posterior"]["p_new"] <= 0.85 and {"w_new", "n_new", "success_old"} <= set(tested)
    png = plot_lifecycle(events, tmp_path / "lifecycle.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_skills_the_policy_cannot_read_are_logged_not_tested(tmp_path):
    from sage_agents.models import build_tokenizer

    lifecycle = LifecycleLog(tmp_path / "lifecycle.jsonl")
    creator = RuleCreator(tokenizer=build_tokenizer(include_alfworld=False))  # no "successes", "When", ...
    controller = ReSkill(creator, lifecycle=lifecycle, min_reservoir=10)
    controller.reservoir.extend(make_heat_reservoir())  # successes heat, failures do not: contrasts to act on
    controller.observe([], step=1)
    controller.observe([], step=2)
    events = read_lifecycle(tmp_path / "lifecycle.jsonl")
    unverified = [e for e in events if e["event"] == "unverified"]
    assert any("tokenizer does not know" in e["reason"] for e in unverified)
    assert all("tokenizer does not know" in e["reason"] or "no command to advise" in e["reason"] for e in unverified)
    assert all(e["creator"] == "rule" and e["skill"] for e in unverified)
    assert not any(e["event"] == "created" for e in events) and not controller.tracker.testing
    # the same rejection at the next attempt (same reservoir words) is not logged again
    assert len({(e["skill"], e["reason"]) for e in unverified}) == len(unverified)
    plot = plot_lifecycle(events, tmp_path / "lifecycle.png")  # the plot takes the new event in its stride
    assert plot.read_bytes()[:4] == b"\x89PNG"
    state = controller.state_dict()
    assert state["last_unverified"] == creator.rejections  # saved for resume


def test_plot_with_no_skill_yet(tmp_path):
    events = [{"event": "skipped", "step": 2, "reason": "no discriminative assertion to act on"}]
    assert plot_lifecycle(events, tmp_path / "empty.png", total_steps=6).read_bytes()[:4] == b"\x89PNG"
    assert plot_lifecycle([], tmp_path / "none.png").exists()


def test_plot_keeps_back_to_back_rejections_visible(tmp_path):
    # ALFWorld run (docs/reskill.md): be_efficient v2 was rejected at step 13 and v3 proposed at step 13; v3's
    # testing span was drawn over v2's red mark, so the row showed one long test and no rejection
    from sage_agents.reskill.lifecycle import lifecycle_rows, tested_segments

    def tested(step, version):
        post = {"new": {"mean": 0.2}, "old": {"mean": 0.1}, "p_new": 0.5}
        return {"event": "tested", "step": step, "version": version, "posterior": post}

    events = [{"event": "created", "step": 9, "version": 2, "skill": "be_efficient", "op": "add"}]
    events += [tested(s, 2) for s in range(10, 14)]
    events += [{"event": "rejected", "step": 13, "version": 2, "skill": "be_efficient", "op": "add"}]
    events += [{"event": "created", "step": 13, "version": 3, "skill": "be_efficient", "op": "add"}]
    events += [tested(s, 3) for s in range(14, 18)]
    events += [{"event": "rejected", "step": 17, "version": 3, "skill": "be_efficient", "op": "add"}]
    events += [{"event": "created", "step": 17, "version": 4, "skill": "be_efficient", "op": "add"}]
    spans = lifecycle_rows(events, end=20)["be_efficient"]
    assert [s[2] for s in spans] == ["testing", "testing", "testing", "rejected", "rejected"]  # red drawn last
    assert [s[0] for s in spans if s[2] == "rejected"] == [13, 17]
    # the posterior lines restart with each test instead of joining step 13 (v2) to step 14 (v3)
    assert [[e["step"] for e in seg] for seg in tested_segments(events)] == [[10, 11, 12, 13], [14, 15, 16, 17]]
    assert plot_lifecycle(events, tmp_path / "back_to_back.png").read_bytes()[:4] == b"\x89PNG"


def test_harmful_skills_are_rejected_and_the_library_reverts(tmp_path):
    controller = make_controller(tmp_path)
    run(controller, guided_policy(helps=False), steps=15)
    events = controller.lifecycle.events
    assert [e["event"] for e in events if e["event"] in ("accepted", "rejected")] == ["rejected", "rejected"]
    assert controller.registry.active_skills() == [] and controller.registry.current_id == 0
    assert [v.status for v in controller.registry.versions][:3] == ["base", "rejected", "rejected"]
    assert controller.rejected  # their assertions are not re-proposed for a while
    assert all(not any(f'"{k}":' in key for k in ("n", "min", "max")) for key in controller.rejected)  # by family


def test_an_accepted_delete_is_a_prune():
    class Deleter(Creator):
        name = "stub"

        def create(self, episodes, registry, step, exclude=()):
            return Bundle([Operation("delete", "old_tip")], creator=self.name)

    library = sage_envs.SkillLibrary([sage_envs.Skill(name="old_tip", kind="guidance", text="Stall: look around.")])
    controller = make_controller()
    controller.creator = Deleter()
    controller.registry = type(controller.registry)(library)
    run(controller, guided_policy(helps=False), steps=8)  # the tip makes the policy stall: deleting it wins
    assert "pruned" in [e["event"] for e in controller.lifecycle.events]
    assert controller.counts["pruned"] == 1 and "old_tip" not in controller.registry.current.library


# ---------------------------------------------------------------------------------------------- TRAINER
FAST = dict(
    FAST_TRAIN,
    algo="reskill",
    reskill_min_reservoir=4,
    reskill_min_test_steps=1,
    reskill_min_test_episodes=4,
)


class AlwaysAdd(Creator):
    """A deterministic creator that always proposes one new general skill (to exercise the lifecycle)."""

    name = "stub"

    def create(self, episodes, registry, step, exclude=()):
        skill = sage_envs.Skill(name=f"tip_{step}", kind="guidance", text=f"Tip number {step}: go to box 1.")
        ops = [Operation("add", skill.name, skill)]
        live = registry.active_skills()
        if len(live) >= registry.max_active:
            ops.insert(0, Operation("delete", live[0].name))
        return Bundle(ops, creator=self.name)


def trainer(tiny, tmp_path, name, env_fn=toy_env, **overrides):
    model, tok = tiny
    cfg = TrainConfig(**{**FAST, "output_dir": str(tmp_path / name), **overrides})
    out = Trainer(cfg, model=copy.deepcopy(model), tokenizer=tok, env_fn=env_fn)
    out.reskill.creator = AlwaysAdd()
    return out


def test_two_reskill_steps_on_the_fake_env_train_every_parameter(tiny, tmp_path):
    t = trainer(tiny, tmp_path, "fake", env_fn=lambda: FakeChainEnv(easy=True), total_steps=2)
    before = {n: p.detach().clone() for n, p in t.model.named_parameters()}
    history = t.train()
    unchanged = [n for n, p in t.model.named_parameters() if torch.equal(before[n], p)]
    assert not unchanged
    assert history[0]["reskill/testing"] == 1.0 and history[1]["reskill/tests_completed"] == 1.0
    assert "reskill/p_new" in history[1] and "losses/policy_loss" in history[1]
    ckpt = tmp_path / "fake" / "checkpoints" / "step_0000002"
    assert {"reskill_state.json", "model", "state"} <= set(os.listdir(ckpt))
    assert (tmp_path / "fake" / "reskill" / "lifecycle.png").exists()
    events = read_lifecycle(tmp_path / "fake" / "reskill" / "lifecycle.jsonl")
    assert [e["event"] for e in events][:2] == ["created", "tested"]


def test_reskill_training_resumes_exactly(tiny, tmp_path):
    full = trainer(tiny, tmp_path, "full", total_steps=5, save_every=1)
    full.train()
    part = trainer(tiny, tmp_path, "part", total_steps=3, save_every=1)
    part.train()
    del part  # "killed" after step 3, while a test is running
    resumed = trainer(tiny, tmp_path, "part", total_steps=5, save_every=1, resume=True)
    assert resumed.step == 3
    resumed.train()
    assert resumed.reskill.state_dict() == full.reskill.state_dict()
    assert all(torch.equal(a, b) for a, b in zip(full.model.parameters(), resumed.model.parameters(), strict=True))

    def read(name, file):
        rows = [json.loads(x) for x in (tmp_path / name / file).read_text().splitlines()]
        return [{k: v for k, v in r.items() if not k.endswith("_seconds")} for r in rows]

    assert read("full", "metrics.jsonl") == read("part", "metrics.jsonl")
    lifecycle = read("full", "reskill/lifecycle.jsonl")
    assert lifecycle == read("part", "reskill/lifecycle.jsonl")
    kinds = {e["event"] for e in lifecycle}
    assert {"created", "tested"} <= kinds and kinds & {"accepted", "rejected"}
    state = json.loads((tmp_path / "part" / "checkpoints" / "step_0000005" / "reskill_state.json").read_text())
    assert state["tracker"]["completed_tests"] >= 2


def test_reskill_config_rules():
    with pytest.raises(ConfigError, match="reskill_creator_endpoint or reskill_creator_model_path"):
        TrainConfig(algo="reskill", reskill_creator="llm")
    with pytest.raises(ConfigError, match="env_kwargs\\['skills'\\]='program'"):
        TrainConfig(algo="reskill", env_kwargs={"skills": "program"})
    with pytest.raises(ConfigError, match="reskill_discount='window'"):
        TrainConfig(algo="reskill", reskill_discount="window")
    with pytest.raises(ConfigError, match="reskill_p_clamp=0.6"):
        TrainConfig(reskill_p_clamp=0.6)
    with pytest.raises(ConfigError, match="reskill_min_within_step_z"):
        TrainConfig(reskill_min_within_step_z="high")
    strict = TrainConfig(algo="reskill", reskill_min_within_step_z=0.84)
    assert ReSkill.from_config(strict).tracker.min_within_step_z == 0.84
    assert ReSkill.from_config(TrainConfig(algo="reskill")).tracker.min_within_step_z is None  # the paper's rule
    cfg = TrainConfig(algo="reskill")
    assert cfg.effective_reward_mode == "outcome" and cfg.reskill_max_active == 8
    assert (cfg.reskill_min_test_steps, cfg.reskill_min_test_episodes, cfg.reskill_discount) == (5, 50, "eb")
    assert TrainConfig(algo="reskill", reskill_creator="llm", reskill_creator_endpoint="http://127.0.0.1:1")


def test_every_reskill_metric_and_config_field_is_documented(tiny, tmp_path):
    from pathlib import Path

    docs = (Path(__file__).resolve().parents[3] / "docs" / "reskill.md").read_text()
    t = trainer(tiny, tmp_path, "docs", total_steps=3)
    keys = {k for metrics in t.train() for k in metrics if k.startswith("reskill/")}
    for key in keys | {"reskill/M", "reskill/success_new", "reskill/success_old"}:
        assert f"`{key}`" in docs, key
    for field in TrainConfig.__dataclass_fields__:
        if field.startswith("reskill_"):
            assert f"`{field}`" in docs, field


def test_the_trainers_creator_checks_words_against_the_policys_tokenizer(tiny, tmp_path):
    model, tok = tiny
    cfg = TrainConfig(**{**FAST, "output_dir": str(tmp_path / "vocab")})
    t = Trainer(cfg, model=copy.deepcopy(model), tokenizer=tok, env_fn=toy_env)
    assert t.reskill.creator.tokenizer is tok  # a skill with words the policy cannot read is not tested
