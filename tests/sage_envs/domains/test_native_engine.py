"""Differential tests: the native ALFWorld engine against TextWorld's PDDL engine, step by step.

Both engines play the same game with the same commands; any difference in the opening text, a feedback text,
``won``, the admissible commands (order included) or the entities fails with the game, the step, the command
and both texts. Walks (several per game, a reset between them):

* random walks: seeded, mixing admissible commands (biased away from "go to" so that objects move) with
  invalid ones (wrong numbers, unknown verbs, padding, empty);
* scripted walkthroughs: fetch, transform (clean/heat/cool/lamp) and deliver, read off the native engine's
  facts; they must win on both engines;
* planner walkthroughs: fast-downward's plan from the reference engine (``AlfworldGame.expert_plan``), slow,
  so one game in the default run and every game in the slow run.

Games: generated ones of all six task types (from the wheel's scene layouts, in a temp folder) and the
official json_2.1.1 games (``$ALFWORLD_DATA`` or ``../shared/alfworld``; skipped when absent). The default run
takes one official game per task type; ``pytest -m slow`` covers every usable valid_seen and valid_train game.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from sage_envs.domains.alfworld.grammar import Context, Entity, Grammar, World, parse_symbols
from sage_envs.domains.alfworld.native_engine import NativeAlfworldGame, demangled_names
from sage_envs.domains.alfworld.pddl import FactStore, GoalChecker, PddlDomain, PddlProblem

DATA_DIR = Path(os.environ.get("ALFWORLD_DATA") or Path(__file__).resolve().parents[3].parent / "shared" / "alfworld")
OFFICIAL_SPLITS = ("valid_seen", "valid_train")
OFFICIAL_SAMPLE = 6
INVALID_COMMANDS = ("help", "look around", "go to nowhere 1", "take all", "inventory ", "  look", "", "xyzzy")


# ------------------------------------------------------------------------------------------------------------
# The comparison
# ------------------------------------------------------------------------------------------------------------


class Divergence(AssertionError):
    """The two engines disagree."""


def _reference(game_path: Path):
    textworld_engine = pytest.importorskip("sage_envs.domains.alfworld.textworld_engine")
    return textworld_engine.AlfworldGame(game_path)


def _check(game: Path, step: int, command: str, what: str, expected, actual) -> None:
    if expected != actual:
        raise Divergence(
            f"{game}\nstep {step}, command {command!r}: {what} differs\n"
            f"--- TextWorld:\n{expected!r}\n--- native:\n{actual!r}"
        )


def random_policy(seed: int) -> Callable[[list[str]], str]:
    """A seeded walk: 15% invalid commands, otherwise admissible ones, preferring anything but "go to"."""
    rng = random.Random(seed)

    def choose(admissible: list[str]) -> str:
        roll = rng.random()
        if roll < 0.08:
            return rng.choice(INVALID_COMMANDS)
        if roll < 0.15:  # a well-formed command about the wrong object: "take apple 7 from fridge 1"
            words = rng.choice(admissible).split()
            words[-1] = str(rng.randint(1, 12)) if words[-1].isdigit() else words[-1] + "s"
            return " ".join(words)
        others = [c for c in admissible if not c.startswith("go to ")]
        if others and roll < 0.65:
            return rng.choice(others)
        return rng.choice(admissible)

    return choose


Walk = Callable[[list[str]], str] | list[str]
"""A policy over the admissible commands, or a fixed list of commands: episodes are ``(walk, steps[, win])``."""


def compare(
    game_path: Path, *episodes: tuple[Walk, int] | tuple[Walk, int, bool], must_win: bool = False
) -> list[dict]:
    """Play each ``(walk, steps)`` episode on both engines (a reset before each); raise on any divergence.

    A fixed walk must win when ``must_win`` is set, or when its episode says so: ``(walk, steps, True)``.

    Checked: opening text, description, and per step the admissible commands (before and after), the entities,
    the feedback and ``won``. Returns ``{"steps": n, "won": bool}`` per episode (the reference engine's won).
    """
    reference = _reference(game_path)
    native = NativeAlfworldGame(game_path)
    results = []
    try:
        for walk, steps, *win in episodes:
            _check(game_path, 0, "<reset>", "opening text", reference.reset(), native.reset())
            _check(game_path, 0, "<reset>", "description", reference.description, native.description)
            commands = walk if isinstance(walk, list) else None
            won, n = False, 0
            for n in range(1, min(steps, len(commands)) + 1 if commands is not None else steps + 1):
                admissible = reference.admissible_commands()
                _check(game_path, n, "<before>", "admissible commands", admissible, native.admissible_commands())
                _check(game_path, n, "<before>", "entities", dict(reference.entities()), dict(native.entities()))
                command = commands[n - 1] if commands is not None else walk(admissible)
                expected, actual = reference.step(command), native.step(command)
                _check(game_path, n, command, "feedback", expected.observation, actual.observation)
                _check(game_path, n, command, "won", expected.won, actual.won)
                won = expected.won
            _check(
                game_path,
                n,
                "<end>",
                "admissible commands",
                reference.admissible_commands(),
                native.admissible_commands(),
            )
            if (win[0] if win else must_win) and commands is not None:
                assert won, f"{game_path}: the walkthrough {commands} did not win"
            results.append({"steps": n, "won": won})
        return results
    finally:
        reference.close()


def planner_walkthrough(game_path: Path) -> list[str]:
    """The reference engine's fast-downward plan from the start (0.1-20 s per game)."""
    reference = _reference(game_path)
    try:
        reference.reset()
        return reference.expert_plan()
    finally:
        reference.close()


def scripted_walkthrough(game_path: Path) -> list[str]:
    """A walkthrough read off the native engine's facts (privileged): fetch, transform, deliver.

    It follows the goal's atoms (object type, receptacle type, isclean/ishot/iscool, a lamp to switch on, a
    second object of the same type), picks each command among the admissible ones by its operator, and checks
    that it wins. Cheap enough for the default run, unlike the fast-downward planner.
    """
    game = NativeAlfworldGame(game_path)
    game.reset()
    compiled, facts = game.compiled, game.facts
    goal = json.dumps(compiled.goal.goal)
    target = next(t for t in re.findall(r'"objecttype", "\?\w+", "(\w+)"', goal) if t != "desklamptype")
    goal_types = set(re.findall(r'"receptacletype", "\?\w+", "(\w+)"', goal))
    change = next(
        (
            a
            for p, a in (("isclean", "cleanobject"), ("ishot", "heatobject"), ("iscool", "coolobject"))
            if f'"{p}"' in goal
        ),
        None,
    )
    lamp = '"istoggled"' in goal
    count = 2 if '"="' in goal else 1
    commands: list[str] = []

    def do(action: str, test: Callable[[tuple], bool], required: bool = True) -> None:
        for command, (name, args) in sorted(game._current_operators().items()):
            if name == action and test(args):
                commands.append(command)
                game.step(command)
                return
        assert not required, f"{game_path}: no admissible {action} after {commands}"

    def of_type(entity: str, type_name: str) -> bool:
        return facts.has("objecttype", (entity, type_name))

    def receptacle_of_type(types) -> str:
        return next(r for r, ts in sorted(compiled.receptacle_types.items()) if set(ts) & set(types))

    def goto(receptacle: str) -> None:  # not admissible (nor needed) when already there
        do("gotolocation", lambda args: args[3] == receptacle, required=False)

    delivered: set[str] = set()
    for _ in range(count):
        obj, source = min(
            (o, r)
            for o, r in facts.of("inreceptacle")
            if of_type(o, target) and o not in delivered and o in compiled.unary["pickupable"]
        )
        goto(source)
        do("openobject", lambda args, r=source: args[2] == r, required=False)
        do("pickupobject", lambda args, o=obj, r=source: args[2:] == (o, r))
        if change:
            goto(receptacle_of_type(compiled.appliances[change]))
            do(change, lambda args, o=obj: args[3] == o)
        if lamp:
            lamp_id, host = min((o, r) for o, r in facts.of("inreceptacle") if of_type(o, "desklamptype"))
            goto(host)
            do("toggleobject", lambda args, o=lamp_id: args[2] == o)
            break
        destination = receptacle_of_type(goal_types)
        goto(destination)
        do("openobject", lambda args, r=destination: args[2] == r, required=False)
        do("putobject", lambda args, o=obj, r=destination: args[2:4] == (o, r))
        delivered.add(obj)
    assert game.won, f"{game_path}: scripted walkthrough {commands} did not win"
    return commands


def rare_actions_walkthrough(game_path: Path) -> list[str]:
    """Commands random walks seldom reach, read off the native facts: slice with a knife, then examine a held
    receptacle-object that has something in it ("This is a normal mug 1. In it, you see ...")."""
    game = NativeAlfworldGame(game_path)
    game.reset()
    compiled, facts = game.compiled, game.facts
    commands: list[str] = []

    def do(action: str, test: Callable[[tuple], bool]) -> bool:
        for command, (name, args) in sorted(game._current_operators().items()):
            if name == action and test(args):
                commands.append(command)
                game.step(command)
                return True
        return False

    def fetch(obj: str) -> None:
        source = min(r for _, r in facts.with_arg("inreceptacle", 0, obj))
        do("gotolocation", lambda args: args[3] == source)
        do("openobject", lambda args: args[2] == source)
        do("pickupobject", lambda args: args[2:] == (obj, source))
        do("examineobject", lambda args: True)

    knives = sorted(k for k in compiled.knives if facts.with_arg("inreceptacle", 0, k))
    if knives:
        fetch(knives[0])
        for receptacle in sorted(compiled.receptacle_location):
            do("gotolocation", lambda args, r=receptacle: args[3] == r)
            if do("sliceobject", lambda args: True):
                do("look", lambda args: True)
                break
        do("putobject", lambda args: True)
    outer = sorted(o for _, o in facts.of("inreceptacleobject") if facts.with_arg("inreceptacle", 0, o))
    if outer:
        fetch(outer[0])
        do("inventory", lambda args: True)
    return commands


# ------------------------------------------------------------------------------------------------------------
# Games
# ------------------------------------------------------------------------------------------------------------


def official_games(split: str) -> list[Path]:
    from sage_envs.domains.alfworld.official import official_games as listing

    if not (DATA_DIR / "json_2.1.1" / split).is_dir():
        return []
    return [folder / "game.tw-pddl" for folder in listing(DATA_DIR, split)]


def _sample(games: list[Path], count: int) -> list[Path]:
    """``count`` games, one per task type in turn (task type = the folder name up to its first "-")."""
    by_type: dict[str, list[Path]] = {}
    for game in games:
        by_type.setdefault(game.parent.parent.name.split("-")[0], []).append(game)
    groups = [by_type[t] for t in sorted(by_type)]
    return [groups[i % len(groups)][(7 * i) % len(groups[i % len(groups)])] for i in range(count)]


def generate_games(folder: Path, per_type: int, seed: int = 0) -> list[Path]:
    """Games of all six task types built from the wheel's scene layouts (the wheel's domain and grammar)."""
    np = pytest.importorskip("numpy")
    scenes = pytest.importorskip("sage_envs.domains.alfworld.scenes")
    rng = np.random.default_rng(seed)
    domain, grammar = scenes.PDDL_DOMAIN_PATH.read_text(), scenes.GRAMMAR_PATH.read_text()
    paths = []
    for task_type in scenes.TASK_TYPES:
        made = 0
        for scene_name in scenes.ALL_SCENES[int(rng.integers(7)) :: 7]:
            tasks = [t for t in scenes.valid_tasks(scene_name) if t.task_type == task_type]
            if not tasks:
                continue
            params = tasks[int(rng.integers(len(tasks)))]
            household = scenes.sample_household(scenes.load_scene(scene_name), params, rng)
            name = f"{params.name}-{scene_name}"
            game = {
                "pddl_domain": domain,
                "grammar": grammar.replace("UNKNOWN GOAL", params.sentence(0)),
                "pddl_problem": scenes.problem_pddl(household, params, name),
                "solvable": True,
            }
            path = folder / name / "game.tw-pddl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(game))
            paths.append(path)
            made += 1
            if made == per_type:
                break
    return paths


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> list[Path]:
    return generate_games(tmp_path_factory.mktemp("generated_games"), per_type=1)


def _official_or_skip(count: int | None) -> list[Path]:
    games = [g for split in OFFICIAL_SPLITS for g in official_games(split)]
    if not games:
        pytest.skip(f"official ALFWorld games not found under {DATA_DIR} (set $ALFWORLD_DATA)")
    return games if count is None else _sample(games, count)


# ------------------------------------------------------------------------------------------------------------
# Differential tests
# ------------------------------------------------------------------------------------------------------------


def test_generated_games_cover_all_task_types(generated):
    assert len(generated) == 6


@pytest.mark.parametrize("index", range(6))
def test_generated_game(generated, index):
    """One game per task type (wheel grammar: "move X to Y", help): a walkthrough, + a random walk for one."""
    episodes = [(scripted_walkthrough(generated[index]), 30)]
    if index == 5:  # kitchens are slow on TextWorld: one random walk here, the official games have more
        episodes.insert(0, (random_policy(seed=index), 8))
    compare(generated[index], *episodes, must_win=True)


@pytest.mark.official
@pytest.mark.parametrize("index", range(OFFICIAL_SAMPLE))
def test_official_game(index):
    """Official games, one per task type: a 16-step random walk, then a walkthrough."""
    game = _official_or_skip(OFFICIAL_SAMPLE)[index]
    compare(game, (random_policy(seed=100 + index), 16), (scripted_walkthrough(game), 30), must_win=True)


@pytest.mark.official
def test_official_rare_actions():
    """Slicing, and examining a held receptacle-object with contents, on the first official game having both."""
    for game in _official_or_skip(None):
        native = NativeAlfworldGame(game)
        native.reset()
        if native.compiled.knives and native.facts.of("inreceptacleobject"):
            break
    commands = rare_actions_walkthrough(game)
    assert any(c.startswith("slice ") for c in commands), commands
    compare(game, (commands, len(commands)))


@pytest.mark.official
def test_official_planner_walkthrough():
    """The fast-downward planner's walkthrough (AlfworldGame.expert_plan) on a small bedroom game."""
    game = _official_or_skip(OFFICIAL_SAMPLE)[0]
    plan = planner_walkthrough(game)
    compare(game, (plan, len(plan)), must_win=True)


@pytest.mark.slow
@pytest.mark.official
def test_all_official_games():
    """Every usable valid_seen + valid_train game: 60 random steps, scripted, rare-action and planner walks."""
    failures = []
    for number, game in enumerate(_official_or_skip(None)):
        try:
            plan = planner_walkthrough(game)
            rare = rare_actions_walkthrough(game)
            compare(
                game,
                (random_policy(seed=number), 60),
                (scripted_walkthrough(game), 30, True),
                (rare, len(rare)),
                (plan, len(plan), True),
            )
        except AssertionError as error:  # Divergence included
            failures.append(f"{game}: {error}")
    assert not failures, f"{len(failures)} games fail:\n\n" + "\n\n".join(failures[:5])


@pytest.mark.slow
def test_generated_games_all_walks(tmp_path):
    """Five generated games per task type: 40 random steps, the scripted and the rare-action walks."""
    failures = []
    for number, game in enumerate(generate_games(tmp_path, per_type=5, seed=1)):
        try:
            rare = rare_actions_walkthrough(game)
            compare(
                game,
                (random_policy(seed=1000 + number), 40),
                (scripted_walkthrough(game), 40, True),
                (rare, len(rare)),
            )
        except AssertionError as error:  # Divergence included
            failures.append(f"{game}: {error}")
    assert not failures, f"{len(failures)} games fail:\n\n" + "\n\n".join(failures[:5])


# ------------------------------------------------------------------------------------------------------------
# Unit tests of the pieces (no reference engine needed)
# ------------------------------------------------------------------------------------------------------------


def test_demangled_names_number_from_the_highest_down():
    ids = [
        "agent1",
        "cabinet_bar__plus_01",
        "cabinet_bar__minus_02",
        "sink_bar_00_bar_sinkbasin",
        "apple_bar_1",
    ]
    names = demangled_names(ids)
    # "_minus_" sorts before "_plus_": the first id in sorted order takes the highest number.
    assert names["cabinet_bar__minus_02"] == "cabinet 2"
    assert names["cabinet_bar__plus_01"] == "cabinet 1"
    assert names["sink_bar_00_bar_sinkbasin"] == "sinkbasin 1"
    assert names["apple_bar_1"] == "apple 1"
    assert names["agent1"] == "agent1 "  # no number, the space stays


def test_symbol_parser_reproduces_tatsu_quirks():
    grammar = Grammar({}, {})
    world = World(FactStore(), {}, lambda a, b: True)
    # Leading whitespace is eaten (TatSu's end-of-line comment rule); the rest, newlines included, is kept.
    assert grammar.render(parse_symbols("\n  Available:\n  look\n"), world, Context()) == "Available:\n  look\n"
    # Parsing stops silently at a stray brace.
    assert grammar.render(parse_symbols("a (b)} c"), world, Context()) == "a (b)"


def test_lists_and_conditions_follow_textworld_order():
    text = '''
    grammar :: """
    {
        "list_separator": [{"rhs": ", "}],
        "list_last_separator": [{"rhs": ", and "}],
        "list_empty": [{"rhs": "nothing"}],
        "see": [
            {"condition": "openable(r:receptacle) & not_opened(r:receptacle)", "rhs": "closed"},
            {"rhs": "[{o.indefinite + ' ' + o.name | inreceptacle(o:object, r:receptacle)}]"}
        ]
    }
    """;
    action look { template :: "look"; feedback :: "#see#"; }
    '''
    grammar = Grammar.parse(text)
    entities = {
        i: Entity(i, n, t)
        for i, n, t in [
            ("b", "bowl 1", "object"),
            ("a", "apple 2", "object"),
            ("c", "cup 1", "object"),
            ("r", "shelf 1", "receptacle"),
        ]
    }
    facts = FactStore([("inreceptacle", ("b", "r")), ("inreceptacle", ("a", "r")), ("inreceptacle", ("c", "r"))])
    world = World(facts, entities, lambda sub, sup: sup == "object" or sub == sup)
    context = Context({("r", "receptacle"): "r"}, {"r": entities["r"]})
    feedback = grammar.actions["look"].feedback
    assert grammar.render(feedback, world, context) == "a apple 2, a bowl 1, and a cup 1"  # sorted by id
    facts.add("openable", ("r",))
    facts.add("not_opened", ("r",))
    assert grammar.render(feedback, world, context) == "closed"


def test_goal_checker_handles_nested_exists_and_inequality():
    domain = PddlDomain.parse("(define (domain d) (:types agent receptacle object))")
    problem = PddlProblem.parse(
        """(define (problem p) (:domain d)
        (:objects o1 o2 - object r - receptacle AppleType - object)
        (:init (objectType o1 AppleType) (objectType o2 AppleType) (inReceptacle o1 r))
        (:goal (exists (?r - receptacle) (exists (?a - object)
            (and (objectType ?a AppleType) (inReceptacle ?a ?r)
                 (exists (?b - object)
                    (and (not (= ?a ?b)) (objectType ?b AppleType) (inReceptacle ?b ?r))))))))"""
    )
    check = GoalChecker(problem.goal, problem.objects, domain)
    facts = FactStore(problem.init)
    assert not check(facts)
    facts.add("inreceptacle", ("o2", "r"))
    assert check(facts)


def test_native_game_basics(generated):
    game = NativeAlfworldGame(generated[0])
    with pytest.raises(RuntimeError):
        game.step("look")
    opening = game.reset()
    assert opening.startswith("-= Welcome to TextWorld, ALFRED! =-")
    assert game.description and game.description in opening
    assert game.step("xyzzy").observation == "Nothing happens."
    admissible = game.admissible_commands()
    assert admissible == sorted(admissible) and "look" in admissible
    entities = game.entities()
    assert entities["receptacles"] and entities["inventory"] == []
    go = next(c for c in admissible if c.startswith("go to "))
    assert game.step(go).observation.startswith("You arrive at ")
    assert go not in game.admissible_commands()  # already there
    assert game.reset() == opening and game.admissible_commands() == admissible
