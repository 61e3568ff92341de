"""Tests of the skill program language: parser errors, interpreter semantics and every limit."""

from __future__ import annotations

import builtins
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sage_envs.error import InvalidConfigError, SkillError, SkillLimitError, SkillSyntaxError
from sage_envs.skills import Limits, SkillLibrary, parse_call, parse_definition, run_call, run_calls
from sage_envs.skills.dsl import TEXT_CHARS_PER_STATEMENT, CallResult

FIND = """skill find_and_take(obj, place):
    # Search every receptacle for obj and take it.
    for r in receptacles:
        go to {r}
        open {r}
        for o in objects:
            if "{obj} " in "{o} ":
                take {o} from {r}
                return
        close {r}
    call other_skill({obj}, countertop 1)
"""


class FakeWorld:
    """Records commands; feedback comes from a dict (default "Nothing happens."); `win` ends the task."""

    def __init__(self, feedback=None, win=None, entities=None):
        self.feedback = feedback or {}
        self.win = win
        self.commands: list[str] = []
        self.entities_calls = 0
        self.collections = entities or {}

    def execute(self, command):
        self.commands.append(command)
        return self.feedback.get(command, "Nothing happens."), command == self.win

    def entities(self):
        self.entities_calls += 1
        return self.collections


def library(*sources: str) -> SkillLibrary:
    lib = SkillLibrary()
    for source in sources:
        lib.add(parse_definition(source)[0])
    return lib


def run(lib, name, args, world, limits=None):
    limits = limits or Limits()
    return run_call(lib, name, args, execute=world.execute, entities=world.entities, limits=limits)


# ---------------------------------------------------------------- parsing
def test_parse_every_construct():
    skill, calls = parse_definition(FIND + "call find_and_take(apple 1, countertop 1)\ncall other_skill()\n")
    assert skill.name == "find_and_take" and skill.kind == "program"
    assert skill.params == ("obj", "place")
    assert skill.signature == "find_and_take(obj, place)"
    assert skill.description == "Search every receptacle for obj and take it."
    assert skill.source == FIND.rstrip("\n")
    assert calls == [("find_and_take", ["apple 1", "countertop 1"]), ("other_skill", [])]


def test_parse_if_else_break_comments_and_blank_lines():
    text = (
        "\n\nskill probe(x):\n"
        "    look\n"
        "\n"
        "    # a comment in the middle is not part of the description\n"
        '    if "dark" not in observation:\n'
        "        examine {x}\n"
        "    else:\n"
        "        for r in receptacles:\n"
        '            if "{x}" in "{r}":\n'
        "                break\n"
        "            go to {r}\n"
        "  # comments may sit at any indentation\n"
        "    return\n"
    )
    skill, calls = parse_definition(text)
    assert skill.description == "" and calls == []
    assert skill.source.startswith("skill probe(x):") and skill.source.endswith("return")


def test_parse_is_deterministic_and_reparses_its_own_source():
    skill, _ = parse_definition(FIND)
    again, _ = parse_definition(skill.source)
    assert again == skill


@pytest.mark.parametrize(
    "line, expected",
    [
        ("call f(a, b)", ("f", ["a", "b"])),
        ("call f()", ("f", [])),
        (
            "  call   heat_then_place( apple 1 ,countertop 1 )  ",
            ("heat_then_place", ["apple 1", "countertop 1"]),
        ),
        ("call f(x (1), {y})", ("f", ["x (1)", "{y}"])),
    ],
)
def test_parse_call(line, expected):
    assert parse_call(line) == expected


@pytest.mark.parametrize(
    "line, message",
    [
        ("call f", "parentheses"),
        ("call f(a", "end with ')'"),
        ("call f(a) now", "end with ')'"),
        ("call f(a,,b)", "empty item"),
        ("call f(a,)", "empty item"),
        ("call Heat(a)", "invalid skill name"),
        ("call heat-it(a)", "underscores, not hyphens"),
        ("call f__g(a)", "double underscore"),
        ("go to desk 1", "expected 'call NAME(arg, arg)'"),
        ("call f(a)\ncall g()", "one line"),
    ],
)
def test_parse_call_errors(line, message):
    with pytest.raises(SkillSyntaxError, match=re.escape(message)):
        parse_call(line)


@pytest.mark.parametrize(
    "text, message",
    [
        ("skill f(x)\n    look\n", r"line 1: missing ':'"),
        ("skill f(x):\n    for r in receptacles\n        look\n", r"line 2: missing ':'"),
        ('skill f(x):\n    if "a" in observation\n        look\n', r"line 2: missing ':'"),
        ("skill f(x):\n    look\n      look\n", r"line 3: unexpected indent"),
        (
            "skill f(x):\n    for r in receptacles:\n        look\n      look\n",
            r"line 4: unindent does not match",
        ),
        ("skill f(x):\n        look\n    look\n", r"line 3: unindent does not match"),
        ("skill f(x):\n\tlook\n", r"line 2: indent with spaces only"),
        ("skill f(x):\n    go to {y}\n", r"line 2: unknown placeholder \{y\}"),
        ("skill f(obj):\n    go to {ob}\n", r"Did you mean 'obj'"),
        (
            "skill f(x):\n    for r in receptacles:\n        look\n    go to {r}\n",
            r"line 4: unknown placeholder \{r\}",
        ),
        ("skill f(x):\n    go to {x\n", r"unmatched"),
        ("skill f(x):\n    go to x}\n", r"unmatched"),
        ("skill f(x):\n    call g(a,,b)\n", r"line 2: empty item"),
        ("skill f(x):\n    call g\n", r"line 2: a call needs parentheses"),
        ("skill f(x):\n    call g({z})\n", r"unknown placeholder \{z\}"),
        ("skill f(x):\n    for r in receptacles:\n", r"line 2: expected an indented block"),
        (
            "skill f(x):\n    if x in observation:\n        look\n",
            r"line 2: expected 'if \"TEXT\" in observation:'",
        ),
        ('skill f(x):\n    if "a" in obs:\n        look\n', r"expected 'if"),
        ("skill f(x):\n    else:\n        look\n", r"line 2: 'else' without a matching 'if'"),
        (
            'skill f(x):\n    if "a" in observation:\n        look\n    else look\n',
            r"line 4: expected 'else:'",
        ),
        ("skill f(x):\n    break\n", r"line 2: 'break' outside a for loop"),
        ("skill f(x):\n    return now\n", r"'return' takes nothing"),
        ("skill f(x):\n    while 1:\n        look\n", r"'while' is not part of the skill language"),
        ("skill f(x):\n    elif x:\n        look\n", r"'elif' is not part of"),
        ("skill f(x):\n    do something:\n", r"unknown block"),
        ("skill f(x):\n    for r in receptacles:\n        for r in objects:\n            look\n", r"shadows"),
        ("skill f(x):\n    for x in receptacles:\n        look\n", r"shadows"),
        ("skill f(x):\n    for 1r in receptacles:\n        look\n", r"must be an identifier"),
        ("skill f(x):\n    # only a comment\n", r"at least one statement"),
        ("skill f(x):\n", r"at least one statement"),
        ("skill f(x):\n    look\ngo to desk 1\n", r"line 3: after the skill body only"),
        ("skill f(x):\n    look\nskill g():\n    look\n", r"line 3: after the skill body only"),
        ("  skill f(x):\n    look\n", r"line 1: the 'skill NAME\(params\):' line must not be indented"),
        ("look\n", r"line 1: a definition starts with"),
        ("skill f:\n    look\n", r"expected 'skill NAME\(param, param\):'"),
        ("skill Find(x):\n    look\n", r"invalid skill name"),
        ("skill find-it(x):\n    look\n", r"underscores, not hyphens: write 'find_it'"),
        ("skill f(x, x):\n    look\n", r"repeated"),
        ("skill f(1x):\n    look\n", r"must be an identifier"),
        ("skill f(x):\n    skill g():\n        look\n", r"'skill' is not part"),
        ("", r"empty definition"),
    ],
)
def test_parse_errors_name_line_and_reason(text, message):
    with pytest.raises(SkillSyntaxError, match=message):
        parse_definition(text)


def test_parse_limits():
    limits = Limits(max_program_lines=5, max_program_chars=200)
    ok = "skill f():\n" + "    look\n" * 4
    assert parse_definition(ok, limits)[0].name == "f"
    with pytest.raises(SkillLimitError, match="6 lines; the limit is 5"):
        parse_definition(ok + "    look\n", limits)
    with pytest.raises(SkillLimitError, match="characters; the limit is 200"):
        parse_definition("skill f():\n    " + "x" * 200 + "\n", limits)
    with pytest.raises(SkillLimitError, match="description comment"):
        parse_definition("skill f():\n    # " + "d" * 1100 + "\n    look\n", Limits(max_program_chars=2000))
    deep = (
        "skill f():\n"
        + "".join("    " * (i + 1) + f"for v{i} in objects:\n" for i in range(9))
        + "    " * 10
        + "look\n"
    )
    with pytest.raises(SkillLimitError, match="nest deeper"):
        parse_definition(deep)


def test_limits_validate():
    with pytest.raises(InvalidConfigError, match="max_call_depth=0"):
        Limits(max_call_depth=0)
    with pytest.raises(InvalidConfigError, match="at most 16"):
        Limits(max_call_depth=100)
    for bad in (0, -1, 1.5, True, None):
        with pytest.raises(InvalidConfigError, match=f"max_statements_per_turn={bad!r}"):
            Limits(max_statements_per_turn=bad)


def test_no_eval_exec_or_compile(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("program text reached eval/exec/compile")

    for name in ("eval", "exec", "compile", "__import__"):
        monkeypatch.setattr(builtins, name, forbidden)
    text = "skill f(x):\n    __import__('os').system('echo {x}')\n"
    skill, _ = parse_definition(text)
    world = FakeWorld()
    result = run(library(text), "f", ["hi"], world)
    assert world.commands == ["__import__('os').system('echo hi')"] and result.error is None
    assert skill.name == "f"


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_raises_only_skill_errors(text):
    for candidate in (text, "skill f(x):\n" + text, "skill f(x):\n    " + text):
        try:
            parse_definition(candidate)
        except SkillError:
            pass
    try:
        parse_call(text)
    except SkillError:
        pass
    try:
        parse_call("call " + text)
    except SkillError:
        pass


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "skill f(x):",
                "    look",
                "        go to {x}",
                "    for r in objects:",
                '    if "a" in observation:',
                "    else:",
                "        break",
                "    return",
                "call f(a)",
                "    call f({r})",
                "  # c",
                "",
                "\t",
                "{",
                "    }",
            ]
        ),
        max_size=12,
    )
)
def test_line_soup_raises_only_skill_errors(lines):
    try:
        parse_definition("\n".join(lines))
    except SkillError:
        pass


# ---------------------------------------------------------------- interpreter
def test_substitution_loops_if_and_return():
    other = "skill other_skill(o, p):\n    put {o} in/on {p}\n"
    world = FakeWorld(entities={"receptacles": ["drawer 1", "shelf 2"], "objects": ["apple 10", "apple 1"]})
    result = run(library(FIND, other), "find_and_take", ["apple 1", "countertop 1"], world)
    assert result.error is None and not result.done
    # "apple 1 " is not in "apple 10 ": the trailing space in the test avoids the prefix match.
    assert world.commands == ["go to drawer 1", "open drawer 1", "take apple 1 from drawer 1"]
    assert result.trace == [(c, "Nothing happens.") for c in world.commands]
    assert result.primitive_steps == 3 and result.skills_called == ["find_and_take"]


def test_collection_resolved_at_each_loop_start_and_nested_calls():
    world = FakeWorld(entities={"receptacles": [], "objects": ["pen 1"]})
    other = "skill other_skill(o, p):\n    put {o} in/on {p}\n"
    result = run(library(FIND, other), "find_and_take", ["apple 1", "countertop 1"], world)
    assert world.commands == ["put apple 1 in/on countertop 1"]
    assert result.skills_called == ["find_and_take", "other_skill"]
    assert world.entities_calls == 1


def test_if_on_observation_else_and_break():
    text = (
        "skill search(x):\n"
        "    for r in receptacles:\n"
        "        go to {r}\n"
        '        if "{x}" in observation:\n'
        "            take {x} from {r}\n"
        "            break\n"
        "        else:\n"
        "            note nothing at {r}\n"
        '    if "You pick" not in observation:\n'
        "        give up\n"
        "    done searching\n"
    )
    feedback = {
        "go to shelf 2": "On the shelf 2, you see a key 1.",
        "take key 1 from shelf 2": "You pick up key 1.",
    }
    world = FakeWorld(feedback, entities={"receptacles": ["desk 1", "shelf 2", "bed 1"]})
    result = run(library(text), "search", ["key 1"], world)
    assert world.commands == [
        "go to desk 1",
        "note nothing at desk 1",
        "go to shelf 2",
        "take key 1 from shelf 2",
        "done searching",
    ]
    assert result.error is None
    world = FakeWorld(entities={"receptacles": ["desk 1"]})
    run(library(text), "search", ["key 1"], world)
    assert world.commands == ["go to desk 1", "note nothing at desk 1", "give up", "done searching"]


def test_observation_is_empty_before_any_command():
    text = 'skill f():\n    if "" in observation:\n        first\n    if "x" in observation:\n        never\n'
    world = FakeWorld()
    run(library(text), "f", [], world)
    assert world.commands == ["first"]


def test_observation_carries_over_from_nested_call():
    inner = "skill inner():\n    look\n"
    outer = 'skill outer():\n    call inner()\n    if "dark" in observation:\n        turn on lamp\n'
    world = FakeWorld({"look": "It is dark."})
    result = run(library(inner, outer), "outer", [], world)
    assert world.commands == ["look", "turn on lamp"] and result.skills_called == ["outer", "inner"]


def test_return_leaves_only_the_current_skill():
    inner = "skill inner():\n    a\n    return\n    never\n"
    outer = "skill outer():\n    call inner()\n    b\n    call inner()\n"
    world = FakeWorld()
    result = run(library(inner, outer), "outer", [], world)
    assert world.commands == ["a", "b", "a"]
    assert result.skills_called == ["outer", "inner", "inner"]


def test_args_substituted_through_nested_calls():
    inner = "skill inner(what, where):\n    move {what} to {where}\n"
    outer = "skill outer(obj):\n    call inner({obj}, the {obj} place)\n"
    world = FakeWorld()
    run(library(inner, outer), "outer", ["mug 1"], world)
    assert world.commands == ["move mug 1 to the mug 1 place"]


def test_done_stops_immediately():
    text = "skill f():\n    a\n    win\n    c\n"
    world = FakeWorld(win="win")
    result = run(library(text), "f", [], world)
    assert world.commands == ["a", "win"] and result.done and result.error is None
    nested = "skill g():\n    call f()\n    after\n"
    world = FakeWorld(win="win")
    result = run(library(text, nested), "g", [], world)
    assert world.commands == ["a", "win"] and result.done and result.error is None


def test_step_limit():
    text = "skill f():\n" + "    step\n" * 5
    world = FakeWorld()
    result = run(library(text), "f", [], world, Limits(max_primitive_steps_per_call=3))
    assert result.primitive_steps == 3 and len(result.trace) == 3 and world.commands == ["step"] * 3
    assert "primitive step limit reached (3 per turn" in result.error and "line 5" in result.error
    assert not result.done
    exact = run(library(text), "f", [], FakeWorld(), Limits(max_primitive_steps_per_call=5))
    assert exact.error is None and exact.primitive_steps == 5


def test_step_limit_counts_nested_calls():
    inner = "skill inner():\n    a\n    b\n"
    outer = "skill outer():\n    call inner()\n    call inner()\n"
    result = run(library(inner, outer), "outer", [], FakeWorld(), Limits(max_primitive_steps_per_call=3))
    assert result.primitive_steps == 3 and "step limit" in result.error


def test_self_recursion_stops_at_depth_limit():
    text = "skill loop(x):\n    ping {x}\n    call loop({x})\n"
    world = FakeWorld()
    result = run(library(text), "loop", ["a"], world, Limits(max_call_depth=4))
    assert world.commands == ["ping a"] * 4
    assert result.skills_called == ["loop"] * 4
    assert "call depth limit (4)" in result.error and "recursive" in result.error


def test_depth_limit_on_a_chain_of_calls():
    sources = [f"skill s{i}():\n    at {i}\n    call s{i + 1}()\n" for i in range(5)] + ["skill s5():\n    end\n"]
    lib = library(*sources)
    result = run(lib, "s0", [], FakeWorld(), Limits(max_call_depth=6))
    assert result.error is None and result.skills_called == [f"s{i}" for i in range(6)]
    result = run(lib, "s0", [], FakeWorld(), Limits(max_call_depth=5))
    assert "'s5' would exceed the call depth limit (5)" in result.error
    assert result.primitive_steps == 5


def test_loop_iteration_limit_counts_nested_loops():
    text = (
        "skill f():\n"
        "    for r in receptacles:\n"
        "        for o in objects:\n"
        '            if "z" in "{o}":\n'
        "                hit\n"
    )
    world = FakeWorld(entities={"receptacles": ["r1", "r2", "r3"], "objects": ["o1", "o2", "o3"]})
    # 3 outer + 9 inner iterations = 12.
    assert run(library(text), "f", [], world, Limits(max_loop_iterations=12)).error is None
    result = run(library(text), "f", [], world, Limits(max_loop_iterations=11))
    assert "loop iteration limit reached (11 per turn" in result.error
    assert world.commands == []


def test_unknown_collection():
    text = "skill f():\n    look\n    for r in receptacle:\n        go to {r}\n"
    world = FakeWorld(entities={"receptacles": ["desk 1"], "objects": []})
    result = run(library(text), "f", [], world)
    assert "line 3: unknown collection 'receptacle'" in result.error
    assert "Did you mean 'receptacles'?" in result.error
    assert result.trace == [("look", "Nothing happens.")]


def test_unknown_skill_suggests_and_keeps_trace():
    text = "skill f():\n    look\n    call heat_thing(x)\n"
    lib = library(text, "skill heat_things(x):\n    heat {x}\n")
    result = run(lib, "f", [], FakeWorld())
    assert "unknown skill 'heat_thing'" in result.error and "Did you mean 'heat_things'?" in result.error
    assert result.trace == [("look", "Nothing happens.")] and result.skills_called == ["f"]
    top = run(lib, "heat_thngs", ["x"], FakeWorld())
    assert "Did you mean 'heat_things'?" in top.error and top.skills_called == [] and top.trace == []


def test_wrong_argument_count():
    lib = library("skill put(obj, place):\n    move {obj} to {place}\n")
    result = run(lib, "put", ["apple 1"], FakeWorld())
    assert "put(obj, place) takes 2 argument(s), got 1" in result.error
    assert result.skills_called == [] and result.trace == []
    nested = library("skill put(obj, place):\n    x\n", "skill g():\n    call put(a, b, c)\n")
    assert "takes 2 argument(s), got 3" in run(nested, "g", [], FakeWorld()).error


def test_guidance_skill_cannot_be_called():
    from sage_envs.skills import Skill

    lib = SkillLibrary([Skill("tip", "guidance", text="Look first.")])
    assert "guidance skill" in run(lib, "tip", [], FakeWorld()).error


def test_latest_version_is_called_and_library_untouched():
    lib = library("skill f():\n    old\n", "skill f():\n    new\n")
    world = FakeWorld()
    result = run(lib, "f", [], world)
    assert world.commands == ["new"] and lib.get("f").version == 2
    assert lib.get("f").uses == 0 and result.skills_called == ["f"]


def test_substitution_growth_is_capped():
    # Each level quadruples the argument: without the cap this grows without bound.
    sources = [f"skill g{i}(a):\n    call g{i + 1}({{a}}{{a}}{{a}}{{a}})\n" for i in range(3)]
    sources.append("skill g3(a):\n    say {a}\n")
    result = run(library(*sources), "g0", ["x" * 200], FakeWorld(), Limits(max_call_depth=8))
    assert "substituted text exceeds 4000 characters" in result.error


def test_deterministic_results():
    world_a = FakeWorld(entities={"receptacles": ["a", "b"], "objects": ["c"]})
    world_b = FakeWorld(entities={"receptacles": ["a", "b"], "objects": ["c"]})
    lib = library(FIND, "skill other_skill(o, p):\n    put {o} in/on {p}\n")
    assert run(lib, "find_and_take", ["c", "d"], world_a) == run(lib, "find_and_take", ["c", "d"], world_b)
    assert isinstance(run(lib, "find_and_take", ["c", "d"], world_a), CallResult)


def turn(lib, calls, world, limits=None, pending=None):
    limits = limits or Limits()
    return run_calls(lib, calls, execute=world.execute, entities=world.entities, limits=limits, pending=pending)


def statements_of(skill: str, calls) -> int:
    """Count statements the naive way: every executed statement of the (loop- and branch-free) bodies, plus calls."""
    bodies = {}
    for source in skill:
        header, *lines = source.strip().splitlines()
        bodies[header.split()[1].split("(")[0]] = [line.strip() for line in lines]

    def run_body(name):
        total = 0
        for line in bodies[name]:
            total += 1
            if line.startswith("call "):
                total += run_body(line.split()[1].split("(")[0])
        return total

    return sum(1 + run_body(name) for name, _ in calls)


def test_one_budget_for_all_calls_of_a_turn():
    text = "skill f():\n    a\n    b\n"
    world = FakeWorld()
    limits = Limits(max_primitive_steps_per_call=5)
    result = turn(library(text), [("f", [])] * 3, world, limits)
    assert world.commands == ["a", "b", "a", "b", "a"] and result.primitive_steps == 5
    assert "primitive step limit reached (5 per turn" in result.error and result.skills_called == ["f"] * 3
    each = [run(library(text), "f", [], FakeWorld(), limits) for _ in range(3)]
    assert all(r.error is None and r.primitive_steps == 2 for r in each)  # one call per turn fits


def test_loop_iterations_are_shared_by_the_calls_of_a_turn():
    text = "skill f():\n    for r in receptacles:\n        hit {r}\n"
    world = FakeWorld(entities={"receptacles": ["r1", "r2", "r3"]})
    result = turn(library(text), [("f", [])] * 2, world, Limits(max_loop_iterations=5))
    assert world.commands == ["hit r1", "hit r2", "hit r3", "hit r1", "hit r2"]
    assert "loop iteration limit reached (5 per turn" in result.error


def test_statements_count_every_statement_call_and_call_line():
    sources = ("skill leaf():\n    a\n    return\n", "skill mid():\n    call leaf()\n    b\n    call leaf()\n")
    calls = [("mid", []), ("leaf", [])]
    expected = statements_of(sources, calls)  # (1 + 3 + 2 * 2) + (1 + 2) = 11
    assert expected == 11
    result = turn(library(*sources), calls, FakeWorld(), Limits(max_statements_per_turn=expected))
    assert result.error is None and result.statements == expected
    world = FakeWorld()
    result = turn(library(*sources), calls, world, Limits(max_statements_per_turn=expected - 1))
    assert "statement limit reached (10 per turn" in result.error and "skill 'leaf' line 3" in result.error
    assert world.commands == ["a", "b", "a", "a"] and result.primitive_steps == 4  # the trace is kept


def test_statement_limit_stops_calls_without_primitives():
    # The attack: fan-out over a skill of if tests runs no primitive, so only statements bound it.
    ifs = "skill ifs():\n" + '    if "x" in observation:\n        never\n' * 5
    fans = [f"skill f{k}():\n" + f"    call {'ifs' if k == 0 else f'f{k - 1}'}()\n" * 50 for k in range(3)]
    result = run(library(ifs, *fans), "f2", [], FakeWorld())
    assert result.statements == Limits().max_statements_per_turn and "statement limit reached" in result.error
    assert result.primitive_steps == 0


def test_call_lines_count_against_the_statement_budget():
    result = turn(library("skill f():\n    return\n"), [("f", [])] * 3, FakeWorld(), Limits(max_statements_per_turn=4))
    assert "call line 3 (f): statement limit reached" in result.error and result.skills_called == ["f", "f"]


def test_long_texts_cost_one_statement_per_thousand_characters():
    text = 'skill f(x):\n    if "{x}" in "{x}{x}":\n        hit\n'
    arg = "a" * (TEXT_CHARS_PER_STATEMENT + 1)  # needle costs 1 more, haystack (2 * 1001 chars) 2 more
    result = turn(library(text), [("f", [arg])], FakeWorld(), Limits(max_statements_per_turn=100))
    assert result.error is None and result.statements == 1 + 1 + 1 + 2 + 1  # call line, if, needle, haystack, hit
    short = turn(library(text), [("f", ["a"])], FakeWorld())
    assert short.statements == 1 + 1 + 1  # call line, if, hit
    world = FakeWorld(feedback={"look": "o" * 2500})
    observed = 'skill g():\n    look\n    if "z" in observation:\n        hit\n'
    assert turn(library(observed), [("g", [])], world).statements == 1 + 1 + 1 + 2  # 2500 chars searched: 2 more


def test_pending_definition_is_called_instead_of_the_library_version():
    lib = library("skill f():\n    old\n")
    pending, _ = parse_definition("skill f():\n    new\n")
    world = FakeWorld()
    result = turn(lib, [("f", [])], world, pending=pending)
    assert world.commands == ["new"] and result.error is None and lib.get("f").source == "skill f():\n    old"
    missing = turn(SkillLibrary(), [("g", [])], FakeWorld(), pending=pending)
    assert "unknown skill 'g' (known: f)" in missing.error


def test_collections_are_read_again_only_after_a_primitive():
    text = (
        "skill f():\n    for r in receptacles:\n        break\n    for r in receptacles:\n        break\n"
        "    act\n    for r in receptacles:\n        break\n"
    )
    world = FakeWorld(entities={"receptacles": ["r1"]})
    assert turn(library(text), [("f", []), ("f", [])], world).error is None
    assert world.entities_calls == 3  # once before the first act, once after it, once after the second act
