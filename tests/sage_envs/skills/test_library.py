"""Tests of Skill and SkillLibrary: validation, versioning, rendering, serialisation."""

from __future__ import annotations

import json
import re

import pytest

from sage_envs.error import InvalidConfigError, SkillError, SkillLimitError, UnknownSkillError
from sage_envs.skills import Skill, SkillLibrary, parse_definition

HEAT = (
    "skill heat_then_place(obj, place):\n"
    "    # Heat obj and put it on place.\n"
    "    heat {obj}\n"
    "    move {obj} to {place}\n"
)


def program(text: str = HEAT, **changes) -> Skill:
    skill = parse_definition(text)[0]
    for key, value in changes.items():
        setattr(skill, key, value)
    return skill


def tip(name="look_first", text="Look around before acting.", **kwargs) -> Skill:
    return Skill(name, "guidance", description=f"{name} tip", text=text, **kwargs)


def test_skill_fields_and_signature():
    skill = program()
    assert skill.signature == "heat_then_place(obj, place)"
    assert skill.description == "Heat obj and put it on place."
    assert tip().signature == "look_first"
    assert Skill("f", "program", params=["a"]).params == ("a",)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"name": "Bad"}, "invalid skill name"),
        ({"name": "heat-it"}, "underscores, not hyphens"),
        ({"name": "a" * 65}, "invalid skill name"),
        ({"name": "a__b"}, "double underscore"),
        ({"name": "ab_"}, "trailing underscore"),
        ({"kind": "macro"}, "kind='macro'"),
        ({"description": "d" * 1025}, "description has 1025 characters"),
        ({"text": "t" * 2001}, "text has 2001 characters"),
        ({"trigger": "sometimes"}, "trigger='sometimes'"),
        ({"trigger": "action_pattern"}, "needs a non-empty pattern"),
        ({"trigger": "action_pattern", "pattern": "go to ("}, "not a valid regex"),
        ({"trigger": "action_pattern", "pattern": "x" * 201}, "the limit is 200"),
        ({"trigger": "action_pattern", "pattern": "(a+)+$"}, "catastrophic backtracking"),
        ({"trigger": "action_pattern", "pattern": "(a|aa)*b"}, "repeats an alternation"),
        ({"trigger": "action_pattern", "pattern": r"\w*\w*\w*x"}, "3 variable repeats"),
        (
            {"trigger": "action_pattern", "pattern": "(ab|cd|ef|gh|ij)(kl|mn|op|qr)"},
            "combines 20 alternatives",
        ),
        ({"version": 0}, "versions start at 1"),
        ({"version": True}, "version=True"),
        ({"uses": -1}, "uses=-1"),
        ({"created_in_task": "0"}, "created_in_task='0'"),
        ({"status": "Active!"}, "status='Active!'"),
        ({"provenance": {"creator": 3}}, "provenance"),
        ({"provenance": {"bad key": "x"}}, "provenance key"),
        ({"params": ("a",)}, "no params or source"),
    ],
)
def test_skill_validation(kwargs, message):
    fields = {"name": "look_first", "kind": "guidance", "text": "Look."} | kwargs
    with pytest.raises(SkillError, match=re.escape(message)):
        Skill(**fields)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("name", "../x", "invalid skill name '../x'"),
        ("name", "a/b", "invalid skill name"),
        ("kind", "macro", "kind='macro'"),
        ("text", "t" * 2001, "text has 2001 characters"),
        ("trigger", "action_pattern", "needs a non-empty pattern"),
        ("pattern", "(a+)+$", "catastrophic backtracking"),
        ("params", ("a",), "no params or source"),
        ("uses", -1, "uses=-1"),
        ("uses", 1.5, "uses=1.5"),
        ("version", 0, "versions start at 1"),
        ("created_in_task", "0", "created_in_task='0'"),
        ("provenance", {"bad key": "x"}, "provenance key"),
    ],
)
def test_assigning_a_field_revalidates_and_leaves_the_skill_unchanged(field, value, message):
    skill = tip(provenance={"creator": "sage"})
    before = skill.to_dict()
    with pytest.raises(SkillError, match=re.escape(f"cannot set {field}=") + ".*" + re.escape(message)):
        setattr(skill, field, value)
    assert skill.to_dict() == before


def test_valid_assignments_pass_and_params_lists_become_tuples():
    skill = Skill("f", "program")
    skill.params = ["a", "b"]
    skill.name, skill.uses, skill.description = "g", 3, "d"
    assert (skill.params, skill.name, skill.uses, skill.signature) == (("a", "b"), "g", 3, "g(a, b)")
    guidance = tip()
    guidance.pattern = r"^open\b"  # a pattern alone is fine; trigger then pattern-driven
    guidance.trigger = "action_pattern"
    assert guidance.triggered(1, "open fridge 1")


def test_program_skill_rejects_guidance_fields():
    with pytest.raises(SkillError, match="no text, trigger or pattern"):
        Skill("f", "program", text="hello")


def test_triggers():
    general = tip("always")
    beginning = tip("start", trigger="beginning")
    pattern = tip("after_open", trigger="action_pattern", pattern=r"^open \w+")
    assert general.triggered(0, None) and general.triggered(7, "look")
    assert beginning.triggered(0, None) and not beginning.triggered(1, "look")
    assert pattern.triggered(3, "open drawer 1") and not pattern.triggered(3, "go to open drawer")
    assert not pattern.triggered(0, None)
    assert not program().triggered(0, None)


def test_versioning_history_and_provenance():
    lib = SkillLibrary()
    first = lib.add(program(created_in_task=0, created_in_chain=3, provenance={"creator": "sage"}))
    assert first.version == 1 and lib.get("heat_then_place") is first
    changed = HEAT.replace("heat {obj}", "heat {obj} with microwave 1")
    second = lib.add(program(changed, created_in_task=1, created_in_chain=3))
    assert second.version == 2 and lib.get("heat_then_place").source == second.source
    assert [s.version for s in lib.history("heat_then_place")] == [1, 2]
    assert lib.history("heat_then_place")[0].provenance == {"creator": "sage"}
    assert lib.history("heat_then_place")[0].created_in_task == 0
    assert len(lib) == 1 and lib.names() == ["heat_then_place"]


def test_add_stores_a_copy():
    skill = program(provenance={"a": "b"})
    stored = SkillLibrary().add(skill)
    skill.provenance["a"] = "changed"
    assert stored is not skill and stored.provenance == {"a": "b"}


def test_new_name_keeps_given_version():
    assert SkillLibrary().add(program(version=5)).version == 5


def test_max_size_counts_names_not_versions():
    lib = SkillLibrary(max_size=2)
    lib.add(tip("a"))
    lib.add(tip("b"))
    lib.add(tip("b", text="again"))
    assert len(lib) == 2 and lib.get("b").version == 2
    with pytest.raises(SkillLimitError, match="full \\(2 skills\\)"):
        lib.add(tip("c"))
    with pytest.raises(InvalidConfigError):
        SkillLibrary(max_size=0)


def test_get_remove_unknown_with_suggestion():
    lib = SkillLibrary([program(), tip()])
    with pytest.raises(UnknownSkillError, match="Did you mean 'heat_then_place'"):
        lib.get("heat_then_plce")
    removed = lib.remove("look_first")
    assert removed.name == "look_first" and "look_first" not in lib
    with pytest.raises(UnknownSkillError):
        lib.remove("look_first")
    with pytest.raises(UnknownSkillError):
        lib.history("nothing")
    assert isinstance(UnknownSkillError("x"), KeyError)


def test_record_use_and_iteration_order():
    lib = SkillLibrary([tip("b"), program(), tip("a", status="testing")])
    lib.record_use("heat_then_place")
    lib.record_use("heat_then_place")
    assert lib.get("heat_then_place").uses == 2
    lib.add(tip("b", text="v2"))
    assert [s.name for s in lib] == ["b", "heat_then_place", "a"]
    assert lib.get("b").uses == 0
    assert [s.name for s in lib.programs()] == ["heat_then_place"]
    assert [s.name for s in lib.guidance()] == ["b"]
    assert [s.name for s in lib.guidance("testing")] == ["a"]
    assert [s.name for s in lib.guidance(None)] == ["b", "a"]


def test_render():
    lib = SkillLibrary(
        [
            program(),
            program("skill look_twice():\n    look\n    look\n"),
            tip("always", text="Check the task.\nThen act."),
            tip("start", text="Plan first.", trigger="beginning"),
            tip("after_open", text="Take what you need.", trigger="action_pattern", pattern="^open "),
            tip("candidate", text="Not yet live.", status="testing"),
        ]
    )
    assert lib.render(turn=0, last_action=None) == (
        "Program skills (call NAME(args)):\n"
        "- heat_then_place(obj, place): Heat obj and put it on place.\n"
        "- look_twice()\n"
        "\n"
        "Guidance:\n"
        "- always: Check the task.\n"
        "  Then act.\n"
        "- start: Plan first."
    )
    later = lib.render(turn=2, last_action="open drawer 1", kinds=("guidance",))
    assert later == "Guidance:\n- always: Check the task.\n  Then act.\n- after_open: Take what you need."
    assert lib.render(turn=2, last_action="look", kinds=("program",)).startswith("Program skills")
    assert lib.render(turn=0, last_action=None, kinds=()) == ""
    assert SkillLibrary().render(turn=0, last_action=None) == ""
    assert lib.render(turn=1, last_action="x") == lib.render(turn=1, last_action="x")


def test_dict_round_trip_with_history():
    lib = SkillLibrary(max_size=10)
    lib.add(program(created_in_task=0, created_in_chain=1, provenance={"creator": "sage", "step": "4"}))
    lib.add(program(HEAT.replace("heat {obj}", "heat {obj} twice"), created_in_task=1, created_in_chain=1))
    lib.add(tip("after_open", trigger="action_pattern", pattern="^open ", status="testing"))
    lib.record_use("heat_then_place")
    data = json.loads(json.dumps(lib.to_dict()))
    again = SkillLibrary.from_dict(data)
    assert again == lib and again.max_size == 10
    assert [s.version for s in again.history("heat_then_place")] == [1, 2]
    assert again.get("heat_then_place").uses == 1
    assert Skill.from_dict(lib.get("after_open").to_dict()) == lib.get("after_open")


def test_copy_is_deep():
    lib = SkillLibrary([program()])
    clone = lib.copy()
    assert clone == lib
    clone.record_use("heat_then_place")
    clone.add(tip())
    assert lib.get("heat_then_place").uses == 0 and "look_first" not in lib and clone != lib


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(extra=1), "unknown skill field"),
        (lambda d: d.pop("kind"), "lacks"),
        (lambda d: d.update(source="skill other(obj, place):\n    x\n"), "expected exactly"),
        (lambda d: d.update(source="skill heat_then_place(obj):\n    x\n"), "expected exactly"),
        (lambda d: d.update(source="skill heat_then_place(obj, place)\n    x\n"), "missing ':'"),
        (lambda d: d.update(name="Heat"), "invalid skill name"),
    ],
)
def test_skill_from_dict_validates(mutate, message):
    data = program().to_dict()
    mutate(data)
    with pytest.raises(SkillError, match=message):
        Skill.from_dict(data)


def test_library_from_dict_validates():
    good = SkillLibrary([program(), tip()]).to_dict()
    with pytest.raises(SkillError, match="'skills' list"):
        SkillLibrary.from_dict({"max_size": 3})
    bad = json.loads(json.dumps(good))
    bad["skills"][0]["versions"].append(bad["skills"][0]["versions"][0])
    with pytest.raises(SkillError, match="strictly increasing"):
        SkillLibrary.from_dict(bad)
    bad = json.loads(json.dumps(good))
    bad["skills"][1]["name"] = "heat_then_place"
    with pytest.raises(SkillError, match="repeated or holds versions of another name"):
        SkillLibrary.from_dict(bad)
    bad = json.loads(json.dumps(good))
    bad["max_size"] = 1
    with pytest.raises(SkillLimitError):
        SkillLibrary.from_dict(bad)


def test_save_load_round_trip(tmp_path):
    lib = SkillLibrary(max_size=8)
    lib.add(program(created_in_task=0, created_in_chain=2, provenance={"creator": "sage", "task_id": "a/b"}))
    lib.add(program(HEAT.replace("heat {obj}", "heat {obj} well"), created_in_task=1, created_in_chain=2))
    lib.record_use("heat_then_place")
    lib.add(tip("after_open", trigger="action_pattern", pattern=r"^open \w+", provenance={"creator": "reskill"}))
    lib.add(tip("multi_line", text="## When to Use\nAlways.\n\n## Action\nLook: then act."))
    lib.save(tmp_path / "lib")
    assert sorted(p.name for p in (tmp_path / "lib").iterdir()) == [
        "after-open",
        "heat-then-place",
        "multi-line",
    ]
    loaded = SkillLibrary.load(tmp_path / "lib", max_size=8)
    # Only the latest version is saved, in folder-name order.
    expected = SkillLibrary(max_size=8)
    for name in sorted(lib.names()):
        expected.add(lib.get(name))
    assert loaded == expected
    assert loaded.get("heat_then_place").version == 2 and loaded.get("heat_then_place").uses == 1
    lib.save(tmp_path / "lib")  # overwriting is fine
    assert SkillLibrary.load(tmp_path / "lib", max_size=8) == expected
