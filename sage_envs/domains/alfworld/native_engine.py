"""ALFWorld's text game computed in-process: TextWorld's PDDL engine's exact transcript, ~10^3x faster.

ALFWorld plays a ``game.tw-pddl`` file (PDDL domain + problem + a ``.twl2`` grammar) through TextWorld's
``PddlEnv``: fast-downward grounds the PDDL into operators; every step asks it for the applicable operators,
renders each one's command through the grammar, applies the chosen one and renders its feedback; ALFWorld's
``AlfredDemangler`` names the objects ("apple 1"). :class:`NativeAlfworldGame` reads the same file and
produces the same opening text, the same feedback for every command (valid or not: "Nothing happens."), the
same admissible commands in the same order and the same ``won``, without TextWorld or fast-downward:

* **State.** A :class:`~sage_envs.domains.alfworld.pddl.FactStore` holding the facts TextWorld's
  ``PddlState`` holds: the problem's initial atoms, then each action's effects, where deleting ``p(x)`` also
  records ``not_p(x)`` (TextWorld stores fast-downward's negative effect atoms as facts, and the grammar's
  ``not_inreceptacle`` reads them).
* **Actions.** The ALFRED domain's actions (``alfred.pddl``) are written out below in Python: which ground
  operators fast-downward would find applicable now, and their effects. The domain text is read for what
  varies between its versions: which actions exist (the wheel's copy adds ``help``) and which receptacle
  types clean/heat/cool accept (the official games' copy cleans in ``Sink`` or ``SinkBasin``, the wheel's
  only in ``SinkBasin``). Fast-downward behaviours that change the game are kept:

  - an operator whose effects all cancel is dropped, so "go to X" is not admissible while already at X;
  - ``examineObject``'s receptacle branch quantifies over the type ``location,`` (a comma in the domain's
    variable list makes it a type with no objects), so only held objects can be examined;
  - operators come from grounding, so receptacles sharing a location each get their "go to", and ``look``
    there names them all.
* **Text.** Commands, feedback and the opening text are rendered from the game's own grammar by
  :mod:`sage_envs.domains.alfworld.grammar` (TextWorld's template language, reimplemented), so "put X in/on Y"
  (official games) or "move X to Y" (the wheel's grammar) is whatever the game file says.
* **Names.** ``AlfredDemangler``'s numbering, in :func:`demangled_names`: ids sorted, counted per prefix, and
  numbered from the highest down (the first id in sorted order is "cabinet 6", the last "cabinet 1").
* **Goal.** The problem's ``(:goal ...)`` evaluated on the facts by
  :class:`~sage_envs.domains.alfworld.pddl.GoalChecker`, only after a step that changed a predicate it reads.

Admissible commands are ``sorted(set(...))`` of the applicable operators' commands, as in TextWorld; a
command shared by several operators runs the first (for ALFRED they have the same effects and feedback).
Commands whose template reads only static facts are rendered once per game; the "go to" table of each
location too. Everything static lives in a :class:`CompiledGame` that several games can share.

``tests/sage_envs/domains/test_native_engine.py`` replays random and expert walks on both engines;
``docs/native_engine.md`` has the equivalence figures and ``benchmarks/engine_speed.py`` measures the speed.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from sage_envs.domain import StepResult, TaskGame
from sage_envs.domains.alfworld.grammar import ActionText, Context, Entity, Grammar, World, parse_symbols
from sage_envs.domains.alfworld.official import resolve_game_file
from sage_envs.domains.alfworld.pddl import FactStore, GoalChecker, PddlDomain, PddlProblem

__all__ = ["NativeAlfworldGame", "CompiledGame", "demangled_names"]

NOTHING_HAPPENS = "Nothing happens."
"""TextWorld's feedback for a command that matches no applicable operator."""
TASK_PREFIX = "Your task is to: "
_TASK_RE = re.compile(re.escape(TASK_PREFIX) + r"([^\"\n]*)")
_ROOM_RE = re.compile(r"Looking quickly around you, you see (.*?)\.(?:\n|$)")

# The ALFRED actions this engine implements (fast-downward's lower-cased names) and their parameters as
# declared in alfred.pddl (the names bind the grammar's placeholders). examineobject's extra (?l, ?r) from its
# `exists` never reach fast-downward's operator name, so TextWorld never binds them.
ACTION_PARAMETERS: dict[str, tuple[tuple[str, str], ...]] = {
    "look": (("a", "agent"), ("l", "location")),
    "inventory": (("a", "agent"),),
    "help": (("a", "agent"),),
    "examinereceptacle": (("a", "agent"), ("r", "receptacle")),
    "examineobject": (("a", "agent"), ("o", "object")),
    "gotolocation": (("a", "agent"), ("lstart", "location"), ("lend", "location"), ("r", "receptacle")),
    "openobject": (("a", "agent"), ("l", "location"), ("r", "receptacle")),
    "closeobject": (("a", "agent"), ("l", "location"), ("r", "receptacle")),
    "pickupobject": (("a", "agent"), ("l", "location"), ("o", "object"), ("r", "receptacle")),
    "putobject": (
        ("a", "agent"),
        ("l", "location"),
        ("o", "object"),
        ("r", "receptacle"),
        ("ot", "otype"),
        ("rt", "rtype"),
    ),
    "cleanobject": (("a", "agent"), ("l", "location"), ("r", "receptacle"), ("o", "object")),
    "heatobject": (("a", "agent"), ("l", "location"), ("r", "receptacle"), ("o", "object")),
    "coolobject": (("a", "agent"), ("l", "location"), ("r", "receptacle"), ("o", "object")),
    "toggleobject": (("a", "agent"), ("l", "location"), ("o", "object"), ("r", "receptacle")),
    "sliceobject": (("a", "agent"), ("l", "location"), ("co", "object"), ("ko", "object")),
}

# Predicates some action changes; every other predicate is static. `not_<p>` facts exist only for these.
DYNAMIC_PREDICATES = frozenset(
    {
        "atlocation",
        "checked",
        "opened",
        "inreceptacle",
        "holds",
        "holdsany",
        "objectatlocation",
        "isclean",
        "ishot",
        "iscool",
        "ison",
        "istoggled",
        "issliced",
    }
)
# Deleting these atoms records `not_<p>` exactly as TextWorld does: either the deleting action requires the
# atom (so fast-downward knows it as a variable), or no action deletes it. For the others (objectatlocation,
# ishot, iscool, ison, holdsany) TextWorld records `not_<p>` only when fast-downward's reachability analysis
# kept the atom; no ALFWorld grammar reads those, and a grammar that does is refused, not approximated.
EXACT_NEGATIONS = frozenset(
    {"atlocation", "checked", "opened", "inreceptacle", "holds", "isclean", "istoggled", "issliced"}
)
# The receptacle types the appliance actions accept, when the domain text does not say (alfred.pddl's values).
DEFAULT_APPLIANCES = {
    "cleanobject": ("sinktype", "sinkbasintype"),
    "heatobject": ("microwavetype",),
    "coolobject": ("fridgetype",),
    "sliceobject": ("knifetype", "butterknifetype"),
}

Operator = tuple[str, tuple[str, ...]]
"""A ground operator: (action, arguments in :data:`ACTION_PARAMETERS` order)."""


class UnsupportedGameError(ValueError):
    """The game's domain or grammar uses something this engine does not reproduce exactly."""


def task_sentence(text: str) -> str:
    """The task sentence of a grammar or opening text, without "Your task is to: " and the final period."""
    match = _TASK_RE.search(text)
    return match.group(1).strip().rstrip(".") if match else ""


def demangled_names(ids: Iterable[str]) -> dict[str, str]:
    """ALFWorld's ``Demangler`` names (``AlfredDemangler``, no shuffling) for a game's entity ids.

    ``cabinet_bar__plus_00_dot_68_bar_...`` -> ``cabinet 3``: ids are sorted, ids of the same prefix (the part
    before the first ``_bar_``; ids containing "basin" get "basin" appended) are counted, and each id in
    sorted order takes the *highest* number still free for its prefix. Ids without ``_bar_`` keep their text
    and get no number, but the space stays (``agent1 ``).
    """
    ids = sorted(ids)
    counts: Counter[str] = Counter()
    for entity_id in ids:
        prefix, bar, _ = entity_id.partition("_bar_")
        if bar:
            counts[prefix + ("basin" if "basin" in entity_id else "")] += 1
    free = {prefix: list(range(1, count + 1)) for prefix, count in counts.items()}
    names = {}
    for entity_id in ids:
        text = entity_id
        for old, new in (("_bar_", "|"), ("_minus_", "-"), ("_plus_", "+"), ("_dot_", "."), ("_comma_", ",")):
            text = text.replace(old, new)
        prefix, bar, _ = text.partition("|")
        if not bar:
            names[entity_id] = f"{text} "
            continue
        if "basin" in entity_id:
            prefix += "basin"
        names[entity_id] = f"{prefix} {free[prefix].pop()}"
    return names


def _appliance_types(action, fallback: tuple[str, ...]) -> tuple[str, ...]:
    """The constant type arguments of ``receptacleType``/``objectType`` atoms in an action's precondition."""
    found: list[str] = []

    def walk(node):
        if isinstance(node, list):
            if len(node) == 3 and node[0] in ("receptacletype", "objecttype") and not node[2].startswith("?"):
                found.append(node[2])
            for child in node:
                walk(child)

    walk(action.precondition)
    return tuple(found) or fallback


class CompiledGame:
    """Everything about one game file that never changes while it is played; shareable between games.

    Build with :meth:`load`; :class:`NativeAlfworldGame` holds one plus the mutable state.
    """

    def __init__(self, data: Mapping[str, object]):
        """Compile a parsed game file (the ``pddl_domain``, ``grammar`` and ``pddl_problem`` fields).

        Raises:
            UnsupportedGameError: for a domain action or a grammar feature this engine does not reproduce.
        """
        self.domain = PddlDomain.parse(str(data["pddl_domain"]))
        self.problem = PddlProblem.parse(str(data["pddl_problem"]))
        self.grammar = Grammar.parse(str(data["grammar"]))
        self.description = task_sentence(str(data["grammar"]))

        unknown = set(self.domain.actions) - set(ACTION_PARAMETERS)
        if unknown:
            raise UnsupportedGameError(f"domain actions {sorted(unknown)} are not implemented by the native engine")
        self.actions = [name for name in ACTION_PARAMETERS if name in self.domain.actions]
        self.all_actions = set(ACTION_PARAMETERS) - {"help"} <= set(self.actions)
        missing = [name for name in self.actions if name not in self.grammar.actions]
        if missing:
            raise UnsupportedGameError(f"the grammar has no template for actions {missing}")
        self.appliances = {
            name: _appliance_types(self.domain.actions[name], fallback)
            for name, fallback in DEFAULT_APPLIANCES.items()
            if name in self.domain.actions
        }
        negated = {p.removeprefix("not_") for p in self.grammar.all_predicates() if p.startswith("not_")}
        inexact = negated & DYNAMIC_PREDICATES - EXACT_NEGATIONS
        if inexact:
            raise UnsupportedGameError(f"the grammar reads not_{sorted(inexact)}, which this engine cannot reproduce")

        # Entities: every id in an initial fact (TextWorld's entity table), named the way ALFWorld names them.
        ids: dict[str, None] = {}
        for _, args in self.problem.init:
            ids.update(dict.fromkeys(args))
        names = demangled_names(ids)
        self.entities = {i: Entity(i, names[i], self.problem.objects.get(i, "object")) for i in ids}
        self.id_names = {i: e.name for i, e in self.entities.items()}
        self.agents = sorted(i for i, e in self.entities.items() if e.type == "agent")
        self.initial_facts = FactStore(self.problem.init)
        self.goal = GoalChecker(self.problem.goal, self.problem.objects, self.domain)
        self.static_predicates = frozenset(p for p, _ in self.problem.init) - DYNAMIC_PREDICATES
        self.initial_won = self.goal(self.initial_facts)

        # Per-action text: the template is cacheable per operator when it reads only static facts.
        self.texts: dict[str, ActionText] = {name: self.grammar.actions[name] for name in self.actions}
        self.static_template = {
            name: not (
                self.grammar.predicates_read(text.template)
                & (DYNAMIC_PREDICATES | {"not_" + p for p in DYNAMIC_PREDICATES})
            )
            for name, text in self.texts.items()
        }
        self.command_cache: dict[Operator, str] = {}

        # Static lookups for the action rules.
        facts = self.initial_facts
        self.receptacle_location: dict[str, list[str]] = {}
        self.receptacles_at: dict[str, list[str]] = {}
        for r, loc in sorted(facts.of("receptacleatlocation")):
            self.receptacle_location.setdefault(r, []).append(loc)
            self.receptacles_at.setdefault(loc, []).append(r)
        self.receptacle_types = {
            r: sorted(t for _, t in facts.with_arg("receptacletype", 0, r)) for r, _ in facts.of("receptacletype")
        }
        self.object_types = {
            o: sorted(t for _, t in facts.with_arg("objecttype", 0, o)) for o, _ in facts.of("objecttype")
        }
        self.can_contain = set(facts.of("cancontain"))
        self.openable = {r for (r,) in facts.of("openable")}
        self.unary = {
            p: {x for (x,) in facts.of(p)}
            for p in ("pickupable", "cleanable", "heatable", "coolable", "toggleable", "sliceable")
        }
        self._goto_cache: dict[tuple[str, str], dict[str, Operator]] = {}
        # Receptacle -> the appliance actions it serves; the objects SliceObject accepts as knives.
        self.appliance_actions: dict[str, list[tuple[str, str]]] = {}
        for action, able in (("cleanobject", "cleanable"), ("heatobject", "heatable"), ("coolobject", "coolable")):
            for r, types in self.receptacle_types.items():
                if action in self.appliances and set(types) & set(self.appliances[action]):
                    self.appliance_actions.setdefault(r, []).append((action, able))
        knife_types = set(self.appliances.get("sliceobject", ()))
        self.knives = {o for o, types in self.object_types.items() if knife_types & set(types)}

        self.world = World(facts, self.entities, self.domain.is_subtype)
        # The opening text depends on the initial state only: TextWorld derives "#intro#" at every reset.
        self.opening = self.grammar.render(parse_symbols("#intro#"), self.world, Context())

    @classmethod
    def load(cls, game_path: str | Path) -> CompiledGame:
        """Compile the game stored at ``game_path`` (a ``game.tw-pddl`` file or its folder)."""
        return cls(json.loads(resolve_game_file(game_path).read_text()))

    def context(self, operator: Operator) -> Context:
        """The template context of an operator: its parameters bound to its arguments."""
        action, args = operator
        params = ACTION_PARAMETERS[action]
        return Context(
            dict(zip(params, args, strict=True)),
            {p[0]: self.entities[a] for p, a in zip(params, args, strict=True)},
        )

    def command(self, operator: Operator, world: World) -> str:
        """The command of ``operator``: the template rendered, then ``str.format``-ed with the names."""
        cached = self.command_cache.get(operator)
        if cached is not None:
            return cached
        text = self.grammar.render(self.texts[operator[0]].template, world, self.context(operator))
        if "{" in text or "}" in text:
            text = text.format(**self.id_names)
        if self.static_template[operator[0]]:
            self.command_cache[operator] = text
        return text

    def gotos(self, agent: str, location: str, world: World) -> dict[str, Operator]:
        """GotoLocation from ``location``: command -> operator, one per receptacle elsewhere.

        GotoLocation needs only ``(atLocation ?a ?lStart)`` and the static ``(receptacleAtLocation ?r
        ?lEnd)``, so the table is cached per location (unless the grammar's template reads dynamic facts).
        """
        key = (agent, location)
        table = self._goto_cache.get(key)
        if table is None:
            table = {}
            for r, lends in self.receptacle_location.items():
                for lend in lends:
                    if lend == location:  # both effects cancel: fast-downward drops the operator
                        continue
                    operator = ("gotolocation", (agent, location, lend, r))
                    table.setdefault(self.command(operator, world), operator)
            if self.static_template["gotolocation"]:
                self._goto_cache[key] = table
        return table


class NativeAlfworldGame(TaskGame):
    """One ALFWorld game on the native engine: TextWorld's transcript, computed in-process.

    Same interface and texts as :class:`~sage_envs.domains.alfworld.textworld_engine.AlfworldGame`; see the
    module docstring for how it works and what it reproduces.
    """

    def __init__(self, game_path: str | Path | None = None, *, compiled: CompiledGame | None = None) -> None:
        """Load the game at ``game_path`` (a ``game.tw-pddl`` file or its folder), or reuse ``compiled``.

        Raises:
            DataNotFoundError: when the game file does not exist.
            UnsupportedGameError: when the game uses a domain action or grammar feature not reproduced here.
        """
        if compiled is None:
            if game_path is None:
                raise TypeError("NativeAlfworldGame needs a game_path or a compiled game")
            self.game_file: Path | None = resolve_game_file(game_path)
            compiled = CompiledGame.load(self.game_file)
        else:
            self.game_file = Path(game_path) if game_path is not None else None
        self.compiled = compiled
        self._facts: FactStore | None = None
        self._world = World(compiled.initial_facts, compiled.entities, compiled.domain.is_subtype)
        self._won = False
        self._invalidate()  # caches of the current state's operators and commands
        self._touched: set[str] = set()  # predicates the last operator changed

    # -- TaskGame -------------------------------------------------------------------------------------------

    @property
    def description(self) -> str:
        """The task sentence, e.g. ``heat some apple and put it in diningtable`` (no prefix, no period)."""
        return self.compiled.description

    def reset(self) -> str:
        """Start (or restart) the game and return ALFWorld's opening text."""
        game = self.compiled
        self._facts = game.initial_facts.copy(shared=game.static_predicates)
        self._world.facts = self._facts
        self._won = game.initial_won
        self._invalidate()
        return game.opening

    def step(self, command: str) -> StepResult:
        """Apply one command; one that matches no applicable operator gets "Nothing happens."."""
        self._running()
        command = command.strip()
        operator = self._goto_operators().get(command) or self._other_operators().get(command)
        if operator is None:
            return StepResult(NOTHING_HAPPENS, self._won)
        self._touched.clear()
        self._apply(operator)
        self._invalidate()
        if self._touched & self.compiled.goal.predicates:  # the goal cannot change otherwise
            self._won = self.compiled.goal(self._facts)
        action = self.compiled.texts[operator[0]]
        feedback = self.compiled.grammar.render(action.feedback, self._world, self.compiled.context(operator))
        return StepResult(feedback, self._won)

    def admissible_commands(self) -> list[str]:
        """The commands the engine accepts now, sorted (TextWorld's order)."""
        if self._admissible is None:
            self._running()
            commands = set(self._goto_operators())
            commands.update(self._other_operators())
            self._admissible = sorted(commands)
        return list(self._admissible)

    def entities(self) -> Mapping[str, Sequence[str]]:
        """What a skill program may iterate over: ``receptacles``, ``objects`` and ``inventory``.

        ``receptacles`` are the ones the opening text lists, in that order (all of them, in the same order,
        should a game start next to one); ``objects`` are the objects that can be taken here and now (from the
        admissible ``take X from Y`` commands, in their order); ``inventory`` is what the agent holds.
        """
        self._running()
        game = self.compiled
        match = _ROOM_RE.search(game.opening)
        if match:
            receptacles = _split_listing(match.group(1))
        else:
            receptacles = [game.entities[r].name for r, _ in sorted(game.initial_facts.of("receptacleatlocation"))]
        objects: list[str] = []
        operators = self._current_operators()
        for command in self.admissible_commands():
            action, args = operators[command]
            if action == "pickupobject" and game.entities[args[2]].name not in objects:
                objects.append(game.entities[args[2]].name)
        inventory = [game.entities[o].name for _, o in sorted(self._facts.of("holds"))]
        return {"receptacles": receptacles, "objects": objects, "inventory": inventory}

    # -- State ----------------------------------------------------------------------------------------------

    @property
    def won(self) -> bool:
        """Whether the goal holds now."""
        return self._won

    @property
    def facts(self) -> FactStore:
        """The current facts (read-only by convention)."""
        return self._running()

    def _running(self) -> FactStore:
        if self._facts is None:
            raise RuntimeError("NativeAlfworldGame: call reset() before step(), admissible_commands() or entities().")
        return self._facts

    def _invalidate(self) -> None:
        self._gotos: dict[str, Operator] | None = None
        self._others: dict[str, Operator] | None = None
        self._admissible: list[str] | None = None
        self._operator_cache: list[Operator] | None = None

    def _goto_operators(self) -> dict[str, Operator]:
        """Command -> GotoLocation operator for the agent's current location (a static table, not a copy)."""
        if self._gotos is None:
            game = self.compiled
            positions = sorted(self._facts.of("atlocation"))
            tables = [game.gotos(agent, location, self._world) for agent, location in positions]
            if "gotolocation" not in game.domain.actions or not tables:
                self._gotos = {}
            elif len(tables) == 1:
                self._gotos = tables[0]
            else:  # several agents: first operator per command wins
                merged: dict[str, Operator] = {}
                for table in tables:
                    for command, operator in table.items():
                        merged.setdefault(command, operator)
                self._gotos = merged
        return self._gotos

    def _other_operators(self) -> dict[str, Operator]:
        """Command -> first applicable operator with that command, for every action but GotoLocation."""
        if self._others is None:
            world, command = self._world, self.compiled.command
            others: dict[str, Operator] = {}
            for operator in self._operator_list():
                others.setdefault(command(operator, world), operator)
            self._others = others
        return self._others

    def _current_operators(self) -> dict[str, Operator]:
        """Command -> the operator TextWorld runs for it (the first in its list of valid commands)."""
        return {**self._other_operators(), **self._goto_operators()}

    # -- The ALFRED actions (alfred.pddl), as fast-downward grounds them -------------------------------------

    def _operator_list(self) -> list[Operator]:
        """The applicable ground operators except GotoLocation (:meth:`CompiledGame.gotos`), by action.

        The order only decides which operator runs when two share a command; for ALFRED they never differ.
        """
        if self._operator_cache is not None:
            return self._operator_cache
        game, facts = self.compiled, self._running()
        actions = game.domain.actions
        ops: list[Operator] = []
        positions = sorted(facts.of("atlocation"))
        holds = sorted(facts.of("holds"))
        for agent in game.agents:
            # inventory / help: (:precondition ()) for every agent.
            if "inventory" in actions:
                ops.append(("inventory", (agent,)))
            if "help" in actions:
                ops.append(("help", (agent,)))
        for agent, location in positions:
            here = game.receptacles_at.get(location, ())
            empty_handed = not facts.has("holdsany", (agent,))
            held = [o for a, o in holds if a == agent]
            # look: (atLocation ?a ?l)
            if "look" in actions:
                ops.append(("look", (agent, location)))
            for r in here:
                accessible = r not in game.openable or facts.has("opened", (r,))
                # examineReceptacle: exists ?l (atLocation ?a ?l) (receptacleAtLocation ?r ?l)
                ops.append(("examinereceptacle", (agent, r)))
                # OpenObject / CloseObject: (openable ?r) ... (not (opened ?r)) / (opened ?r)
                if r in game.openable:
                    ops.append(("closeobject" if accessible else "openobject", (agent, location, r)))
                contents = sorted(o for o, _ in facts.with_arg("inreceptacle", 1, r))
                for o in contents:
                    # PickupObject: (pickupable ?o) (inReceptacle ?o ?r) (not (holdsAny ?a)), ?r open or not
                    # openable
                    if accessible and empty_handed and o in game.unary["pickupable"]:
                        ops.append(("pickupobject", (agent, location, o, r)))
                    # ToggleObject: (toggleable ?o) (inReceptacle ?o ?r) -- open or not
                    if o in game.unary["toggleable"]:
                        ops.append(("toggleobject", (agent, location, o, r)))
                for o in held:
                    # PutObject: (holds ?a ?o), r open if openable, (canContain ?rt ?ot)
                    if accessible:
                        for ot in game.object_types.get(o, ()):
                            for rt in game.receptacle_types.get(r, ()):
                                if (rt, ot) in game.can_contain:
                                    ops.append(("putobject", (agent, location, o, r, ot, rt)))
                    # Clean/Heat/CoolObject: (holds ?a ?o) (cleanable|heatable|coolable ?o), ?r of the type
                    for action, able in game.appliance_actions.get(r, ()):
                        if o in game.unary[able]:
                            ops.append((action, (agent, location, r, o)))
            for o in held:
                # examineObject: (holds ?a ?o) -- its other branch quantifies over the empty type "location,".
                if "examineobject" in actions:
                    ops.append(("examineobject", (agent, o)))
                # SliceObject: (sliceable ?co) (objectAtLocation ?co ?l) (holds ?a ?ko), ?ko a knife
                if o in game.knives:
                    for co, _ in sorted(facts.with_arg("objectatlocation", 1, location)):
                        if co in game.unary["sliceable"]:
                            ops.append(("sliceobject", (agent, location, co, o)))
        if not game.all_actions:
            ops = [op for op in ops if op[0] in actions]
        self._operator_cache = ops
        return ops

    def _apply(self, operator: Operator) -> None:
        """Apply an operator's effects (alfred.pddl's :effect), recording ``not_<p>`` for deleted atoms."""
        action, args = operator
        if action == "look":
            self._add("checked", (args[1],))
        elif action in ("inventory", "help"):
            self._add("checked", args)
        elif action == "examinereceptacle":
            self._add("checked", (args[1],))
        elif action == "examineobject":
            self._add("checked", (args[1],))
        elif action == "gotolocation":
            a, lstart, lend, _ = args
            self._delete("atlocation", (a, lstart))
            self._add("atlocation", (a, lend))
        elif action == "openobject":
            self._add("opened", (args[2],))
            self._add("checked", (args[2],))
        elif action == "closeobject":
            self._delete("opened", (args[2],))
        elif action == "pickupobject":
            a, loc, o, r = args
            self._delete("inreceptacle", (o, r))
            self._add("holds", (a, o))
            self._add("holdsany", (a,))
            self._delete("objectatlocation", (o, loc))
        elif action == "putobject":
            a, loc, o, r = args[:4]
            self._add("inreceptacle", (o, r))
            self._add("objectatlocation", (o, loc))
            self._delete("holds", (a, o))
            self._delete("holdsany", (a,))
        elif action == "cleanobject":
            self._add("isclean", (args[3],))
        elif action == "heatobject":
            self._add("ishot", (args[3],))
            self._delete("iscool", (args[3],))
        elif action == "coolobject":
            self._add("iscool", (args[3],))
            self._delete("ishot", (args[3],))
        elif action == "toggleobject":
            o = args[2]
            # (when (isOn ?o) (not (isOn ?o))) (when (not (isOn ?o)) (isOn ?o)): both read the state before.
            if self._facts.has("ison", (o,)):
                self._delete("ison", (o,))
            else:
                self._add("ison", (o,))
            self._add("istoggled", (o,))
        elif action == "sliceobject":
            self._add("issliced", (args[2],))
        else:  # pragma: no cover - ACTION_PARAMETERS and this switch list the same actions
            raise AssertionError(action)

    def _add(self, pred: str, args: tuple[str, ...]) -> None:
        # TextWorld's PddlState.apply: remove the effect's negation, add the effect.
        self._touched.add(pred)
        self._facts.discard("not_" + pred, args)
        self._facts.add(pred, args)

    def _delete(self, pred: str, args: tuple[str, ...]) -> None:
        self._touched.add(pred)
        self._facts.discard(pred, args)
        self._facts.add("not_" + pred, args)


def _split_listing(text: str) -> list[str]:
    """Split ``a cabinet 2, a cabinet 1, and a toaster 1`` into names, in order."""
    names = []
    for item in re.split(r",\s*", text.strip()):
        item = re.sub(r"^(?:and\s+)?(?:an?\s+)?", "", item.strip())
        if item and item != "nothing":
            names.append(item)
    return names
