"""expert_guidance: what the ALFWorld expert's command is for, and the expert on another agent's path."""

from __future__ import annotations

import gymnasium as gym

import sage_envs  # noqa: F401
from sage_envs.domains.alfworld.expert import AlfworldExpert
from sage_envs.domains.alfworld.expert_guidance import ShadowExpert, advise

HEAT = "heat some egg and put it in countertop"


def test_advice_names_the_command_and_says_what_it_is_for_in_each_stage() -> None:
    search = advise(HEAT, [], "go to cabinet 1")
    assert (search.name, search.command, search.reason) == (
        "find_egg",
        "go to cabinet 1",
        "the egg may be at the cabinet",
    )
    taken = ["go to fridge 1", "open fridge 1", "take egg 1 from fridge 1"]
    to_appliance = advise(HEAT, taken, "go to microwave 1")
    assert to_appliance.name == "heat_with_microwave" and to_appliance.command == "go to microwave 1"
    assert to_appliance.reason == "the microwave can heat the egg; then heat egg 1 with microwave 1"
    heat = advise(HEAT, [*taken, "go to microwave 1"], "heat egg 1 with microwave 1")
    assert heat.reason == "the microwave can heat the egg"
    heated = [*taken, "go to microwave 1", "heat egg 1 with microwave 1"]
    assert advise(HEAT, heated, "go to countertop 1").name == "bring_egg_to_countertop"
    for put in ("move egg 1 to countertop 1", "put egg 1 in/on countertop 1"):
        assert advise(HEAT, [*heated, "go to countertop 1"], put).reason == "the task puts the egg in the countertop"
    assert advise(HEAT, [], "take egg 1 from fridge 1").reason == "the task needs the egg"
    assert "closed" in advise(HEAT, ["go to fridge 1"], "open fridge 1").reason
    lamp = "look at book under the desklamp"
    assert advise(lamp, ["take book 1 from bed 1"], "go to desk 1").name == "find_desklamp"
    assert advise(lamp, ["take book 1 from bed 1", "go to desk 1"], "use desklamp 1").reason == (
        "the desklamp lights the book"
    )


def test_no_advice_for_commands_that_move_no_task_on_or_an_unknown_task() -> None:
    assert advise(HEAT, [], "look") is None and advise(HEAT, [], "inventory") is None
    assert advise(HEAT, [], "call place_in(egg 1, countertop 1)") is None
    assert advise("juggle three eggs", [], "go to cabinet 1") is None


def test_shadow_expert_reads_the_observation_as_the_answer_to_what_was_sent() -> None:
    env = gym.make("SageChain-ALFWorld-v0", split="train", skills="none", chain_length=1, max_steps_per_task=40)
    obs, info = env.reset(seed=0, options={"chain": 0})
    shadow, expert = ShadowExpert(), AlfworldExpert(use_skills=False)
    first = shadow.act(obs, info)
    assert first == expert.act(obs, info)  # on the expert's own path it is the expert
    # another agent looks around instead: the shadow must not believe it went where it wanted to
    shadow.follow("look")
    obs, _, _, _, info = env.step("look")
    assert shadow.act(obs, info) == first  # still not there: it goes again
    # following its own advice to the end completes the task
    shadow.follow(first)
    obs, _, terminated, _, info = env.step(first)
    for _ in range(40):
        if terminated:
            break
        action = shadow.act(obs, info)
        shadow.follow(action)
        obs, _, terminated, _, info = env.step(action)
    assert terminated and info["task_success"]
    env.close()
