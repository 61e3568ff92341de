import random
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sage_agents.policy import LLMPolicy, skill_signatures
from sage_agents.skill_grammar import INDENT, SkillGrammar
from sage_envs.domains.alfworld.expert import (
    SKILLS,
    TASK_SKILLS,
    skill_definition,
    skill_definitions,
    variant_definitions,
)
from sage_envs.skills.dsl import parse_call, parse_definition
from tests.sage_agents.test_policy import assert_trained_logprobs_are_the_sampled_ones

TEMPLATES = skill_definitions(grammars=("wheel", "official"))  # both put commands, as the demo's mixed training
GRAMMAR = SkillGrammar.from_definitions(TEMPLATES)
WRITING = SkillGrammar.from_definitions(TEMPLATES + variant_definitions())  # with the whole-task skills' vocabulary
LIBRARY = [("find_and_take", ("obj", "where")), ("heat_then_place", ("obj", "microwave", "place")), ("look", ())]


def walk(grammar: SkillGrammar, rng: random.Random, values=lambda p: [f"{p} 1", p], library=(), commands=None) -> str:
    """A definition + call sampled uniformly at every choice of the grammar's plan (the turn took ``skill``)."""
    plan, text = grammar.plan(values, library, commands), "skill"
    options = next(plan)
    while True:
        option = rng.choice(options)
        text += option.text
        if option.ends:
            return text
        options = plan.send(option.text)


def test_the_vocabulary_is_read_from_the_example_definitions():
    shapes = {"go to {}", "take {} from {}", "put {} in/on {}", "move {} to {}", "heat {} with {}", "use {}"}
    assert shapes <= set(GRAMMAR.command_shapes)
    assert GRAMMAR.collections == ("receptacles", "objects")
    assert {"obj", "where", "place", "microwave"} <= set(GRAMMAR.param_names)
    assert {"find", "take", "place", "then"} <= set(GRAMMAR.name_words)
    assert set(GRAMMAR.observation_tests) == {"Nothing happens", "closed"}
    assert not any("#" in shape or "{" in shape.replace("{}", "") for shape in GRAMMAR.command_shapes)


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False), st.booleans())
def test_every_written_definition_parses_and_its_call_fits_it(rng, with_library):
    library = LIBRARY if with_library else ()
    grammar = WRITING if with_library else GRAMMAR
    text = walk(grammar, rng, library=library)
    definition, call = text.rsplit("\ncall ", 1)
    skill, trailing = parse_definition(definition)
    assert not trailing
    name, args = parse_call(f"call {call}")
    assert name == skill.name and len(args) == len(skill.params) <= grammar.max_params
    assert set(name.split("_")) <= set(grammar.name_words) and len(name.split("_")) <= grammar.max_name_words
    body = definition.split("\n")[1:]
    assert 1 <= len(body) <= grammar.max_body_lines
    depth = max((len(line) - len(line.lstrip(" "))) // len(INDENT) for line in body)
    assert depth <= grammar.max_depth
    for line in body:  # every placeholder names a parameter or a loop variable
        assert set(re.findall(r"\{(\w+)\}", line)) <= {*skill.params, "r", "o", "i"}
        if line.strip().startswith("call "):  # a call of a library skill other than itself, one arg per param
            callee, args = parse_call(line)
            assert callee != skill.name and len(args) == len(dict(library)[callee])
    assert with_library or not any(line.strip().startswith("call ") for line in body)


def test_a_body_calls_the_skills_of_the_library_with_arguments_in_scope():
    rng, calls = random.Random(3), []
    for _ in range(300):
        definition = walk(WRITING, rng, values=lambda p: [f"{p} 1"], library=LIBRARY).rsplit("\ncall ", 1)[0]
        parse_definition(definition)
        calls += [line.strip() for line in definition.split("\n") if line.strip().startswith("call ")]
    assert {parse_call(c)[0] for c in calls} == {"find_and_take", "heat_then_place", "look"}
    assert "call look()" in calls
    args = {a for c in calls for a in parse_call(c)[1]}
    assert {"{obj}", "obj 1", "where 1", "microwave 1"} & args == {"{obj}", "obj 1", "where 1", "microwave 1"}
    assert any(a in ("{i}", "{r}", "{o}") for a in args)  # a loop variable in scope
    assert " find_and_take(" in {o.text for o in _body_call_openings(WRITING, "heat_then_place")}
    assert " heat_then_place(" not in {o.text for o in _body_call_openings(WRITING, "heat_then_place")}


def _body_call_openings(grammar: SkillGrammar, name: str) -> list:
    """The options after ``    call`` in the body of a skill ``name(obj)`` written with :data:`LIBRARY`."""
    plan = grammar.plan(lambda p: [f"{p} 1"], LIBRARY)
    options = next(plan)
    for piece in [f" {w}" if i == 0 else f"_{w}" for i, w in enumerate(name.split("_"))] + ["(", "obj", "):\n"]:
        assert piece in {o.text for o in options}, piece
        options = plan.send(piece)
    assert f"{INDENT}call" in {o.text for o in options}
    return plan.send(f"{INDENT}call")


def test_whole_task_definitions_are_ones_the_grammar_can_write_with_their_sub_skills_in_the_library():
    library = [(n, skill_definition(n).split("(", 1)[1].split(")")[0].split(", ")) for n in SKILLS]
    for name, template in TASK_SKILLS.items():
        params = template.split("(", 1)[1].split(")")[0].split(", ")
        text = f"{template}\ncall {name}({', '.join(f'{p} 1' for p in params)})"
        assert WRITING.accepts(text, library), template
        assert not WRITING.accepts(text)  # its sub-task skills are not in an empty library
        assert not GRAMMAR.accepts(text, library)  # the skills of SKILLS alone never loop over the inventory


def test_ending_the_body_and_another_line_are_two_kinds_that_greedy_weighs_whole():
    """Greedy decoding weighs each group by its options' summed probability (decoding._likeliest): the end of the
    body (its trailing ``call``) against all the line starts together, not against each."""
    rng, ends = random.Random(0), 0
    for _ in range(50):
        plan = GRAMMAR.plan(lambda p: [f"{p} 1"], LIBRARY)
        options = next(plan)
        while not options[0].ends:
            if any(o.text == "call" for o in options) and len(options) > 1:  # alone (no lines left): forced
                ends += 1
                assert {(o.text == "call", o.group) for o in options} == {(True, "end"), (False, "line")}
            options = plan.send(rng.choice(options).text)
    assert ends >= 50  # every body reaches at least one choice to end it


def test_limits_bound_the_body_and_a_block_always_has_a_statement():
    short = SkillGrammar.from_definitions(TEMPLATES, max_body_lines=2, max_depth=2)
    rng = random.Random(0)
    for _ in range(200):
        body = walk(short, rng).rsplit("\ncall ", 1)[0].split("\n")[1:]
        assert 1 <= len(body) <= 2
        assert not body[-1].strip().startswith(("for ", "if "))  # an opener is never the last line
        assert all(len(line) - len(line.lstrip(" ")) <= 2 * len(INDENT) for line in body)


def test_written_definitions_keep_the_tokens_of_their_whole_text(tiny):
    _, tok = tiny
    rng = random.Random(1)
    for _ in range(50):  # the pieces split before spaces: their tokens are those SFT trains on the whole text
        plan, pieces = WRITING.plan(lambda p: [f"{p} 1"], LIBRARY), ["skill"]
        options = next(plan)
        while True:
            option = rng.choice(options)
            pieces.append(option.text)
            if option.ends:
                break
            options = plan.send(option.text)
        encode = lambda text: tok(text, add_special_tokens=False).input_ids  # noqa: E731
        assert [t for piece in pieces for t in encode(piece)] == encode("".join(pieces))


def test_a_policy_that_writes_skills_samples_parseable_definitions_with_exact_logprobs():
    from sage_agents.models import build_tiny_model

    model, tok = build_tiny_model(TEMPLATES, hidden=32, layers=2, heads=2, kv_heads=1)  # knows the skill words
    policy = LLMPolicy(model, tok, constrained=True, skill_templates=TEMPLATES, write_skills=True)
    obs = {"task": "put a clean apple in fridge", "observation": "You see a fridge 1 and a sinkbasin 1.", "skills": ""}
    info = {"admissible_commands": ["go to fridge 1", "go to sinkbasin 1", "look"]}
    torch.manual_seed(0)
    outs = policy.act_batch([obs] * 24, [info] * 24, [[]] * 24)
    written = [o for o in outs if o.action.kind == "define"]
    assert written and all(o.text in info["admissible_commands"] for o in outs if o not in written)
    for out in written:
        parse_definition(out.text.rsplit("\ncall ", 1)[0])
    assert_trained_logprobs_are_the_sampled_ones(model, tok, outs)
    assert "writes skill definitions" in policy.given
    # The put line is the one the game has shown: none yet -> the wheel's; after a put command of this task ->
    # the official one (the grammar's alternatives get the turn's admissible list and the task's commands).
    history = [("You arrive at fridge 1.", "put apple 1 in/on fridge 1")]
    later = policy.act_batch([obs] * 48, [info] * 48, [history] * 48)

    def put_verbs(completions) -> set[str]:
        lines = [line.strip() for o in completions if o.action.kind == "define" for line in o.text.splitlines()]
        return {line.split()[0] for line in lines if line.startswith(("move {", "put {"))}

    assert put_verbs(outs) <= {"move"} and put_verbs(later) <= {"put"}
    assert put_verbs(outs) | put_verbs(later) == {"move", "put"}  # the samples hold put lines of both


def test_writing_skills_needs_example_definitions(tiny):
    model, tok = tiny
    with pytest.raises(ValueError, match="skill_templates"):
        LLMPolicy(model, tok, constrained=True, write_skills=True)


def test_the_expert_definitions_are_ones_the_grammar_can_write():
    for template in TEMPLATES:
        header = template.split("\n", 1)[0]
        name, params = header.removeprefix("skill ").split("(")[0], header.split("(")[1].split(")")[0].split(", ")
        call = f"call {name}({', '.join(f'{p} 1' for p in params)})"
        assert GRAMMAR.accepts(f"{template}\n{call}"), template
        assert not GRAMMAR.accepts(f"{template}\n    look\n{call}")  # no `look` in the templates' commands
        assert not GRAMMAR.accepts(f"{template}\ncall {name}()")  # one argument per parameter
    rng = random.Random(2)
    assert all(GRAMMAR.accepts(walk(GRAMMAR, rng)) for _ in range(50))


@pytest.mark.parametrize("shuffle", [True, False])
def test_a_varying_expert_writes_varied_definitions_the_grammar_can_write(shuffle):
    import gymnasium as gym

    import sage_envs  # noqa: F401
    from sage_envs.domains.alfworld import AlfworldExpert

    env = gym.make("SageChain-ALFWorld-v0", split="train", skills="program", max_steps_per_task=30)
    expert, written, solved, tasks = AlfworldExpert(vary_definitions=0, shuffle_parameters=shuffle), [], 0, 0
    for chain in range(12):
        expert.reset()
        obs, info = env.reset(seed=chain, options={"chain": chain})
        while True:
            action = expert.act(obs, info)
            written += [(action, skill_signatures(obs["skills"]))] if action.startswith("skill ") else []
            obs, _, terminated, truncated, info = env.step(action)
            if info["new_task"] or terminated or truncated:
                tasks, solved = tasks + 1, solved + bool(info["task_success"])
            if terminated or truncated:
                break
    env.close()
    assert solved == tasks == 24  # varying names, parameter orders and bodies keeps every task solved
    assert all(WRITING.accepts(text, library) and "#" not in text for text, library in written)
    headers = {text.split("\n", 1)[0] for text, _ in written}
    assert len(headers) > len(SKILLS) and not headers <= {t.split("\n", 1)[0] for t in TEMPLATES}
    bodies = [text.rsplit("\ncall ", 1)[0].split("\n")[1:] for text, _ in written]
    whole = [b for b in bodies if any(line.startswith(f"{INDENT}call ") for line in b)]
    searches = [b for b in bodies if any(" take {o} from " in line for line in b)]
    assert whole  # whole-task skills calling sub-task skills
    assert {any("for r in receptacles:" in line for line in b) for b in searches} == {True, False}  # loop or not
    params = [re.findall(r"\w+", text.split("(", 1)[1].split(")", 1)[0]) for text in headers]
    canonical = [p for p in params if ("obj" not in p or p[0] == "obj") and ("place" not in p or p[-1] == "place")]
    assert (canonical == params) is not shuffle  # unshuffled: the object first and the place last, every time


def test_a_command_whose_verb_is_a_parameter_starts_its_line_with_the_value():
    import sage_envs

    cut = """skill cut(food, how, knife):
    take {knife}
    {how} {food} with {knife}
    drop {knife}"""
    grammar = SkillGrammar.from_definitions([cut])
    assert "{} {} with {}" in grammar.command_shapes
    assert grammar.accepts(f"{cut}\ncall cut(carrot, slice, knife)")
    assert not grammar.accepts(f"{cut.replace(' with ', ' into ')}\ncall cut(carrot, slice, knife)")  # no such shape
    assert not grammar.accepts(f"{cut.replace('{how} {food}', '{how}{food}')}\ncall cut(carrot, slice, knife)")
    rng, lines = random.Random(0), set()
    for _ in range(200):
        text = walk(grammar, rng)
        definition, _ = text.rsplit("\ncall ", 1)
        skill, _ = parse_definition(definition)  # parses, indentation included
        lines |= {line.strip() for line in definition.splitlines()[1:]}
    assert {"{how} {food} with {knife}", "{food} {how} with {knife}"} <= lines  # any parameter may be the verb
    # TextWorld's expert cuts this way (cut_with_knife): the grammar of its templates writes those with parameters
    # (a written skill has at least one: serve_meal() is not one the grammar writes)
    templates = [
        t for forms in sage_envs.domain_class("SageChain-TextWorld-v0").skill_templates().values() for t in forms
    ]
    textworld = SkillGrammar.from_definitions(templates)
    written = 0
    for template in templates:
        header = template.split("\n", 1)[0]
        name, params = header.removeprefix("skill ").split("(")[0], header.split("(")[1].split(")")[0].split(", ")
        if params != [""]:
            assert textworld.accepts(f"{template}\ncall {name}({', '.join(f'{p} 1' for p in params)})"), template
            written += 1
    assert written == len(templates) - 1 >= 2


def test_the_put_line_follows_the_grammar_the_game_has_shown():
    # The forms of one skill in the two grammars differ in their put line only: those lines are alternatives.
    assert GRAMMAR.alternatives == (("move {} to {}", "put {} in/on {}"),)
    wheel, official = skill_definition("place_in", "wheel"), skill_definition("place_in", "official")
    call = "call place_in(apple 1, table 1)"
    assert GRAMMAR.accepts(f"{wheel}\n{call}") and GRAMMAR.accepts(f"{official}\n{call}")  # no game: every shape
    for commands, accepted in [
        ([], wheel),  # nothing shown yet: the first form's put line (the expert's default)
        (["go to table 1", "move apple 1 to table 1"], wheel),
        (["go to table 1", "put apple 1 in/on table 1"], official),
    ]:
        rejected = official if accepted is wheel else wheel
        assert GRAMMAR.accepts(f"{accepted}\n{call}", commands=commands), commands
        assert not GRAMMAR.accepts(f"{rejected}\n{call}", commands=commands), commands
        rng = random.Random(0)
        written = [walk(GRAMMAR, rng, commands=commands) for _ in range(300)]
        lines = [line.strip() for text in written for line in text.splitlines()]
        puts = {line.split()[0] for line in lines if line.startswith(("move {", "put {"))}
        assert puts == {"move" if accepted is wheel else "put"}, commands
    # One form per skill (TextWorld, or one grammar's templates): nothing is an alternative, every shape stays.
    single = SkillGrammar.from_definitions(skill_definitions(grammars=("official",)))
    assert single.alternatives == () and single.shapes_for([]) == single.command_shapes
