"""The prompted agents: ``react`` (no skills, Think/Action) and ``memory`` (workflow memory)."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
import torch

from leaderboard.evaluate import evaluate, parse_args
from sage_agents.prompted import (
    REACT_INSTRUCTION,
    MemoryAgent,
    ReactPolicy,
    WorkflowMemory,
    make_memory_agent,
    make_react_agent,
    parse_react,
    similarity,
)
from sage_agents.registry import list_agents, make_agent

from ..leaderboard.test_evaluate import TOY_ID, toy_env_id  # noqa: F401  (registers the toy env id)

CLEAN = ["go to diningtable 1", "take apple 1 from diningtable 1", "go to sinkbasin 1",
         "clean apple 1 with sinkbasin 1", "go to countertop 1", "move apple 1 to countertop 1"]  # fmt: skip
HEAT = ["go to stoveburner 2", "take egg 1 from stoveburner 2", "go to microwave 1", "heat egg 1 with microwave 1",
        "go to diningtable 1", "move egg 1 to diningtable 1"]  # fmt: skip
COOL = ["go to countertop 1", "take potato 2 from countertop 1", "go to fridge 1", "cool potato 2 with fridge 1",
        "go to garbagecan 1", "move potato 2 to garbagecan 1"]  # fmt: skip
SKILLS = "Program skills (call NAME(args)):\n- fetch_item(item, box): take an item from a box"


@pytest.fixture(scope="module")
def model_dir(tiny, tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny_model")
    model, tokenizer = tiny
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


class PlanTeacher:
    """Follows ``info["expert_plan"]`` (the toy env's expert), so every task is won."""

    def act(self, observation, info):
        return info["expert_plan"][0]


# ---------------------------------------------------------------------------------------------- react
@pytest.mark.parametrize(
    ("completion", "text", "kind"),
    [
        ("Think: the key is in box 2.\nAction: go to box 2", "go to box 2", "command"),
        ("think: x\naction:\ntake key from box 2\nObservation: you take it", "take key from box 2", "command"),
        ("go to box 1", "go to box 1", "command"),
        ("Think: nothing to do here\ngo to box 3", "go to box 3", "command"),
        ("Think: I am lost!!", "Think: I am lost!!", "none"),
        ("Think: hmm\nAction: call fetch(key, box 1)", "Think: hmm\nAction: call fetch(key, box 1)", "none"),
        ("call fetch(key 1, box 1)", "Action: call fetch(key 1, box 1)", "none"),  # never sent as a call
        ("skill f(a):\n    go to {a}", "Action: skill f(a):\n    go to {a}", "none"),
        ("", "", "none"),
    ],
)
def test_parse_react(completion, text, kind):
    parsed = parse_react(completion)
    assert (parsed.text, parsed.kind) == (text, kind)


def test_react_prompt_ignores_skills_and_asks_for_a_thought(tiny):
    model, tokenizer = tiny
    obs = {"task": "put the key in the bin", "observation": "You see three boxes.", "skills": SKILLS}
    admissible = ["go to box 1", "go to box 2", "look"]
    free = ReactPolicy(model, tokenizer, max_new_tokens=4)
    prompt = free.prompt(obs, [("You are in a room.", "look")], admissible)
    assert prompt.startswith(REACT_INSTRUCTION + "\nTask: put the key in the bin\nHistory:")
    assert prompt.endswith("Admissible: go to box 1, go to box 2, look\nThink:")
    assert "Skills" not in prompt and "fetch_item" not in prompt

    constrained = ReactPolicy(model, tokenizer, constrained=True)
    assert constrained.prompt(obs, [], admissible).endswith("\nAction:\n")
    (completion,) = constrained.act_batch([obs], [{"admissible_commands": admissible}], [[]], greedy=True)
    assert completion.text in admissible
    assert set(completion.allowed[0]) == {constrained.encode(a)[0] for a in admissible}  # no skill calls offered
    with pytest.raises(ValueError, match="no skills"):
        ReactPolicy(model, tokenizer, skill_calls=True)

    # Workflows go right after the task while the prompt has room; history goes first, then workflows.
    shown = {**obs, "workflows": ["* put the key in the bin\n  go to {place1}", "* put the pen in the bin\n  look"]}
    bare = free.prompt(obs, [], admissible)
    assert "Task: put the key in the bin\nWorkflows:\n* put the key" in free.prompt(shown, [], admissible)
    tight = ReactPolicy(model, tokenizer, max_prompt_tokens=len(free.encode(bare)))
    assert tight.prompt(shown, [("You are in a room.", "look")], admissible) == bare


def test_factories_need_a_local_model_path():
    assert {"react", "memory"} <= set(list_agents())
    with pytest.raises(ValueError, match="model_path"):
        make_agent("react")
    with pytest.raises(FileNotFoundError, match="never downloads"):
        make_agent("memory", model_path="Qwen/Qwen2.5-0.5B-Instruct")


# ---------------------------------------------------------------------------------------------- memory
def test_distillation_abstracts_objects_and_places():
    memory = WorkflowMemory()
    workflow = memory.add("Put a clean apple in countertop.", ["look", *CLEAN[:3], "call f(x)", *CLEAN[3:]], "clean")
    assert workflow.render() == (
        "* put a clean {obj1} in {place3}.\n"
        "  look\n"
        "  go to {place1}\n"
        "  take {obj1} from {place1}\n"
        "  go to {place2}\n"
        "  clean {obj1} with {place2}\n"
        "  go to {place3}\n"
        "  move {obj1} to {place3}"
    )
    assert workflow.task_type == "clean"
    # The same abstract solution with other entities is one workflow seen twice.
    again = [a.replace("apple 1", "mug 2").replace("diningtable 1", "shelf 4") for a in ["look", *CLEAN]]
    assert memory.add("put a clean mug in countertop.", again) is workflow
    assert len(memory) == 1 and workflow.count == 2


def test_retrieval_ranks_the_matching_workflow_first():
    memory = WorkflowMemory()
    memory.add("put a clean apple in countertop.", CLEAN)
    memory.add("put a hot egg in diningtable.", HEAT)
    memory.add("put a cool potato in garbagecan.", COOL)
    assert [w.task for w in memory.retrieve("put a hot mug in cabinet.", k=2)][0] == "put a hot {obj1} in {place3}."
    assert memory.retrieve("put a cool tomato in fridge.", k=1)[0].actions[3] == "cool {obj1} with {place2}"
    assert memory.retrieve("zzz", k=3) == []
    assert similarity("put a hot egg", "put a hot {obj1}") == 0.75  # {put, a, hot} / {put, a, hot, egg}


def test_memory_is_bounded_and_round_trips(tmp_path):
    memory = WorkflowMemory(max_size=2)
    memory.add("put a clean apple in countertop.", CLEAN)
    memory.add("put a clean apple in countertop.", CLEAN)  # count 2: survives eviction
    memory.add("put a hot egg in diningtable.", HEAT)
    memory.add("put a cool potato in garbagecan.", COOL)  # evicts the hot one (count 1, older)
    assert len(memory) == 2
    assert [w.task.split()[2] for w in memory.workflows] == ["clean", "cool"]
    memory.save(tmp_path / "memory.json")
    loaded = WorkflowMemory.load(tmp_path / "memory.json")
    assert loaded.to_dict() == memory.to_dict() and loaded.workflows[0].count == 2


def test_memory_agent_learns_from_successes_and_shows_workflows(model_dir, tmp_path):
    path = tmp_path / "memory.json"
    agent = make_memory_agent(model_dir, memory_path=str(path), constrained=True, top_k=2)
    env = gym.make(TOY_ID, split="train", expert_plan=True)
    stats = agent.train(env, teacher=PlanTeacher())  # all 4 chains: key, coin, pen in two households
    assert stats == {"tasks": 6, "successes": 6, "workflows": 3}  # h0/key and h1/key distil to one workflow
    assert path.exists() and len(WorkflowMemory.load(path)) == 3
    (key,) = [w for w in agent.memory.workflows if "key" in w.task]
    assert (key.task, key.actions, key.count) == ("put the key in the bin", ["go to {place1}",
            "take key from {place1}", "put key in bin"], 2)  # fmt: skip

    prompts = []
    policy = agent.agent.policy
    original = policy.prompt
    policy.prompt = lambda *args: prompts.append(original(*args)) or prompts[-1]
    obs, info = env.reset(seed=0, options={"chain": 0})
    agent.reset()
    agent.act(obs, info)
    assert "\nWorkflows:\n* put the key in the bin\n  go to {place1}\n" in prompts[0]
    assert isinstance(agent, MemoryAgent) and agent.tokens_generated > 0


class ClumsyAgent:
    """A stand-in policy agent: one invalid action, then the expert plan."""

    tokens_generated = 0

    def reset(self, seed=None):
        pass

    def act_batch(self, observations, infos, slots=None):
        return ["dance" if info.get("new_task") else info["expert_plan"][0] for info in infos]


def test_memory_agent_learns_online_through_act():
    agent = MemoryAgent(ClumsyAgent(), WorkflowMemory())
    stats = agent.train(gym.make(TOY_ID, split="train", expert_plan=True), num_chains=1)
    assert stats == {"tasks": 2, "successes": 2, "workflows": 2}
    assert agent.memory.workflows[0].actions == ["go to {place1}", "take key from {place1}", "put key in bin"]
    frozen = MemoryAgent(ClumsyAgent(), WorkflowMemory(), learn=False)
    env = gym.make(TOY_ID, split="train", expert_plan=True)
    obs, info = env.reset(seed=0, options={"chain": 0})
    while not info["chain_successes"]:
        obs, _, _, _, info = env.step(frozen.act(obs, info))
    frozen.act(obs, info)
    assert len(frozen.memory) == 0


@pytest.mark.parametrize("name", ["react", "memory"])
def test_end_to_end_evaluation_records_tokens(name, model_dir, tmp_path):
    kwargs = {"model_path": model_dir, "max_new_tokens": 6}
    if name == "memory":
        memory = WorkflowMemory()
        memory.add("put the key in the bin", ["go to box 2", "take key from box 2", "put key in bin"])
        memory.save(tmp_path / "m.json")
        kwargs = {"model_path": model_dir, "constrained": True, "memory_path": str(tmp_path / "m.json")}
    config = parse_args(["--agent", name, "--env", TOY_ID, "--num-chains", "2", "--split", "train",
                         "--env-kwargs", '{"max_steps_per_task": 3}', "--agent-kwargs", json.dumps(kwargs),
                         "--output", str(tmp_path / "out")])  # fmt: skip
    summary = evaluate(config)
    assert summary["n_tasks"] == 3 and summary["mean_tokens"] > 0 and summary["model"] == model_dir
    assert 0.0 <= summary["tgc"] <= 1.0 and summary["skills_created"] == 0


def test_batched_evaluation_of_a_policy_plays_as_one_at_a_time(tiny_copy, tmp_path):
    # Free generation from weights scaled up: the text then varies with every prompt token (history, padding),
    # where the freshly initialised model writes newlines whatever it is shown.
    model, tokenizer = tiny_copy
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(20.0)
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    kwargs = {"model_path": str(tmp_path / "model"), "max_new_tokens": 6}
    base = ["--agent", "policy", "--env", TOY_ID, "--num-chains", "4", "--seeds", "0", "1", "--split", "train",
            "--env-kwargs", '{"max_steps_per_task": 3}', "--agent-kwargs", json.dumps(kwargs)]  # fmt: skip
    runs = {}
    for batch, workers in (("1", "1"), ("3", "1"), ("3", "2")):
        out = tmp_path / f"{batch}x{workers}"
        config = parse_args([*base, "--batch-size", batch, "--workers", workers, "--output", str(out)])
        summary = evaluate(config)
        lines = (out / f"{config.run_name}.episodes.jsonl").read_text().splitlines()
        runs[batch, workers] = {(r["seed"], r["chain"]): (r["actions"], r["tokens"]) for r in map(json.loads, lines)}
    assert evaluate(config)["tgc"] == summary["tgc"]  # a rerun with every chain done replays nothing
    assert runs["3", "1"] == runs["1", "1"] == runs["3", "2"] and len(runs["1", "1"]) == 8
    assert len({a for actions, _ in runs["1", "1"].values() for task in actions for a in task}) > 3


def test_react_agent_factory_wraps_a_policy_agent(model_dir):
    agent = make_react_agent(model_dir, constrained=True)
    assert isinstance(agent.policy, ReactPolicy) and agent.model_id == model_dir


def test_agents_say_what_they_are_given(tiny):
    """The leaderboard's "given" column: what each built-in agent is handed, read from its own settings."""
    from sage_agents.baselines import RandomAgent, make_expert
    from sage_agents.policy import LLMPolicy, PolicyAgent
    from sage_agents.prompted import MemoryAgent, ReactPolicy, WorkflowMemory
    from sage_app.demo import skill_templates
    from sage_envs.skills import SkillLibrary
    from sage_envs.skills.dsl import parse_definition

    model, tokenizer = tiny
    templates = skill_templates(["place_in", "heat_then_place"])
    bank = SkillLibrary([parse_definition(templates[0])[0]])
    sage = PolicyAgent(LLMPolicy(model, tokenizer, constrained=True, show_admissible=False, skill_templates=templates),
                       skill_library=bank)  # fmt: skip
    assert sage.given == (
        "constrained decoding: picks among the admissible commands and calls of library skills; "
        "2 skill-definition templates (place_in, heat_then_place); skill bank of 1 (place_in)"
    )
    free = PolicyAgent(LLMPolicy(model, tokenizer, max_new_tokens=16))
    assert free.given == "free generation (up to 16 tokens); admissible commands listed in the prompt"
    react = PolicyAgent(ReactPolicy(model, tokenizer, constrained=True))
    assert react.given.startswith("ReAct prompt (no skills); constrained decoding: picks among the admissible "
                                  "commands;")  # fmt: skip
    memory = MemoryAgent(react, WorkflowMemory(5), top_k=2, learn=False)
    assert memory.given == react.given + "; top 2 workflows from a memory frozen"
    assert RandomAgent().given == "the admissible commands (picks one uniformly)"
    assert make_expert(use_skills=False).given == "hand-written rules; the admissible commands"
    assert make_expert(skills=["use_lamp", "place_in"]).given == (
        "hand-written rules; the admissible commands; its own skills (place_in, use_lamp), defined in the chain "
        "where first used"
    )
    # another domain's expert says how it plays; a skill clause only where it has skills
    textworld = make_expert(env_id="SageChain-TextWorld-v0")
    assert textworld.given.startswith("each game's walkthrough (privileged") and "its own skills (cut_with" in (
        textworld.given
    )
    assert make_expert(use_skills=False, env_id="SageChain-TextWorld-v0").given == textworld.given.split("; ")[0]
