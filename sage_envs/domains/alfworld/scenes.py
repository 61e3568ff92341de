"""The 120 AI2-THOR households shipped in the ``alfworld`` wheel, ALFRED's placement rules, PDDL writing.

Everything here is pure and engine-free: it reads ``alfworld/gen/layouts/FloorPlan*-{objects,openable}.json``
and ``-layout.npy``, applies the rules of :mod:`alfworld.gen.constants` and the goals of
:mod:`alfworld.gen.goal_library`, and writes the ``pddl_problem`` text of a game in the form of the official
``json_2.1.1`` games (same predicates, same ``Type|x|y|z`` object ids mangled with ``_bar_``/``_minus_``/...).
:mod:`sage_envs.domains.alfworld.generator` decides *which* tasks to make and checks them on the engine.
"""

from __future__ import annotations

import functools
import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import alfworld
import alfworld.gen.constants as constants
import alfworld.gen.goal_library as goal_library
import numpy as np

from sage_envs.domains.alfworld.official import TASK_TYPES

ALFWORLD_DIR = Path(alfworld.__file__).parent
LAYOUTS_DIR = ALFWORLD_DIR / "gen" / "layouts"
PDDL_DOMAIN_PATH = ALFWORLD_DIR / "data" / "alfred.pddl"
GRAMMAR_PATH = ALFWORLD_DIR / "data" / "alfred.twl2"
OFFICIAL_GRAMMAR_PATH = Path(__file__).parent / "data" / "alfred_official.twl2"
"""The grammar of the official json_2.1.1 games, verbatim but for the goal (``UNKNOWN GOAL``, as in the wheel's)."""
OFFICIAL_PDDL_DOMAIN_PATH = Path(__file__).parent / "data" / "alfred_official.pddl"
"""The PDDL domain of the official json_2.1.1 games, verbatim (no ``help`` action; a Sink cleans as a SinkBasin)."""


@dataclass(frozen=True)
class CommandGrammar:
    """The files a generated game's rules and words come from (its ``pddl_domain`` and ``grammar`` fields)."""

    grammar: Path
    """The twl2 grammar: command templates (:func:`command_templates`) and feedback texts."""
    pddl_domain: Path
    """The PDDL domain the grammar was written for (the grammar names its actions, ``help`` included or not)."""


COMMAND_GRAMMARS = {
    "wheel": CommandGrammar(GRAMMAR_PATH, PDDL_DOMAIN_PATH),
    "official": CommandGrammar(OFFICIAL_GRAMMAR_PATH, OFFICIAL_PDDL_DOMAIN_PATH),
}
"""The command grammars a generated game can speak, by name.

``wheel``: the alfworld wheel's ``alfred.twl2`` and ``alfred.pddl`` ("move X to Y", "You arrive at cabinet 1.",
``help``). ``official``: the files every official game carries ("put X in/on Y", "You arrive at loc 12.", no
``help``), so that generated games read like the benchmark's.
"""

ALL_SCENES = tuple(f"FloorPlan{n}" for numbers in constants.SCENE_TYPE.values() for n in numbers)
"""The 120 shipped layouts: kitchens 1-30, living rooms 201-230, bedrooms 301-330, bathrooms 401-430."""

APPLIANCE = {
    "pick_clean_then_place_in_recep": "SinkBasin",
    "pick_heat_then_place_in_recep": "Microwave",
    "pick_cool_then_place_in_recep": "Fridge",
}
"""The receptacle type each state-change task needs (the domain's Clean/Heat/CoolObject preconditions)."""

ACTION_CLASS = {
    "pick_clean_then_place_in_recep": "Cleanable",
    "pick_heat_then_place_in_recep": "Heatable",
    "pick_cool_then_place_in_recep": "Coolable",
}

LAMP = "DeskLamp"
# The receptacle types that hold a desk lamp in the official games (Desk 14, SideTable 17, Dresser 9, Shelf
# 2). FloorLamp is left out on purpose: ALFRED puts floor lamps in no receptacle, so the domain's ToggleObject
# (which needs `inReceptacle`) can never switch one on; every official FloorLamp game is marked unsolvable.
LAMP_HOSTS = ("Desk", "Dresser", "Shelf", "SideTable")

# ALFRED's rules, without the sliced variants (slicing tasks are out of scope, as in ALFWorld's own loader).
CAN_CONTAIN = {
    rtype: frozenset(o for o in objs if "Sliced" not in o) for rtype, objs in constants.VAL_RECEPTACLE_OBJECTS.items()
}
STATIC_RECEPTACLE_TYPES = frozenset(CAN_CONTAIN) - constants.MOVABLE_RECEPTACLES_SET
PLACEABLE_TYPES = frozenset().union(*CAN_CONTAIN.values())
"""Object types that some receptacle can hold: exactly the ones an agent can pick up and put down."""

# A layout lists receptacle *types* that have no pose in -openable.json (stoves, toasters, towel holders...).
# They get a synthetic pose on a free reachable point; a kitchen has four burners, everything else one
# instance.
SYNTHETIC_COUNT = {"StoveBurner": 4}
SYNTHETIC_HEIGHT = 0.9
MAX_INSTANCES = constants.MAX_NUM_OF_OBJ_INSTANCES
GRID = constants.AGENT_STEP_SIZE


@dataclass(frozen=True)
class Receptacle:
    """A static receptacle of a household."""

    id: str
    """THOR-style id, e.g. ``Cabinet|+00.68|+00.50|-02.20`` or ``Sink|-01.99|+01.14|-00.98|SinkBasin``."""
    rtype: str
    """ALFRED receptacle type, e.g. ``SinkBasin``."""
    location: tuple[int, int, int, int]
    """Where the agent stands to reach it: (x / 0.25, z / 0.25, rotation / 90, horizon), as in ALFRED."""

    @property
    def position(self) -> tuple[float, float, float]:
        """The (x, y, z) coordinates encoded in the id."""
        x, y, z = self.id.split("|")[1:4]
        return float(x), float(y), float(z)


@dataclass(frozen=True)
class Scene:
    """What a layout fixes about a household: its room type, receptacles and the object types it contains."""

    name: str
    """``FloorPlanN``."""
    room: str
    """``Kitchen``, ``LivingRoom``, ``Bedroom`` or ``Bathroom``."""
    receptacles: tuple[Receptacle, ...]
    """All static receptacles, sorted by id."""
    object_types: tuple[str, ...]
    """Pickable object types present in the layout that at least one receptacle here can hold, sorted."""
    has_lamp: bool
    """Whether a desk lamp can stand on one of the receptacles."""
    free_points: tuple[tuple[float, float], ...]
    """Reachable floor points (metres) that no receptacle uses as its standing point."""

    @functools.cached_property
    def receptacle_types(self) -> frozenset[str]:
        """The receptacle types present."""
        return frozenset(r.rtype for r in self.receptacles)

    def holders(self, otype: str, exclude: str = "") -> list[Receptacle]:
        """Receptacles that can hold ``otype`` (lamps: the lamp hosts), leaving out the type ``exclude``."""
        if otype == LAMP:
            return [r for r in self.receptacles if r.rtype in LAMP_HOSTS]
        return [r for r in self.receptacles if otype in CAN_CONTAIN[r.rtype] and r.rtype != exclude]


@dataclass(frozen=True)
class TaskParams:
    """The goal of one task, in ALFRED's ``pddl_params`` terms."""

    task_type: str
    object_target: str
    parent_target: str = ""
    toggle_target: str = ""

    @property
    def name(self) -> str:
        """Official task-folder stem: ``<type>-<object>-None-<parent or lamp>``."""
        return f"{self.task_type}-{self.object_target}-None-{self.parent_target or self.toggle_target}"

    def sentence(self, template: int) -> str:
        """The task sentence from goal_library template ``template`` (0 or 1), as ALFWorld fills it in."""
        text = goal_library.gdict[self.task_type]["templates"][template]
        return text.format(
            obj=self.object_target.lower(),
            recep=self.parent_target.lower(),
            toggle=self.toggle_target.lower(),
            mrecep="",
        )

    def goal_pddl(self) -> str:
        """The ``(:goal ...)`` block (closing the problem's ``define``) from the goal library."""
        text = goal_library.gdict[self.task_type]["pddl"].format(
            obj=self.object_target, recep=self.parent_target, toggle=self.toggle_target, mrecep=""
        )
        return text.replace("#", "-")


def room_type(scene: str) -> str:
    """Room type of ``FloorPlanN`` from ALFRED's scene-number ranges."""
    number = int(scene.removeprefix("FloorPlan"))
    for room, numbers in constants.SCENE_TYPE.items():
        if number in numbers:
            return room
    raise KeyError(scene)


def stable_seed(text: str) -> int:
    """A seed from a string that, unlike ``hash()``, does not change between Python processes."""
    return zlib.crc32(text.encode())


def _location(x: float, z: float, rotation: float, horizon: float) -> tuple[int, int, int, int]:
    return round(x / GRID), round(z / GRID), round(rotation / 90) % 4, round(horizon)


@functools.cache
def load_scene(name: str) -> Scene:
    """Read one shipped layout; receptacles without a pose get a fixed synthetic one (seeded by the name)."""
    object_types = set(json.loads((LAYOUTS_DIR / f"{name}-objects.json").read_text()))
    poses = json.loads((LAYOUTS_DIR / f"{name}-openable.json").read_text())
    points = np.load(LAYOUTS_DIR / f"{name}-layout.npy")

    receptacles = []
    for key, (x, z, rotation, horizon) in poses.items():
        parts = key.split("|")
        rtype = parts[4] if len(parts) == 5 else parts[0]
        if len(parts) == 5:
            # The demangler names a receptacle after the id's prefix (+ "basin"); a few layouts file a sink
            # basin under "Bathtub|...": rename the prefix so "sinkbasin 1" is what the agent reads.
            key = "|".join([rtype.removesuffix("Basin"), *parts[1:]])
        if rtype in STATIC_RECEPTACLE_TYPES:
            receptacles.append(Receptacle(key, rtype, _location(x, z, rotation, horizon)))

    used = {r.location[:2] for r in receptacles}
    free = [(float(x), float(z)) for x, z in points if _location(x, z, 0, 0)[:2] not in used]
    rng = np.random.default_rng(stable_seed(name))
    missing = sorted((object_types & STATIC_RECEPTACLE_TYPES) - {r.rtype for r in receptacles})
    for rtype in missing:
        for _ in range(SYNTHETIC_COUNT.get(rtype, 1)):
            x, z = free.pop(int(rng.integers(len(free))))
            rotation = int(rng.integers(4))
            # The receptacle sits half a metre in front of where the agent stands, facing it.
            dx, dz = [(0, 0.5), (0.5, 0), (0, -0.5), (-0.5, 0)][rotation]
            rid = f"{rtype}|{x + dx:+06.2f}|{SYNTHETIC_HEIGHT:+06.2f}|{z + dz:+06.2f}"
            receptacles.append(Receptacle(rid, rtype, _location(x, z, rotation * 90, 30)))
    receptacles.sort(key=lambda r: r.id)

    types = {r.rtype for r in receptacles}
    placeable = sorted(o for o in object_types & PLACEABLE_TYPES if any(o in CAN_CONTAIN[t] for t in types))
    return Scene(
        name=name,
        room=room_type(name),
        receptacles=tuple(receptacles),
        object_types=tuple(placeable),
        has_lamp=LAMP in object_types and bool(types & set(LAMP_HOSTS)),
        free_points=tuple(free),
    )


@functools.cache
def valid_tasks(name: str) -> tuple[TaskParams, ...]:
    """Every task a household supports, in a fixed order.

    A task is valid when its type is allowed in the room (``constants.GOALS_VALID``), its appliance is present
    (sink basin / microwave / fridge / desk lamp), the object type can be cleaned/heated/cooled as required,
    the goal receptacle can hold it and is not the appliance itself (as in the official games), and the object
    has somewhere else to start, so that no game is won before the first step.
    """
    scene = load_scene(name)
    tasks = []
    for task_type in TASK_TYPES:
        if scene.room not in constants.GOALS_VALID[task_type]:
            continue
        if task_type == "look_at_obj_in_light":
            if scene.has_lamp:
                tasks += [TaskParams(task_type, o, toggle_target=LAMP) for o in scene.object_types]
            continue
        appliance = APPLIANCE.get(task_type, "")
        if appliance and appliance not in scene.receptacle_types:
            continue
        for otype in scene.object_types:
            if task_type in ACTION_CLASS and otype not in constants.VAL_ACTION_OBJECTS[ACTION_CLASS[task_type]]:
                continue
            for parent in sorted(scene.receptacle_types - {appliance}):
                if otype in CAN_CONTAIN[parent] and scene.holders(otype, exclude=parent):
                    tasks.append(TaskParams(task_type, otype, parent))
    return tuple(tasks)


@dataclass(frozen=True)
class PlacedObject:
    """One object instance of a household and the receptacle it starts in."""

    id: str
    otype: str
    receptacle: Receptacle


@dataclass(frozen=True)
class Household:
    """A sampled initial state: a scene, its objects in their receptacles, and where the agent starts."""

    scene: Scene
    objects: tuple[PlacedObject, ...]
    agent_location: tuple[int, int, int, int]


def sample_household(scene: Scene, params: TaskParams, rng: np.random.Generator) -> Household:
    """Put 1-3 instances of each object type of the scene into receptacles that can hold them.

    Follows ALFRED's initialisation (``MAX_NUM_OF_OBJ_INSTANCES`` copies, ``VAL_RECEPTACLE_OBJECTS`` rules).
    The target object never starts in a receptacle of the goal type, a two-object task gets at least two
    targets, a household with a lamp gets exactly one desk lamp on a lamp host, and the agent starts on a free
    point.
    """
    placed: list[PlacedObject] = []
    ids: set[str] = set()
    # A household with a desk lamp always shows it (switchable), whatever the task, so a chain's rooms agree.
    otypes = [*scene.object_types, LAMP] if scene.has_lamp else list(scene.object_types)
    for otype in otypes:
        if otype == LAMP:
            count = 1
        elif otype == params.object_target and params.task_type == "pick_two_obj_and_place":
            count = int(rng.integers(2, MAX_INSTANCES + 1))
        else:
            count = int(rng.integers(1, MAX_INSTANCES + 1))
        exclude = params.parent_target if otype == params.object_target else ""
        holders = scene.holders(otype, exclude=exclude)
        for _ in range(count):
            host = holders[int(rng.integers(len(holders)))]
            x, y, z = host.position
            oid = ""
            while not oid or oid in ids:
                dx, dy, dz = rng.uniform(-0.3, 0.3, size=3)
                oid = f"{otype}|{x + dx:+06.2f}|{y + abs(dy):+06.2f}|{z + dz:+06.2f}"
            ids.add(oid)
            placed.append(PlacedObject(oid, otype, host))
    x, z = scene.free_points[int(rng.integers(len(scene.free_points)))]
    agent = _location(x, z, 90 * int(rng.integers(4)), 30)
    return Household(scene, tuple(placed), agent)


def mangle(name: str) -> str:
    """Turn a THOR id into a PDDL name as ALFWorld did (``|`` -> ``_bar_``, ``-`` -> ``_minus_``, ...)."""
    for old, new in (("-", "_minus_"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        name = name.replace(old, new)
    return name


def _loc(location: tuple[int, int, int, int]) -> str:
    return mangle("loc|" + "|".join(str(v) for v in location))


def problem_pddl(household: Household, params: TaskParams, problem_name: str) -> str:
    """The ``pddl_problem`` text, laid out like the official games' (objects, init facts, then the goal)."""
    scene = household.scene
    objects = sorted(household.objects, key=lambda o: o.id)
    receptacles = scene.receptacles
    otypes = sorted(constants.OBJECTS_SET - STATIC_RECEPTACLE_TYPES)
    present_otypes = sorted({o.otype for o in objects})
    locations = sorted({r.location for r in receptacles} | {household.agent_location})

    declarations = ["agent1 - agent"]
    declarations += [f"{t}Type - otype" for t in otypes]
    declarations += [f"{t}Type - rtype" for t in sorted(STATIC_RECEPTACLE_TYPES)]
    declarations += [f"{mangle(o.id)} - object" for o in objects]
    declarations += [f"{mangle(r.id)} - receptacle" for r in receptacles]
    declarations += [f"{_loc(loc)} - location" for loc in locations]

    facts = [f"(receptacleType {mangle(r.id)} {r.rtype}Type)" for r in receptacles]
    facts += [f"(objectType {mangle(o.id)} {o.otype}Type)" for o in objects]
    facts += [
        f"(canContain {rtype}Type {otype}Type)"
        for rtype in sorted(scene.receptacle_types)
        for otype in present_otypes
        if otype in CAN_CONTAIN[rtype]
    ]
    facts += [f"(pickupable {mangle(o.id)})" for o in objects if o.otype in PLACEABLE_TYPES]
    facts += [f"(isReceptacleObject {mangle(o.id)})" for o in objects if o.otype in constants.MOVABLE_RECEPTACLES_SET]
    facts += [f"(openable {mangle(r.id)})" for r in receptacles if r.rtype in constants.OPENABLE_CLASS_SET]
    facts.append(f"(atLocation agent1 {_loc(household.agent_location)})")
    for predicate, action_class in (
        ("cleanable", "Cleanable"),
        ("heatable", "Heatable"),
        ("coolable", "Coolable"),
        ("sliceable", "Sliceable"),
        ("toggleable", "Toggleable"),
    ):
        members = constants.VAL_ACTION_OBJECTS[action_class]
        facts += [f"({predicate} {mangle(o.id)})" for o in objects if o.otype in members]
    facts += [f"(inReceptacle {mangle(o.id)} {mangle(o.receptacle.id)})" for o in objects]
    facts += [f"(receptacleAtLocation {mangle(r.id)} {_loc(r.location)})" for r in receptacles]
    facts += [f"(objectAtLocation {mangle(o.id)} {_loc(o.receptacle.location)})" for o in objects]

    indent = "\n        "
    return (
        f"\n(define (problem {problem_name})\n(:domain alfred)\n(:objects\n"
        + indent.join(declarations)
        + "\n        )\n\n(:init\n        "
        + indent.join(facts)
        + "\n        )\n\n"
        + params.goal_pddl()
    )


def display_names(household: Household) -> dict[str, str]:
    """What the engine calls each object, receptacle and location (``apple 3``): ALFWorld's own Demangler.

    The numbering depends only on the set of ids (the engine lower-cases PDDL names, the Demangler sorts
    them), so it is computed here without starting the engine.
    """
    # Imported here: alfworld.agents.utils.misc pulls in all of TextWorld (~1 s); listing tasks never needs
    # it.
    from alfworld.agents.utils.misc import Demangler

    ids = {o.id for o in household.objects} | {r.id for r in household.scene.receptacles}
    keys = {mangle(i).lower(): i for i in ids}
    demangler = Demangler(game_infos={key: SimpleNamespace(id=key) for key in keys})
    return {thor_id: demangler.demangle_alfred_name(key) for key, thor_id in keys.items()}


def command_templates(grammar: str) -> dict[str, str]:
    """The command template of each action in a twl2 grammar, e.g. ``{"PutObject": "move {o} to {r}"}``.

    Read from the grammar rather than hard-coded: the wheel's grammar says "move X to Y", the official games'
    "put X in/on Y" (:data:`COMMAND_GRAMMARS`). ``GotoLocation``'s template is a listing rule, so it is given the
    form TextWorld's planner uses.
    """
    templates = dict(re.findall(r'action (\w+) \{\s*template :: "([^"]*)";', grammar))
    templates["GotoLocation"] = "go to {r}"
    return templates


def walkthrough(household: Household, params: TaskParams, grammar: str) -> list[str]:
    """A short solution computed from the known initial state (the generator placed every object).

    Take the first target (two for ``pick_two_obj_and_place``; ids sorted), opening its receptacle if needed;
    clean/heat/cool it at the first receptacle of the appliance type; then either put it in the first
    receptacle of the goal type or, for a light task, go to the lamp and switch it on. The engine still has to
    accept every command and report the win: :func:`sage_envs.domains.alfworld.generator.generate_game` checks
    that.
    """
    names = display_names(household)
    templates = command_templates(grammar)
    receptacles = household.scene.receptacles
    commands: list[str] = []
    opened: set[str] = set()
    at: list[tuple[int, int, int, int]] = [household.agent_location]

    def say(action: str, **args: str) -> None:
        commands.append(templates[action].format(**{k: names[v] for k, v in args.items()}))

    def visit(receptacle: Receptacle) -> None:
        if at[0] != receptacle.location:
            say("GotoLocation", r=receptacle.id)
            at[0] = receptacle.location
        if receptacle.rtype in constants.OPENABLE_CLASS_SET and receptacle.id not in opened:
            say("OpenObject", r=receptacle.id)
            opened.add(receptacle.id)

    def first(rtype: str) -> Receptacle:
        return next(r for r in receptacles if r.rtype == rtype)

    targets = sorted((o for o in household.objects if o.otype == params.object_target), key=lambda o: o.id)
    for obj in targets[: 2 if params.task_type == "pick_two_obj_and_place" else 1]:
        visit(obj.receptacle)
        say("PickupObject", o=obj.id, r=obj.receptacle.id)
        if params.task_type in APPLIANCE:
            appliance = first(APPLIANCE[params.task_type])
            # Cleaning, heating and cooling only need the agent at the appliance, not the appliance open.
            if at[0] != appliance.location:
                say("GotoLocation", r=appliance.id)
                at[0] = appliance.location
            action = {"Cleanable": "CleanObject", "Heatable": "HeatObject", "Coolable": "CoolObject"}
            say(action[ACTION_CLASS[params.task_type]], o=obj.id, r=appliance.id)
        if params.toggle_target:
            lamp = next(o for o in household.objects if o.otype == params.toggle_target)
            visit(lamp.receptacle)
            say("ToggleObject", o=lamp.id)
        else:
            parent = first(params.parent_target)
            visit(parent)
            say("PutObject", o=obj.id, r=parent.id)
    return commands
