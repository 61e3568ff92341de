"""The skill creator: verification, the rule backend, and the LLM backend (scripted, fake HTTP server, local HF)."""

import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from sage_agents.reskill.assertions import Assertion, action_key, pass_rates
from sage_agents.reskill.controller import make_creator
from sage_agents.reskill.creator import (
    RuleCreator,
    advised_key,
    diagnosed_turns,
    fire_rate,
    next_action,
    shown,
    skill_text,
    source_failures,
    unknown_words,
    verify_skill,
)
from sage_agents.reskill.llm import LLMCreator, extract_json, hf_generate, openai_generate
from sage_agents.reskill.registry import Bundle, VersionRegistry
from sage_envs import Skill, SkillLibrary
from tests.sage_agents.reskill.test_assertions import HEAT, LOOP, capped_reservoir, ep, make_heat_reservoir


def g(name, text="tip", trigger="general", pattern="", provenance=None):
    return Skill(name=name, kind="guidance", text=text, trigger=trigger, pattern=pattern, provenance=provenance or {})


# ---------------------------------------------------------------------------------------------- VERIFY
def test_advised_key_reads_back_the_verb_next_action_wrote():
    cases = [("heat", "heat egg 1 with microwave 1", "it heats"), ("go to", "", ""), ("open", "x", "")]
    for key, example, reason in cases:
        assert advised_key(skill_text("Right after you 'take'.", next_action(key, example, reason))) == key
    assert advised_key("Look around before you act.") is None


def test_fire_rate_and_verification():
    episodes = [ep(["take a", "heat a"]), ep(["heat a", "take a"]), ep(["look"]), ep(["take b", "take c"])]
    assert fire_rate(g("x"), episodes) == fire_rate(g("x", trigger="beginning"), episodes) == 1.0
    # shown on the turn after a matching action: a final "take" never gets the skill shown
    assert fire_rate(g("x", trigger="action_pattern", pattern="^take"), episodes) == 0.5
    assert verify_skill(g("x", trigger="action_pattern", pattern="^take"), episodes) is None
    problem = verify_skill(g("x", trigger="action_pattern", pattern="^heat"), episodes)
    assert "fires in 25% of recent episodes (need 50%)" in problem
    assert "limit 500" in verify_skill(g("x", text="y" * 501), episodes)
    assert verify_skill(g("x", trigger="action_pattern", pattern="^heat"), episodes, min_fire_rate=0.25) is None
    assert skill_text("w", "a", "e") == "## When to Use\nw\n## Action\na\n## Examples\ne"


DIAGNOSED = [
    # (check, params, good, turns of HEAT, turns of LOOP); HEAT: go, take, go, heat, put; LOOP: go, go, look, take
    ("action_exists", {"pattern": r"^heat\b"}, True, [], [0, 1, 2, 3]),  # LOOP never heats: any turn
    ("action_exists", {"pattern": r"^heat\b"}, False, [3], []),  # heating goes with failure: the heat turn
    ("action_not_exists", {"pattern": r"^look\b"}, True, [], [2]),
    ("action_before", {"first": r"^take\b", "second": r"^look\b"}, True, [0, 1, 2, 3, 4], [2]),  # LOOP: looked first
    ("no_consecutive_repeat", {}, True, [], [1]),
    ("final_action", {"pattern": r"^put\b"}, True, [], [3]),
    ("max_steps", {"n": 3}, True, [3, 4], [3]),
    ("min_steps", {"n": 5}, True, [], [3]),
    ("action_count", {"pattern": r"^go to\b", "max": 1}, True, [2], [1]),
    ("observation_contains", {"pattern": "Nothing happens"}, False, [], [2]),  # the turn after it
    ("observation_contains", {"pattern": "You heat"}, True, [], [0, 1, 2, 3]),
]


@pytest.mark.parametrize("check, params, good, heat, loop", DIAGNOSED)
def test_diagnosed_turns_are_where_a_failure_breaks_its_assertion(check, params, good, heat, loop):
    assertion = Assertion(check, params)
    assert diagnosed_turns(assertion, HEAT, good) == heat
    assert diagnosed_turns(assertion, LOOP, good) == loop


def test_source_failures_and_shown_against_a_naive_loop():
    episodes = make_heat_reservoir()
    rates = pass_rates(Assertion("no_consecutive_repeat", {}), episodes)
    pairs = source_failures(rates, episodes)
    assert [e for e, _ in pairs] == [e for e in episodes if not e.success and not rates.assertion.evaluate(e)]
    skill = g("x", trigger="action_pattern", pattern=r"^go\ to\b")
    for episode in episodes:
        previous = None
        for turn, action in enumerate(episode.actions):
            expected = previous is not None and previous.startswith("go to")
            assert shown(skill, episode, turn) is expected
            previous = action


def test_unknown_words_and_the_vocabulary_check():
    from sage_agents.models import build_tokenizer

    tokenizer = build_tokenizer(include_alfworld=False)
    assert unknown_words("go to it , open it , then take it", tokenizer) == []
    # the words as the text spells them (case kept), each once, sorted
    assert unknown_words("Zyzzyva it, quixotically zyzzyva", tokenizer) == [
        "Zyzzyva",
        "quixotically",
        "zyzzyva",
    ]
    assert unknown_words("Zyzzyva", None) == []
    episodes = make_heat_reservoir()
    plain = g("plain", text="go to it , then heat it with it")
    assert verify_skill(plain, episodes, tokenizer=tokenizer) is None
    problem = verify_skill(g("odd", text="heat the egg, quixotically"), episodes, tokenizer=tokenizer)
    assert "tokenizer does not know" in problem and "quixotically" in problem


def test_the_pre_test_check_asks_for_a_skill_shown_on_its_source_failures():
    episodes = make_heat_reservoir()
    rates = pass_rates(Assertion("action_exists", {"pattern": r"^heat\b"}), episodes)
    sources = source_failures(rates, episodes)  # the 7 failures: none heats, so every turn is diagnosed
    after_heat = g("x", trigger="action_pattern", pattern=r"^heat\b")  # heat only happens in successes
    assert fire_rate(after_heat, episodes) > 0 and verify_skill(after_heat, episodes, min_fire_rate=0) is None
    problem = verify_skill(after_heat, episodes, min_fire_rate=0, sources=sources)
    assert "shown at the turns diagnosed in none of the 7 failed episodes it was made from" in problem
    assert verify_skill(after_heat, episodes, min_fire_rate=0, sources=[(e, None) for e, _ in sources]) is not None
    after_take = g("y", trigger="action_pattern", pattern=r"^take\b")
    assert verify_skill(after_take, episodes, min_fire_rate=0, sources=sources) is None


def test_rule_skills_name_the_action_and_fire_where_the_failures_went_wrong():
    episodes = make_heat_reservoir()
    creator = RuleCreator()
    for rates in creator.engine.refresh(episodes):
        skill, _ = creator.author(rates, episodes)
        if skill is None:
            continue
        turns = source_failures(rates, episodes)
        assert any(shown(skill, e, t) for e, ts in turns for t in ts), rates.assertion.description
        assert "do '" in skill.text or "Do not" in skill.text, skill.text  # an action, not just a statistic
    rates = pass_rates(Assertion("action_exists", {"pattern": r"^heat\b"}), episodes)
    skill, _ = creator.author(rates, episodes)
    assert "Next, do 'heat', e.g. heat egg 1" in skill.text and skill.pattern == r"^take\b"


def test_the_rule_creator_records_skills_the_policy_cannot_read():
    from sage_agents.models import build_tokenizer

    creator = RuleCreator(tokenizer=build_tokenizer(include_alfworld=False))
    assert creator.create(make_heat_reservoir(), VersionRegistry(), step=1) is None  # no "Next", "egg", ...
    reasons = [r["reason"] for r in creator.rejections]
    assert any("tokenizer does not know" in r for r in reasons)
    assert all("tokenizer does not know" in r or "no command to advise" in r for r in reasons)
    assert "tokenizer does not know" in creator.last_error


def test_rule_skills_speak_the_words_of_the_sft_guidance_so_an_sft_policy_can_read_them():
    from types import SimpleNamespace

    from sage_agents.models import build_tokenizer
    from sage_agents.sft import guidance_skill

    # The vocabulary of a policy whose SFT prompts showed guidance (the demo's sft_guidance): the layout's words,
    # the domain's, and nothing of the rule creator's statistics
    advice = SimpleNamespace(name="heat_egg", command="heat egg 1 with microwave 1", reason="the task needs the egg")
    shown = [guidance_skill(advice, turn, previous).text for turn, previous in ((0, None), (3, "take egg 1"))]
    creator = RuleCreator(tokenizer=build_tokenizer(shown))
    bundle = creator.create(make_heat_reservoir(), VersionRegistry(), step=1)
    assert bundle is not None and bundle.operations, creator.last_error
    for op in bundle.operations:
        assert unknown_words(op.skill.text, creator.tokenizer) == [] and "successes" not in op.skill.text
        assert "successes" in op.skill.description  # the evidence, for people


# ---------------------------------------------------------------------------------------------- RULE
def test_rule_creator_adds_a_verified_skill_for_the_strongest_contrast():
    episodes = make_heat_reservoir()
    creator = RuleCreator()
    bundle = creator.create(episodes, VersionRegistry(), step=4)
    assert isinstance(bundle, Bundle) and bundle.creator == "rule" and creator.last_error == ""
    [op] = bundle.operations
    assert op.op == "add" and op.skill.kind == "guidance"
    assert verify_skill(op.skill, episodes) is None and len(op.skill.text) <= 500
    assert "## When to Use" in op.skill.text and "## Action" in op.skill.text
    assertion = Assertion.from_dict(json.loads(op.skill.provenance["assertion"]))
    assert pass_rates(assertion, episodes).contrast >= 0.9
    assert bundle.evidence["assertions"] and bundle.diagnosis.startswith("add ")


def test_rule_creator_prefers_a_conditional_trigger():
    episodes = make_heat_reservoir()
    creator = RuleCreator()
    rates = pass_rates(Assertion("action_exists", {"pattern": r"^heat\b"}), episodes)
    skill, problems = creator.author(rates, episodes)
    assert skill.name == "use_heat" and skill.trigger == "action_pattern" and skill.pattern == r"^take\b"
    assert problems == []
    creator.min_fire_rate = 0.9  # "take" is followed by another action in 10 of 13 episodes: falls back
    skill, problems = creator.author(rates, episodes)
    assert skill.trigger == "beginning" and "fires in 77%" in problems[0]


def test_rule_creator_prunes_a_skill_whose_assertion_no_longer_separates_outcomes():
    episodes = [ep(["look", "take x"], i % 2 == 0) for i in range(10)]  # "look" in every episode
    assertion = json.dumps(Assertion("action_exists", {"pattern": r"^look\b"}).to_dict())
    registry = VersionRegistry(SkillLibrary([g("use_look", provenance={"assertion": assertion})]))
    bundle = RuleCreator().create(episodes, registry, step=9)
    assert [(op.op, op.name) for op in bundle.operations] == [("delete", "use_look")]
    assert "no longer separates" in bundle.operations[0].reason


def test_rule_creator_makes_room_when_the_library_is_full_and_modifies_covered_skills():
    episodes = make_heat_reservoir()
    top = RuleCreator().create(episodes, VersionRegistry(), 0).operations[0].skill
    weak = json.dumps(Assertion("action_exists", {"pattern": r"^go\ to\b"}).to_dict())
    narrowed = g(top.name, trigger="action_pattern", pattern=r"^take\b", provenance=dict(top.provenance))
    registry = VersionRegistry(SkillLibrary([narrowed, g("use_go_to", provenance={"assertion": weak})]), max_active=2)
    ops = {(op.op, op.name): op for op in RuleCreator().create(episodes, registry, 5).operations}
    assert ("delete", "use_go_to") in ops  # pruned (no contrast) which also makes room
    assert any(op == "add" for op, _ in ops)
    modified = ops.get(("modify", top.name))
    assert modified is not None and modified.skill.trigger == "general"
    version = registry.propose(Bundle(list(ops.values())), 5)
    assert len(version.library.guidance(status=None)) <= 2
    registry.reject(6)  # a rejected rewrite is not proposed again while its assertion is excluded
    excluded = [Assertion.from_dict(json.loads(top.provenance["assertion"])).id]
    again = RuleCreator().create(episodes, registry, 7, exclude=excluded)
    assert ("modify", top.name) not in {(op.op, op.name) for op in again.operations}


def test_rule_creator_respects_exclusions_and_gives_up_without_contrast():
    episodes = make_heat_reservoir()
    creator = RuleCreator()
    first = creator.create(episodes, VersionRegistry(), 0).operations[0].skill
    excluded = Assertion.from_dict(json.loads(first.provenance["assertion"])).id
    second = creator.create(episodes, VersionRegistry(), 0, exclude=[excluded]).operations[0].skill
    assert second.provenance["assertion"] != first.provenance["assertion"]
    assert creator.create([ep(["look"]) for _ in range(9)], VersionRegistry(), 0) is None
    assert creator.last_error.startswith("no discriminative assertion")


def test_final_action_advice_follows_the_sign_of_the_contrast():
    # ALFWorld run (docs/reskill.md): "ends with 'go to' -0.59" became finish_with_go_to, "Complete the task with a
    # 'go to' action": the advice said the opposite of the evidence
    episodes = capped_reservoir()
    ends_walking = pass_rates(Assertion("final_action", {"pattern": r"^go\ to\b"}, "ends with 'go to'"), episodes)
    assert ends_walking.contrast < 0
    skill, _ = RuleCreator().author(ends_walking, episodes)
    assert skill.name == "not_done_after_go_to" and "do 'go to'" not in skill.text
    assert "end with 'go to' (e.g. go to desk 1). (0% of successes vs 100% of failures pass)" in skill.description
    assert skill.text.endswith("Next, do 'take', e.g. take pen 1 from desk 1.")  # what successes do there
    ends_moving = pass_rates(Assertion("final_action", {"pattern": r"^move\b"}, "ends with 'move'"), episodes)
    skill, _ = RuleCreator().author(ends_moving, episodes)
    assert ends_moving.contrast > 0 and skill.name == "finish_with_move"
    # actionable: shown right after an action the failures end on, naming the command to send
    # the take-trigger is never shown on a failure's last turn (the one diagnosed): the next one that is
    assert (skill.trigger, skill.pattern) == (
        "action_pattern",
        r"^go\ to\b",
    ) and "Right after you 'go to'." in skill.text
    assert "Next, do 'move', e.g. move pen 1 to shelf 1." in skill.text


def test_each_trigger_advises_what_successes_do_where_it_fires():
    # demo seed 1 (docs/demo.md): limit_go_to was shown "Right after you 'take'" with "Next, do 'take'": the
    # advice was what successes do after 'go to', the trigger where the failures' extra 'go to' came (after 'take')
    wins = [ep(["go to bed 1", "take pen 1 from bed 1", "go to shelf 1", "move pen 1 to shelf 1"], True)] * 3
    looked = ["go to bed 1", "take pen 1 from bed 1", "examine pen 1", "go to shelf 1", "move pen 1 to shelf 1"]
    wins.append(ep(looked, True))
    losses = [ep(["go to desk 1", "go to bed 1", "take pen 1 from bed 1", "go to desk 1", "look", "look"])] * 4
    episodes = wins + losses
    rates = pass_rates(Assertion("action_count", {"pattern": r"^go\ to\b", "max": 2}), episodes)
    assert rates.contrast > 0 and {t for _, ts in source_failures(rates, episodes) for t in ts} == {3}
    skill, _ = RuleCreator().author(rates, episodes)
    # shown where the failures sent one 'go to' too many, naming what successes do right after 'take' instead
    assert (skill.trigger, skill.pattern) == ("action_pattern", r"^take\b")
    assert skill.text.endswith("Right after you 'take'.\n## Action\nNext, do 'examine', e.g. examine pen 1.")
    # when successes do nothing but the limited action there, that trigger is dropped, not given foreign advice
    only_walk = wins[:3] + losses
    skill, _ = RuleCreator().author(pass_rates(rates.assertion, only_walk), only_walk)
    assert skill.pattern != r"^take\b" and "Next, do 'go to'" not in skill.text
    # every skill whose advice is what successes do next (against a behaviour: too many, avoided, a wrong last
    # action, a repeat): an action_pattern trigger after K names what successes do right after K
    for episodes in (make_heat_reservoir(), capped_reservoir(), wins + losses):
        creator = RuleCreator()
        for rates in creator.engine.refresh(episodes):
            skill, _ = creator.author(rates, episodes)
            next_step = skill and skill.name.startswith(("limit_", "avoid_", "not_done_after_", "no_repeat_"))
            if not next_step or skill.trigger != "action_pattern" or "Next, do '" not in skill.text:
                continue
            advised = skill.text.split("Next, do '")[1].split("'")[0]
            done_after = {
                action_key(e.actions[i + 1])
                for e in episodes if e.success for i, a in enumerate(e.actions[:-1]) if re.search(skill.pattern, a)
            }  # fmt: skip
            assert advised in done_after, (skill.name, skill.text)


def test_a_rejected_behaviour_is_not_reproposed_with_drifted_counts():
    # ALFWorld run (docs/reskill.md): "uses 'go to' at most 3 times" was rejected at step 9 and came back at step
    # 21 as "at most 15 times" (a new id, same behaviour) although the 20-step cooldown was still running
    episodes = capped_reservoir()
    creator = RuleCreator()
    first = creator.create(episodes, VersionRegistry(), 0).operations[0].skill
    assertion = Assertion.from_dict(json.loads(first.provenance["assertion"]))
    assert assertion.check == "action_count"  # "uses 'go to' at most 2 times"
    drifted = Assertion(assertion.check, {**assertion.params, "max": assertion.params["max"] + 10})
    bundle = creator.create(episodes, VersionRegistry(), 1, exclude=[drifted.family])
    for op in bundle.operations:
        again = Assertion.from_dict(json.loads(op.skill.provenance["assertion"]))
        assert again.family != assertion.family
    # a live skill covers its family too: no second skill for the same behaviour with another count
    registry = VersionRegistry(SkillLibrary([g("limit", provenance={"assertion": json.dumps(drifted.to_dict())})]))
    ops = creator.create(episodes, registry, 2).operations
    added = [Assertion.from_dict(json.loads(op.skill.provenance["assertion"])) for op in ops if op.op == "add"]
    assert added and all(a.family != assertion.family for a in added)


def test_rule_creator_without_any_success_falls_back_on_failure_patterns():
    looping = [ep(["go to desk 1", "go to desk 1", "look"]) for _ in range(6)] + [ep(["look"]) for _ in range(2)]
    bundle = RuleCreator().create(looping, VersionRegistry(), step=3)
    [op] = bundle.operations
    # shown right after the action the failures repeat (where they went wrong), not on every turn
    assert (op.op, op.name, op.skill.trigger) == ("add", "no_repeat_go_to", "action_pattern")
    assert op.skill.pattern == r"^go\ to\b" and "Do not send the same command again" in op.skill.text
    assert "75% of 8 failed episodes break this" in op.skill.description
    calm = [ep(["go to desk 1", "look"]) for _ in range(8)]  # failures that do not repeat: nothing to say
    assert RuleCreator().create(calm, VersionRegistry(), step=3) is None


# ---------------------------------------------------------------------------------------------- LLM (scripted)
DIAGNOSIS = {
    "diagnosis": "Failures put the egg down cold.",
    "assertions": [
        {"check": "action_before", "params": {"first": "^heat", "second": "^put"}, "description": "heat first"}
    ],
}
RECOMMEND = {"operations": [{"op": "add", "name": "heat_before_put", "intent": "heat before placing"}]}
AUTHOR = {
    "skills": [
        {
            "name": "heat_before_put",
            "description": "Heat the object before placing it.",
            "when_to_use": "After you take the object.",
            "action": "Go to the microwave and heat it before you put it anywhere.",
            "example": "heat egg 1 with microwave 1",
            "trigger": "action_pattern",
            "pattern": "^take",
        }
    ]
}
REPLIES = {"diagnose": DIAGNOSIS, "recommend": RECOMMEND, "author": AUTHOR}


class Scripted:
    """A fake generate(prompt): answers by stage; ``bad`` leading replies per stage are garbage."""

    def __init__(self, bad=0, replies=None):
        self.bad, self.replies, self.prompts = bad, replies or REPLIES, []
        self.count = {}

    def __call__(self, prompt):
        self.prompts.append(prompt)
        stage = next(s for s in ("diagnose", "recommend", "author") if f"STAGE: {s}" in prompt)
        self.count[stage] = self.count.get(stage, 0) + 1
        if self.count[stage] <= self.bad:
            return "Sure! Here is my answer: {operations: [add heat]}"  # not JSON
        reply = self.replies[stage]
        return reply(self.count[stage]) if callable(reply) else "```json\n" + json.dumps(reply) + "\n```"


def test_llm_creator_runs_the_three_stages():
    generate = Scripted()
    creator = LLMCreator(generate)
    bundle = creator.create(make_heat_reservoir(), VersionRegistry(), step=2)
    [op] = bundle.operations
    assert (op.op, op.name, op.skill.trigger, op.skill.pattern) == ("add", "heat_before_put", "action_pattern", "^take")
    assert op.skill.text.startswith("## When to Use\nAfter you take") and bundle.creator == "llm"
    assert bundle.diagnosis == "Failures put the egg down cold." and creator.calls == 3
    assert any(a.check == "action_before" and a.params["first"] == "^heat" for a in creator.engine.assertions)
    assert "pass rate" in generate.prompts[0] and "Failed episodes" in generate.prompts[0]


def test_llm_creator_retries_bad_json_with_feedback():
    generate = Scripted(bad=1)
    creator = LLMCreator(generate, retries=2)
    bundle = creator.create(make_heat_reservoir(), VersionRegistry(), step=2)
    assert bundle is not None and creator.calls == 6
    retried = [p for p in generate.prompts if "YOUR PREVIOUS REPLY WAS REJECTED" in p]
    assert len(retried) == 3 and "no JSON object" in retried[0]


def test_llm_creator_gives_up_cleanly():
    generate = Scripted(bad=99)
    creator = LLMCreator(generate, retries=2)
    assert creator.create(make_heat_reservoir(), VersionRegistry(), step=2) is None
    assert creator.calls == 3 and creator.last_error.startswith("diagnose: gave up after 3 attempts")

    def broken(prompt):
        raise ConnectionError("endpoint down")

    creator = LLMCreator(broken, retries=1)
    assert creator.create(make_heat_reservoir(), VersionRegistry(), step=2) is None
    assert "ConnectionError: endpoint down" in creator.last_error


def test_llm_creator_sends_rule_violations_back():
    narrow = json.loads(json.dumps(AUTHOR))
    narrow["skills"][0]["pattern"] = "^heat"  # fires only in the 6 successes' non-final heats: no failure
    invalid_op = {"operations": [{"op": "modify", "name": "nope", "intent": "x"}]}
    replies = {
        "diagnose": lambda n: (
            json.dumps({"diagnosis": "d", "assertions": [{"check": "min_step", "params": {}}]})
            if n == 1
            else json.dumps(DIAGNOSIS)
        ),
        "recommend": lambda n: json.dumps(invalid_op if n == 1 else RECOMMEND),
        "author": lambda n: json.dumps(narrow if n == 1 else AUTHOR),
    }
    generate = Scripted(replies=replies)
    bundle = LLMCreator(generate).create(make_heat_reservoir(), VersionRegistry(), step=2)
    assert bundle is not None and bundle.operations[0].skill.pattern == "^take"
    feedback = [p.split("REJECTED:")[1] for p in generate.prompts if "REJECTED" in p]
    assert "unknown check 'min_step'" in feedback[0]
    assert "no skill named 'nope'" in feedback[1]
    assert "is shown in none of the 7 failed episodes it was made from" in feedback[2]


def test_llm_creator_drops_skills_that_never_verify_but_keeps_deletes():
    registry = VersionRegistry(SkillLibrary([g("old_tip")]))
    recommend = {"operations": [{"op": "delete", "name": "old_tip", "intent": "stale"}, *RECOMMEND["operations"]]}
    long = json.loads(json.dumps(AUTHOR))
    long["skills"][0]["action"] = "x" * 600
    generate = Scripted(replies={"diagnose": DIAGNOSIS, "recommend": recommend, "author": long})
    creator = LLMCreator(generate, retries=1)
    bundle = creator.create(make_heat_reservoir(), registry, step=2)
    assert [(op.op, op.name) for op in bundle.operations] == [("delete", "old_tip")]
    assert "limit 500" in creator.last_error


def test_extract_json():
    assert extract_json('noise {"a": {"b": 1}} tail {"c": 2}') == {"a": {"b": 1}}
    assert extract_json('```json\n{"x": [1, 2]}\n```') == {"x": [1, 2]}
    assert extract_json('{bad} then {"ok": true}') == {"ok": True}
    for bad in ("", "[1, 2]", "{'single': 'quotes'}"):
        with pytest.raises(ValueError, match="JSON object|empty"):
            extract_json(bad)


# ---------------------------------------------------------------------------------------------- LLM (HTTP)
class FakeOpenAI(BaseHTTPRequestHandler):
    """POST /v1/chat/completions: replies by stage (see REPLIES); records requests on the server."""

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, dict(self.headers), body))
        if self.path != "/v1/chat/completions":
            self.send_error(404)
            return
        prompt = body["messages"][-1]["content"]
        stage = next(s for s in REPLIES if f"STAGE: {s}" in prompt)
        content = json.dumps(REPLIES[stage])
        payload = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_server():
    server = HTTPServer(("127.0.0.1", 0), FakeOpenAI)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_llm_creator_against_a_fake_openai_compatible_server(fake_server):
    url = f"http://127.0.0.1:{fake_server.server_address[1]}"
    creator = make_creator("llm", endpoint=url, model="tiny-test", api_key="k-123")
    assert isinstance(creator, LLMCreator)
    bundle = creator.create(make_heat_reservoir(), VersionRegistry(), step=1)
    assert bundle.operations[0].name == "heat_before_put"
    assert len(fake_server.requests) == 3
    path, headers, body = fake_server.requests[0]
    assert path == "/v1/chat/completions" and body["model"] == "tiny-test"
    assert body["messages"][0]["role"] == "user" and headers["Authorization"] == "Bearer k-123"
    assert openai_generate(url + "/v1")("STAGE: author") == json.dumps(AUTHOR)  # a /v1 base URL works too


def test_the_llm_creator_pre_test_check_through_the_fake_server(fake_server):
    from sage_agents.models import build_tokenizer

    url = f"http://127.0.0.1:{fake_server.server_address[1]}"
    words = "When Examples Go to the microwave and heat it before you put it anywhere after take object"
    tokenizer = build_tokenizer([words])  # the words of the fake reply and of the text layout
    creator = make_creator("llm", endpoint=url, retries=1, tokenizer=tokenizer)
    bundle = creator.create(make_heat_reservoir(), VersionRegistry(), step=1)
    assert bundle.operations[0].name == "heat_before_put" and creator.rejections == []  # every word known
    strict = make_creator("llm", endpoint=url, retries=1, tokenizer=build_tokenizer(include_alfworld=False))
    assert strict.create(make_heat_reservoir(), VersionRegistry(), step=2) is None  # "anywhere" is unknown
    [rejection] = strict.rejections
    assert rejection["skill"] == "heat_before_put" and "'anywhere'" in rejection["reason"]
    resent = fake_server.requests[-1][2]["messages"][0]["content"]  # the reason went back to the model
    assert "REJECTED" in resent and "tokenizer does not know" in resent


def test_llm_creator_with_an_unreachable_endpoint_gives_up():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    creator = LLMCreator(openai_generate(f"http://127.0.0.1:{port}", timeout=2), retries=1)
    assert creator.create(make_heat_reservoir(), VersionRegistry(), step=1) is None
    assert "generator failed" in creator.last_error


def test_make_creator_errors():
    with pytest.raises(ValueError, match="endpoint"):
        make_creator("llm")
    with pytest.raises(ValueError, match="'rule' or 'llm'"):
        make_creator("gpt")


# ---------------------------------------------------------------------------------------------- LLM (local HF)
def test_hf_generate_from_a_local_folder(tiny, tmp_path):
    model, tokenizer = tiny
    model.save_pretrained(tmp_path / "m")
    tokenizer.save_pretrained(tmp_path / "m")
    generate = hf_generate(str(tmp_path / "m"), max_new_tokens=8)
    assert isinstance(generate("go to the fridge"), str)
    creator = LLMCreator(generate, retries=1)  # an untrained model writes no JSON: the creator gives up cleanly
    assert creator.create(make_heat_reservoir(), VersionRegistry(), step=0) is None
    assert creator.last_error.startswith("diagnose: gave up after 2 attempts")
