"""The chain env core on a tiny in-memory domain: actions, info keys, rewards, termination, skills, vector envs."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sage_envs import SageChainEnv, Skill, SkillLibrary
from sage_envs.chain import MAX_MESSAGE_CHARS
from sage_envs.error import InvalidConfigError, ResetNeededError
from sage_envs.skills import Limits, parse_definition

from .toy_domain import ToyDomain

INFO_KEYS = {
    "task_index", "chain_length", "task_type", "task_success", "chain_successes", "action_valid", "action_kind",
    "message", "admissible_commands", "primitive_steps", "skills_used", "skills_created", "skill_library",
    "skill_reuse", "new_task", "task_id", "turn", "previous_observation",
}  # fmt: skip

FIND_SKILL = """skill fetch(item):
    # search every box for item, take it and bin it
    for b in boxes:
        go to {b}
        if "{item}" in observation:
            take {item} from {b}
            put {item} in bin
            return"""


def make(**kwargs) -> SageChainEnv:
    return SageChainEnv(ToyDomain(), **kwargs)


def test_check_env_passes():
    check_env(make())


def test_check_env_is_warning_free_with_a_spec_and_render_fps():
    # Without a spec the checker warns that it cannot test other render modes; through gym.make it has one.
    gym.register("ToyChain-v0", entry_point=lambda **kwargs: SageChainEnv(ToyDomain(), **kwargs))
    try:
        env = gym.make("ToyChain-v0", render_mode="ansi")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env.unwrapped)
        env.close()
    finally:
        del gym.registry["ToyChain-v0"]
    assert SageChainEnv.metadata["render_fps"] > 0


def test_reset_returns_spec_info_keys_and_observation_in_space():
    env = make()
    obs, info = env.reset(seed=0, options={"chain": 0})
    assert INFO_KEYS <= set(info)
    assert env.observation_space.contains(obs)
    assert obs["task"] == "put the key in the bin"
    assert info["task_index"] == 0 and info["chain_length"] == 2 and info["chain_successes"] == []


def test_commands_win_a_task_then_move_to_next_task_then_terminate():
    env = make()
    env.reset(options={"chain": 0})  # h0: key in box 1, coin in box 2
    _, reward, terminated, _, info = env.step("go to box 1")
    assert (reward, terminated, info["action_kind"], info["action_valid"]) == (0.0, False, "command", True)
    env.step("take key from box 1")
    obs, reward, terminated, _, info = env.step("put key in bin")
    assert reward == 1.0 and not terminated
    assert info["task_success"] and info["task_index"] == 0 and info["new_task"]
    assert info["chain_successes"] == [True]
    assert obs["task"] == "put the coin in the bin" and "You are in a room" in obs["observation"]
    assert "put the key" in info["previous_observation"]
    for action in ("go to box 2", "take coin from box 2", "put coin in bin"):
        obs, reward, terminated, truncated, info = env.step(action)
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["task_index"] == 1 and info["chain_successes"] == [True, True]


def test_task_out_of_turns_fails_and_chain_moves_on():
    env = make(max_steps_per_task=2)
    env.reset(options={"chain": 0})
    env.step("look")
    _, reward, terminated, _, info = env.step("look")
    assert (reward, terminated, info["new_task"], info["chain_successes"]) == (0.0, False, True, [False])
    env.step("look")
    _, _, terminated, _, info = env.step("look")
    assert terminated and info["chain_successes"] == [False, False]


def test_non_admissible_command_is_flagged_invalid_and_costs_a_turn():
    env = make()
    env.reset(options={"chain": 0})
    obs, _, _, _, info = env.step("dance wildly")
    assert info["action_kind"] == "invalid" and not info["action_valid"]
    assert "not an admissible command" in info["message"]
    assert obs["observation"] == "Nothing happens." and info["turn"] == 1


@pytest.mark.parametrize("action", [b"go to box 1", None, 3, 2.5, ["look"]])
def test_non_str_action_is_invalid_names_its_type_and_costs_a_turn(action):
    env = make()
    env.reset(options={"chain": 0})
    obs, reward, terminated, _, info = env.step(action)
    assert (info["action_valid"], info["action_kind"], info["turn"], reward) == (False, "invalid", 1, 0.0)
    assert f"got {type(action).__name__}" in info["message"]
    assert env.observation_space.contains(obs)
    # never str()-ed: b"go to box 1" did not move the agent, so "go to box 1" is still admissible
    assert "go to box 1" in info["admissible_commands"] and not terminated


def test_non_str_actions_spend_the_task_turn_budget_like_invalid_strings():
    env = make(max_steps_per_task=2)
    env.reset(options={"chain": 0})
    env.step(None)
    _, _, _, _, info = env.step(b"look")
    assert info["new_task"] and info["chain_successes"] == [False] and info["task_index"] == 0


def test_info_message_is_capped_and_says_how_much_was_cut():
    env = make()
    env.reset(options={"chain": 0})
    action = "x" * 100_000
    _, _, _, _, info = env.step(action)
    full = f"{action!r} is not an admissible command."  # what the message echoed before the cap
    assert info["message"] == f"{full[:MAX_MESSAGE_CHARS]} [... {len(full) - MAX_MESSAGE_CHARS} characters cut]"
    _, _, _, _, info = env.step("dance")
    assert info["message"] == "'dance' is not an admissible command."  # short messages are untouched


def test_step_after_termination_raises_and_names_reset():
    env = make(max_steps_per_task=1)
    with pytest.raises(ResetNeededError, match=r"reset\(\)"):
        env.step("look")  # before any reset
    env.reset(options={"chain": 0})
    env.step("look")
    _, _, terminated, _, info = env.step("look")
    assert terminated and info["chain_successes"] == [False, False]
    with pytest.raises(ResetNeededError, match=r"terminated; call env.reset\(\)"):
        env.step("look")
    with pytest.raises(gym.error.ResetNeeded):  # catchable as Gymnasium's own error
        env.step("look")
    env.reset(options={"chain": 0})
    _, _, terminated, _, info = env.step("look")
    assert info["chain_successes"] == [False] and not terminated


def test_multi_line_plain_text_is_invalid():
    env = make()
    env.reset(options={"chain": 0})
    _, _, _, _, info = env.step("go to box 1\ngo to box 2")
    assert info["action_kind"] == "invalid" and "one command per turn" in info["message"]


def test_define_and_call_creates_skill_then_reuse_in_next_task_is_reported():
    env = make()
    env.reset(options={"chain": 0})
    obs, reward, _, _, info = env.step(FIND_SKILL + "\ncall fetch(key)")
    assert info["action_kind"] == "define" and info["action_valid"], info["message"]
    assert info["skills_created"] == ["fetch"] and info["skills_used"] == ["fetch"]
    assert info["skill_reuse"] == []  # made in this task: a generate, not a reuse
    assert reward == 1.0 and info["primitive_steps"] == 3 and info["new_task"]
    assert "> go to box 1" in info["previous_observation"]
    assert "fetch(item)" in obs["skills"] and "search every box" in obs["skills"]
    (entry,) = info["skill_library"]
    assert entry == {"name": "fetch", "kind": "program", "version": 1, "created_in_task": 0, "uses": 1}

    _, reward, terminated, _, info = env.step("call fetch(coin)")
    assert info["action_kind"] == "call" and reward == 1.0 and terminated
    assert info["skill_reuse"] == ["fetch"] and info["primitive_steps"] == 4
    assert info["skill_library"][0]["uses"] == 2


def test_redefinition_bumps_version_and_is_not_reuse():
    env = make()
    env.reset(options={"chain": 0})
    env.step(FIND_SKILL)
    env.step(FIND_SKILL + "\ncall fetch(key)")
    _, _, _, _, info = env.step(FIND_SKILL.replace("search every", "look in each") + "\ncall fetch(coin)")
    assert info["skill_library"][0]["version"] == 3
    assert info["skill_library"][0]["created_in_task"] == 1 and info["skill_reuse"] == []


def test_definition_whose_trailing_call_fails_is_not_stored():
    env = make()
    env.reset(options={"chain": 0})
    obs, _, _, _, info = env.step("skill peek():\n    look\ncall peek()\ncall peek()\ncall peak()")
    assert info["action_kind"] == "invalid" and not info["action_valid"]
    assert "unknown skill 'peak'" in info["message"] and "Did you mean 'peek'?" in info["message"]
    assert info["skills_created"] == [] and info["skill_library"] == [] and "peek" not in env.library
    assert obs["skills"] == "" and obs["observation"].startswith("Skill peek() was not stored: a call failed.\n")
    assert info["primitive_steps"] == 2 and obs["observation"].count("> look\n") == 2  # the trace is kept


def test_failed_redefinition_keeps_the_stored_version():
    env = make()
    env.reset(options={"chain": 0})
    env.step(FIND_SKILL)
    broken = FIND_SKILL.replace("for b in boxes", "for b in crates")
    obs, _, _, _, info = env.step(broken + "\ncall fetch(key)")
    assert not info["action_valid"] and "unknown collection 'crates'" in info["message"]
    assert info["skills_created"] == [] and info["skills_used"] == []  # the unstored version's run is no use
    assert [(s["version"], s["uses"]) for s in info["skill_library"]] == [(1, 0)]
    assert env.library.get("fetch").source == parse_definition(FIND_SKILL)[0].source
    _, _, _, _, info = env.step("call fetch(key)")  # the stored version still works
    assert info["action_valid"] and info["task_success"]


def test_definition_with_calls_into_a_full_library_runs_nothing():
    env = make(max_library_size=1)
    env.reset(options={"chain": 0})
    env.step("skill other():\n    look")
    _, _, _, _, info = env.step(FIND_SKILL + "\ncall fetch(key)")
    assert not info["action_valid"] and "library is full (1 skills)" in info["message"]
    assert info["primitive_steps"] == 0 and env.library.names() == ["other"]


def test_trailing_calls_share_one_turn_budget():
    env = make(limits=Limits(max_primitive_steps_per_call=4))
    env.reset(options={"chain": 0})
    obs, _, _, _, info = env.step("skill twice():\n    look\n    look\ncall twice()\ncall twice()\ncall twice()")
    assert not info["action_valid"] and "primitive step limit reached (4 per turn" in info["message"]
    assert info["primitive_steps"] == 4 and obs["observation"].count("> look\n") == 4
    assert "twice" not in env.library and info["skills_created"] == []
    _, _, _, _, info = env.step("skill twice():\n    look\n    look\ncall twice()\ncall twice()")
    assert info["action_valid"] and info["skills_created"] == ["twice"] and info["primitive_steps"] == 4


def test_unknown_skill_call_is_invalid_with_suggestion():
    env = make()
    env.reset(options={"chain": 0})
    env.step(FIND_SKILL)
    _, _, _, _, info = env.step("call fecth(key)")
    assert info["action_kind"] == "invalid" and "fetch" in info["message"]


def test_skills_none_rejects_definitions_and_hides_library():
    env = make(skills="none")
    env.reset(options={"chain": 0})
    obs, _, _, _, info = env.step(FIND_SKILL)
    assert info["action_kind"] == "invalid" and "disabled" in info["message"]
    assert obs["skills"] == "" and info["skill_library"] == []


def test_library_scope_chain_empties_and_persistent_keeps():
    for scope, expected in (("chain", []), ("persistent", ["fetch"])):
        env = make(library_scope=scope)
        env.reset(options={"chain": 0})
        env.step(FIND_SKILL)
        _, info = env.reset(options={"chain": 1})
        assert [s["name"] for s in info["skill_library"]] == expected


def test_reset_with_given_library_and_guidance_triggers():
    library = SkillLibrary(
        [
            Skill(name="always", kind="guidance", description="d", text="Check every box once."),
            Skill(name="after_look", kind="guidance", description="d", text="Stop looking.",
                  trigger="action_pattern", pattern="^look$"),
        ]
    )  # fmt: skip
    env = make(skills="guidance")
    obs, _ = env.reset(options={"chain": 0, "skill_library": library})
    assert "Check every box once." in obs["skills"] and "Stop looking." not in obs["skills"]
    obs, *_ = env.step("look")
    assert "Stop looking." in obs["skills"]
    assert len(library) == 2  # the env works on a copy


def test_guidance_uses_count_the_observations_that_show_them():
    library = SkillLibrary(
        [
            Skill(name="always", kind="guidance", text="Check every box once."),
            Skill(name="at_start", kind="guidance", text="Plan first.", trigger="beginning"),
            Skill(name="after_look", kind="guidance", text="Stop looking.", trigger="action_pattern", pattern="^look$"),
            Skill(name="paused", kind="guidance", text="Old tip.", status="pruned"),
        ]
    )  # fmt: skip

    def uses(info):
        return {entry["name"]: entry["uses"] for entry in info["skill_library"]}

    env = make(skills="guidance", max_steps_per_task=3)
    shown = dict.fromkeys(library.names(), 0)  # counted here from the observations themselves
    obs, info = env.reset(options={"chain": 0, "skill_library": library})
    for action in ("look", "go to box 1", "look", "look", "look"):
        for name, text in (("always", "Check every"), ("at_start", "Plan first"), ("after_look", "Stop looking")):
            shown[name] += text in obs["skills"]
        assert uses(info) == shown
        obs, _, _, _, info = env.step(action)
    # reset + 5 steps = 6 observations; "beginning" fires on each task's first (reset, and after turn 3 ends task 0)
    assert uses(info) == {"always": 6, "at_start": 2, "after_look": 3, "paused": 0}
    env.render()  # rendering for a human shows nothing new to the agent: no use counted
    assert env.library.get("always").uses == 6
    assert library.get("always").uses == 0  # the env counted on its copy

    env = make(skills="program")  # guidance is not shown in this mode, so it is never used
    _, info = env.reset(options={"chain": 0, "skill_library": library})
    _, _, _, _, info = env.step("look")
    assert uses(info) == dict.fromkeys(library.names(), 0)


def test_expert_plan_info_key_on_request():
    env = make(expert_plan=True)
    _, info = env.reset(options={"chain": 0})
    assert info["expert_plan"][0] == "go to box 1"
    assert "expert_plan" not in make().reset(options={"chain": 0})[1]


def test_chains_cover_split_and_tasks_listed():
    env = make(chain_length=2)
    assert env.num_chains == 4  # 2 households x 3 tasks -> chains of 2 + 1 per household
    assert sorted(env.tasks) == sorted(t.task_id for t in ToyDomain().tasks("train"))


@pytest.mark.parametrize(
    "kwargs", [{"split": "test"}, {"skills": "all"}, {"library_scope": "global"}, {"chain_length": 0}]
)
def test_bad_kwargs_raise_clear_errors(kwargs):
    with pytest.raises(InvalidConfigError, match=next(iter(kwargs))):
        make(**kwargs)


def test_bad_reset_options_raise():
    env = make()
    with pytest.raises(InvalidConfigError):
        env.reset(options={"chain": 99})
    with pytest.raises(InvalidConfigError, match=r"options\['chain'\]=True is a bool; pass the chain index as an int"):
        env.reset(options={"chain": True})
    with pytest.raises(InvalidConfigError, match="is a float"):
        env.reset(options={"chain": 1.0})
    with pytest.raises(InvalidConfigError, match=r"must be an int in \[0, "):
        env.reset(options={"chain": np.int64(-1)})
    with pytest.raises(InvalidConfigError):
        env.reset(options={"skill_library": {"not": "a library"}})


@pytest.mark.parametrize("index", [np.int64(1), np.int32(1), np.uint8(1), 1])
def test_reset_chain_accepts_numpy_integers(index):
    env = make()
    _, info = env.reset(options={"chain": index})
    assert info["task_id"] == env.chains[1][0].task_id and type(env._chain_index) is int


def test_same_seed_same_transitions():
    def rollout(seed):
        env = make()
        env.action_space.seed(seed)
        obs, info = env.reset(seed=seed)
        out = [(obs, info["task_id"])]
        for _ in range(10):
            obs, reward, terminated, _, info = env.step(env.action_space.sample()[:20])
            out.append((obs, reward, info["task_id"]))
            if terminated:
                break
        return out

    assert rollout(3) == rollout(3)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=300))
def test_any_string_is_a_legal_action(text):
    env = make()
    env.reset(options={"chain": 0})
    obs, _, _, _, info = env.step(text)
    assert env.observation_space.contains(obs)
    assert isinstance(info["action_valid"], bool)


@pytest.mark.parametrize("vector_cls", [gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv])
def test_vector_envs(vector_cls):
    kwargs = {"shared_memory": False} if vector_cls is gym.vector.AsyncVectorEnv else {}
    envs = vector_cls([lambda: make() for _ in range(2)], **kwargs)
    obs, info = envs.reset(seed=0)
    assert len(obs["task"]) == 2
    obs, reward, terminated, truncated, info = envs.step(("go to box 1", "look"))
    assert reward.shape == (2,) and list(info["action_kind"]) == ["command", "command"]
    envs.close()


def test_skills_text_follows_every_library_change():
    env = make()
    obs, _ = env.reset(options={"chain": 0})
    assert obs["skills"] == ""
    obs, *_ = env.step(FIND_SKILL)
    assert "fetch(item): search every box" in obs["skills"]
    env.library.get("fetch").description = "edited in place"  # a user may edit a live skill
    obs, *_ = env.step("look")
    assert "fetch(item): edited in place" in obs["skills"] and "search every box" not in obs["skills"]
    env.library = SkillLibrary([Skill(name="tip", kind="guidance", text="Open boxes.")])  # or swap the library
    env.skills_mode = "both"
    obs, *_ = env.step("look")
    assert obs["skills"] == "Guidance:\n- tip: Open boxes."
    env.library.remove("tip")
    obs, *_ = env.step("look")
    assert obs["skills"] == ""


def test_info_lists_are_fresh_copies_not_env_state():
    env = make()
    _, info = env.reset(options={"chain": 0})
    info["admissible_commands"].clear()
    _, _, _, _, info = env.step("go to box 2")  # still admissible: the env's check does not read the info list
    assert info["action_valid"] and "go to box 1" in info["admissible_commands"]
    env.step(FIND_SKILL)
    _, _, _, _, first = env.step("call fetch(key)")
    first["skill_library"][0]["uses"] = 99
    first["skill_library"].clear()
    first["chain_successes"].append(False)
    first["skills_used"].clear()
    _, _, _, _, info = env.step("look")
    assert info["skill_library"][0]["uses"] == 1 and env.library.get("fetch").uses == 1
    assert info["chain_successes"] == [True]
    assert all(type(info[key]) is list for key in ("admissible_commands", "chain_successes", "skill_library"))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=40), st.integers(min_value=7, max_value=60))
def test_fit_maps_any_text_into_the_printable_charset(text, max_chars):
    from sage_envs.chain import CHARSET, TRUNCATION_MARK, _fit

    expected = "".join(ch if ch in CHARSET else "?" for ch in text)
    if len(expected) > max_chars:
        expected = expected[: max_chars - len(TRUNCATION_MARK)] + TRUNCATION_MARK
    assert _fit(text, max_chars) == expected


def test_library_render_cache_follows_in_place_edits_copies_and_triggers():
    import pickle

    lib = SkillLibrary([Skill(name="tip", kind="guidance", text="Stop.", trigger="action_pattern", pattern="^look$")])
    lib.add(parse_definition(FIND_SKILL)[0])
    programs = lib.render(turn=1, last_action="look", kinds=("program",))
    assert lib.render(turn=1, last_action="look", kinds=("program",)) is programs  # cached, not re-rendered
    assert lib.render(turn=1, last_action="look").endswith("Guidance:\n- tip: Stop.")
    assert "Guidance" not in lib.render(turn=2, last_action="go to box 1")  # triggers are evaluated every render
    lib.get("tip").pattern = "^go"  # edits in place reach the next render
    lib.get("fetch").description = "edited"
    assert lib.render(turn=2, last_action="go to box 1") == (
        "Program skills (call NAME(args)):\n- fetch(item): edited\n\nGuidance:\n- tip: Stop."
    )
    lib.get("tip").status = "pruned"
    assert lib.render(turn=2, last_action="go to box 1") == "Program skills (call NAME(args)):\n- fetch(item): edited"
    clone = lib.copy()
    clone.get("fetch").description = "clone only"
    assert "clone only" in clone.render(turn=0, last_action=None)
    assert "clone only" not in lib.render(turn=0, last_action=None)
    assert pickle.loads(pickle.dumps(lib))._render_cache is None  # a cache key means nothing in another process
    lib.remove("fetch")
    assert lib.render(turn=0, last_action=None) == ""
