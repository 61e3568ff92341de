"""The agent against the real SageChainEnv core (toy domain of tests/sage_envs); skipped until it imports."""

import pytest

from sage_agents.policy import LLMPolicy
from sage_agents.rollout import rollout_chains
from tests.sage_agents.test_rollout import ScriptedPolicy

sage_envs = pytest.importorskip("sage_envs")
toy = pytest.importorskip("tests.sage_envs.toy_domain")

FIND = "skill bin_it(item, box):\n    go to {box}\n    take {item} from {box}\n    put {item} in bin"


def make_env(**kw):
    return sage_envs.SageChainEnv(toy.ToyDomain(), chain_length=3, max_steps_per_task=4, expert_plan=True, **kw)


def expert(obs, info, hist):
    """Define bin_it (+ call) in task 1, call it later; follow the plan when already at the box."""
    plan = info["expert_plan"]
    box = next((c[len("go to ") :] for c in plan if c.startswith("go to ")), None)
    if box is None:
        return plan[0]
    call = f"call bin_it({obs['task'].split()[2]}, {box})"
    return call if "bin_it(" in obs["skills"] else f"{FIND}\n{call}"


def test_sequential_rollout_with_skills_on_chain_env():
    ro = rollout_chains([make_env()], ScriptedPolicy(expert), [0], [0])[0]
    assert ro.task_success == [True, True, True]
    assert [t.env_kind for t in ro.turns] == ["define", "call", "call"]
    assert ro.reuse == {(1, 0), (2, 0)}


def test_llm_policy_acts_in_chain_env(tiny):
    model, tok = tiny
    policy = LLMPolicy(model, tok, constrained=True)
    ro = rollout_chains([make_env()], policy, [1], [0])[0]
    assert ro.played[0] and all(t.valid for t in ro.turns)


def test_persistent_libraries_are_checkpointed_and_restored(tiny, tmp_path):
    import copy
    import json

    from sage_agents.config import TrainConfig
    from sage_agents.trainer import Trainer

    model, tok = tiny
    cfg = TrainConfig(
        group_size=2,
        lr=1e-3,
        constrained=True,
        report_to=["jsonl"],
        progress=False,
        total_steps=1,
        output_dir=str(tmp_path),
        history_turns=1,
    )

    def env_fn():
        return sage_envs.SageChainEnv(toy.ToyDomain(), chain_length=2, max_steps_per_task=2, library_scope="persistent")

    trainer = Trainer(cfg, model=copy.deepcopy(model), tokenizer=tok, env_fn=env_fn)
    skill = sage_envs.Skill(name="tidy", kind="guidance", text="look first", created_in_task=0)
    trainer.envs[1].unwrapped.library.add(skill)
    trainer.save_checkpoint()
    saved = json.loads((tmp_path / "checkpoints" / "step_0000000" / "skill_libraries_0.json").read_text())
    assert len(saved) == 2 and saved[1] != saved[0]
    resumed = Trainer(
        TrainConfig(**{**cfg.to_dict(), "resume": True}),
        model=copy.deepcopy(model),
        tokenizer=tok,
        env_fn=env_fn,
    )
    assert [e.unwrapped.library.names() for e in resumed.envs] == [[], ["tidy"]]
