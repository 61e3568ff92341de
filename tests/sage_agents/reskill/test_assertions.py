"""The 9 assertion checks, pass rates split by outcome, mining, the engine, and the experience reservoir."""

import json

import pytest

from sage_agents.reskill.assertions import (
    CHECK_TYPES,
    Assertion,
    AssertionEngine,
    action_key,
    mine_assertions,
    pass_rates,
    pattern_words,
    restates_outcome,
)
from sage_agents.reskill.reservoir import Episode, ExperienceReservoir, episodes_from_rollouts
from sage_agents.rollout import ChainRollout, Turn


def ep(actions, success=False, observations=None, task_type="t"):
    observations = observations if observations is not None else ["ok"] * len(actions)
    return Episode(list(actions), list(observations), success, task_type)


HEAT = ep(
    ["go to fridge 1", "take egg 1 from fridge 1", "go to microwave 1", "heat egg 1 with microwave 1", "put egg 1"],
    observations=["You arrive at fridge 1.", "You pick up the egg 1.", "You arrive.", "You heat the egg 1.", "Done."],
)
LOOP = ep(
    ["go to fridge 1", "go to fridge 1", "look", "take egg 1 from fridge 1"],
    observations=["You arrive at fridge 1.", "Nothing happens.", "You are in a room.", "You pick up the egg 1."],
)

CASES = [
    # (check, params, passes HEAT, passes LOOP)
    ("action_exists", {"pattern": r"^heat\b"}, True, False),
    ("action_not_exists", {"pattern": r"^heat\b"}, False, True),
    ("action_before", {"first": r"^take\b", "second": r"^heat\b"}, True, False),  # LOOP never heats
    ("action_before", {"first": r"^heat\b", "second": r"^take\b"}, False, False),
    ("no_consecutive_repeat", {}, True, False),
    ("no_consecutive_repeat", {"prefix": "look"}, True, True),  # the repeat in LOOP is not a "look"
    ("final_action", {"pattern": r"^put\b"}, True, False),
    ("min_steps", {"n": 5}, True, False),
    ("max_steps", {"n": 4}, False, True),
    ("action_count", {"pattern": r"^go to\b", "min": 0, "max": 1}, False, False),
    ("action_count", {"pattern": r"^go to\b", "min": 2}, True, True),
    ("action_count", {"pattern": r"^go to\b", "max": 2}, True, True),
    ("observation_contains", {"pattern": "Nothing happens"}, False, True),
    ("observation_contains", {"pattern": "You pick up", "after_action": r"^look\b"}, False, True),
    ("observation_contains", {"pattern": "You arrive at", "after_action": r"^take\b"}, False, False),
]


@pytest.mark.parametrize("check, params, heat, loop", CASES)
def test_each_check_type(check, params, heat, loop):
    assertion = Assertion(check, params)
    assert assertion.evaluate(HEAT) is heat
    assert assertion.evaluate(LOOP) is loop


def test_every_check_type_is_covered():
    assert {c[0] for c in CASES} == set(CHECK_TYPES) and len(CHECK_TYPES) == 9


def test_empty_episode():
    empty = ep([])
    assert not Assertion("final_action", {"pattern": "x"}).evaluate(empty)
    assert Assertion("no_consecutive_repeat").evaluate(empty) and Assertion("max_steps", {"n": 0}).evaluate(empty)


@pytest.mark.parametrize(
    "check, params, message",
    [
        ("action_exist", {}, "unknown check"),
        ("action_exists", {}, "missing ['pattern']"),
        ("action_exists", {"pattern": "x", "n": 1}, "unknown ['n']"),
        ("action_exists", {"pattern": "(a+)+b"}, "catastrophic"),
        ("action_exists", {"pattern": "("}, "not a valid regex"),
        ("min_steps", {"n": -1}, "non-negative int"),
        ("action_count", {"pattern": "x", "max": "2"}, "non-negative int"),
        ("action_before", {"first": "", "second": "x"}, "non-empty regex"),
    ],
)
def test_invalid_assertions_are_rejected(check, params, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(").replace("+", r"\+")):
        Assertion(check, params)


def test_round_trip_and_ids():
    a = Assertion("action_count", {"pattern": "^go", "min": 1, "max": None}, "goes somewhere")
    b = Assertion.from_dict(json.loads(json.dumps(a.to_dict())))
    assert b == a and b.id == a.id == 'action_count{"max": null, "min": 1, "pattern": "^go"}'
    with pytest.raises(ValueError, match="unknown assertion keys"):
        Assertion.from_dict({"check": "min_steps", "params": {"n": 1}, "why": "x"})


def test_pass_rates_split_by_success_and_failure():
    episodes = [ep(["heat x"], True), ep(["heat x"], True), ep(["look"], True), ep(["heat x"]), ep(["look"])] + [
        ep(["look"])
    ] * 3
    rates = pass_rates(Assertion("action_exists", {"pattern": "^heat"}), episodes)
    assert (rates.n_success, rates.n_failure) == (3, 5)
    assert rates.success_rate == pytest.approx(2 / 3) and rates.failure_rate == pytest.approx(1 / 5)
    assert rates.overall == pytest.approx(3 / 8) and rates.contrast == pytest.approx(2 / 3 - 1 / 5)
    assert pass_rates(Assertion("action_exists", {"pattern": "^heat"}), episodes[:3]).contrast == 0.0  # no failures
    assert rates.to_dict()["check"] == "action_exists"


def test_action_keys_and_pattern_words():
    assert action_key("go to fridge 1") == "go to" and action_key("Heat egg 1 with microwave 1") == "heat"
    assert action_key("pick up key") == "pick up" and action_key("  ") == ""
    assert pattern_words(r"^go\ to\b") == "go to" and pattern_words("^(a|b)") == "^(a|b)"


def make_heat_reservoir():
    """Successes heat before placing; failures place cold or wander."""
    wins = [ep(["go to fridge 1", "take egg 1", "heat egg 1", "put egg 1"], True) for _ in range(6)]
    losses = [ep(["go to fridge 1", "take egg 1", "put egg 1"]) for _ in range(4)]
    losses += [ep(["go to fridge 1", "go to fridge 1", "look"], observations=["x", "Nothing happens.", "x"])] * 3
    return wins + losses


def test_mining_covers_the_check_types_and_finds_the_contrast():
    episodes = make_heat_reservoir()
    mined = mine_assertions(episodes)
    assert {a.check for a in mined} >= {
        "action_exists",
        "action_before",
        "no_consecutive_repeat",
        "final_action",
        "min_steps",
        "max_steps",
        "action_count",
        "observation_contains",
    }
    engine = AssertionEngine()
    ranked = engine.refresh(episodes)
    assert 1 <= len(ranked) <= 10 == engine.max_assertions
    assert ranked[0].contrast == pytest.approx(1.0)  # e.g. "uses heat": all successes, no failure
    assert all(abs(r.contrast) >= engine.min_contrast for r in ranked)
    assert [abs(r.contrast) for r in ranked] == sorted((abs(r.contrast) for r in ranked), reverse=True)
    assert "heat" in engine.summary(episodes)
    restored = AssertionEngine.from_dict(json.loads(json.dumps(engine.to_dict())))
    assert [a.id for a in restored.assertions] == [a.id for a in engine.assertions]


def test_engine_keeps_its_assertions_without_both_outcomes():
    engine = AssertionEngine()
    engine.refresh(make_heat_reservoir())
    kept = list(engine.assertions)
    engine.refresh([ep(["look"]) for _ in range(5)])  # only failures: nothing to contrast
    assert engine.assertions == kept


def test_proposed_assertions_compete_with_mined_ones():
    engine = AssertionEngine(max_assertions=2)
    proposed = Assertion("action_exists", {"pattern": "^heat egg"}, "heats the egg")
    ranked = engine.refresh(make_heat_reservoir(), [proposed])
    assert len(ranked) == 2 and proposed.id in {r.assertion.id for r in ranked}


# ---------------------------------------------------------------------------------------------- RESERVOIR
def test_reservoir_is_bounded_and_round_trips():
    reservoir = ExperienceReservoir(capacity=3)
    for i in range(5):
        reservoir.add(ep([f"a{i}"], success=i % 2 == 0))
    assert [e.actions[0] for e in reservoir] == ["a2", "a3", "a4"]
    assert len(reservoir.successes()) == 2 and len(reservoir.failures()) == 1
    assert reservoir.success_rate() == pytest.approx(2 / 3)
    restored = ExperienceReservoir.from_dict(json.loads(json.dumps(reservoir.to_dict())))
    assert restored.to_dict() == reservoir.to_dict()
    with pytest.raises(ValueError, match="one observation per action"):
        Episode(["a"], [], True)
    with pytest.raises(ValueError, match="capacity"):
        ExperienceReservoir(0)


def test_episodes_from_rollouts():
    def turn(k, action, observation):
        return Turn(k, [], [], [], action, "command", "command", True, 0.0, 1, observation)

    ro = ChainRollout(chain=0, turns=[turn(0, "go", "o1"), turn(0, "take", "o2"), turn(1, "look", "o3")])
    ro.task_success, ro.played, ro.task_types, ro.tasks = [True, False], [True, True], ["a", "b"], ["T1", "T2"]
    skipped = ChainRollout(chain=1, played=[False, False], task_success=[False, False], task_types=["", ""])
    episodes = episodes_from_rollouts([ro, skipped], step=7, arms=["new", "old"], versions=[2, 1])
    assert len(episodes) == 2
    first, second = episodes
    assert (first.actions, first.observations, first.success, first.task_type, first.task) == (
        ["go", "take"],
        ["o1", "o2"],
        True,
        "a",
        "T1",
    )
    assert (second.actions, second.success, second.step, second.arm, second.version) == (["look"], False, 7, "new", 2)


def capped_reservoir():
    """Every failure ran into a 6-action step limit; successes are short (what a weak ALFWorld policy gives)."""
    wins = [ep(["go to desk 1", "take pen 1 from desk 1", "move pen 1 to shelf 1"], True) for _ in range(3)]
    wins.append(ep(["go to desk 1", "go to bed 1", "take pen 1 from bed 1", "move pen 1 to shelf 1"], True))
    losses = [ep(["go to desk 1", "go to bed 1"] * 3) for _ in range(6)]
    return wins + losses


def test_step_bounds_that_only_restate_the_outcome_are_left_out():
    # ALFWorld run (docs/reskill.md): with every failure cut at the step limit, "takes at most n actions" (n < limit)
    # passes exactly on the successes; the rule creator kept proposing it ("at most 6", "26", "29 actions")
    episodes = capped_reservoir()
    bound = Assertion("max_steps", {"n": 4})
    assert pass_rates(bound, episodes).contrast == 1.0 and restates_outcome(bound, episodes)
    assert not restates_outcome(Assertion("max_steps", {"n": 6}), episodes)  # n >= limit: not a restatement
    assert not restates_outcome(Assertion("action_count", {"pattern": r"^go\ to\b", "max": 2}), episodes)
    assert "max_steps" not in {a.check for a in mine_assertions(episodes)}
    ranked = AssertionEngine().refresh(episodes, [bound])  # nor when an LLM proposes one
    assert ranked and all(r.assertion.check != "max_steps" for r in ranked)
    # a failure that ended early (not at the limit) makes the bound informative again: it is mined as before
    mixed = [*episodes, ep(["go to desk 1", "look"])]
    assert not restates_outcome(bound, mixed) and "max_steps" in {a.check for a in mine_assertions(mixed)}


def test_family_ignores_the_mined_counts():
    assert Assertion("max_steps", {"n": 6}).family == Assertion("max_steps", {"n": 29}).family == "max_steps{}"
    a = Assertion("action_count", {"pattern": r"^go\ to\b", "min": 0, "max": 3})
    b = Assertion("action_count", {"pattern": r"^go\ to\b", "min": 0, "max": 15})
    assert a.family == b.family != a.id != b.id
    assert a.family != Assertion("action_count", {"pattern": r"^take\b", "max": 3}).family
    assert (
        Assertion("action_exists", {"pattern": "^heat"}).family == Assertion("action_exists", {"pattern": "^heat"}).id
    )
