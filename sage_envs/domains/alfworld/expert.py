"""An observation-only scripted ALFWorld agent: the upper-bound baseline and the source of SFT chains.

:class:`AlfworldExpert` sees only what any agent sees (the opening text, the feedback of its own actions, the
admissible commands, the task sentence) plus public domain knowledge: which receptacle types can hold which
object types (``alfworld.gen.constants``). It never reads the engine state; the privileged reference
walkthrough is :meth:`~sage_envs.domains.alfworld.textworld_engine.AlfworldGame.expert_plan` instead.

With ``use_skills=True`` it plays as SAGE intends: the first time a routine is needed in a chain it sends a
skill definition followed by a call, and later tasks call the stored skill (one turn instead of many). Every
skill is parameterised by object and place, so the tasks of one household reuse each other's skills.

Games speak one of two command grammars (:data:`~sage_envs.domains.alfworld.scenes.COMMAND_GRAMMARS`): the
official games "put X in/on Y", games generated with the wheel's grammar "move X to Y". The expert reads the
game's put command from its admissible commands, and its skill bodies say that form only, with no fallback to
the other: a skill is written for the game it is played in (:func:`skill_definition`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from alfworld.gen import constants

from sage_envs.domains.alfworld.scenes import COMMAND_GRAMMARS, command_templates
from sage_envs.domains.alfworld.textworld_engine import opening_receptacles, split_listing

TASK_PATTERNS = (
    (r"put two (?P<obj>.+) in (?P<place>.+)", "pick_two_obj_and_place"),
    (r"find two (?P<obj>.+) and put them in (?P<place>.+)", "pick_two_obj_and_place"),
    (r"look at (?P<obj>.+) under the (?P<lamp>.+)", "look_at_obj_in_light"),
    (r"examine the (?P<obj>.+) with the (?P<lamp>.+)", "look_at_obj_in_light"),
    (r"put a (?P<state>clean|hot|cool) (?P<obj>.+) in (?P<place>.+)", ""),
    (r"(?P<action>clean|heat|cool) some (?P<obj>.+) and put it in (?P<place>.+)", ""),
    (r"put (?:a|some) (?P<obj>.+) (?:in|on) (?P<place>.+)", "pick_and_place_simple"),
)
"""The task templates of ``alfworld.gen.goal_library`` for the six types (``""``: decided by the action)."""

ACTION_TASK_TYPES = {
    "clean": "pick_clean_then_place_in_recep",
    "heat": "pick_heat_then_place_in_recep",
    "cool": "pick_cool_then_place_in_recep",
}
_STATE_TO_ACTION = {"clean": "clean", "hot": "heat", "cool": "cool"}
# Appliances by action, in order of preference (a bathroom without a sink basin cleans in the bathtub basin).
APPLIANCES = {"clean": ("sinkbasin", "bathtubbasin"), "heat": ("microwave",), "cool": ("fridge",)}

# Public ALFRED rules: receptacle types (lowercase) that can hold each object type (lowercase).
HOLDERS: dict[str, frozenset[str]] = {}
for _recep, _objects in constants.VAL_RECEPTACLE_OBJECTS.items():
    for _obj in _objects:
        HOLDERS[_obj.lower()] = HOLDERS.get(_obj.lower(), frozenset()) | {_recep.lower()}
# Lamps cannot be picked up, so ALFRED's placement table leaves them out; desk lamps stand on these.
HOLDERS["desklamp"] = frozenset({"desk", "sidetable", "dresser", "shelf"})
OPENABLE = frozenset(name.lower() for name in constants.OPENABLE_CLASS_LIST)

NOTHING = "Nothing happens."
# One receptacle's contents; a skill trace may add lines after it (e.g. "Skill error: ..."), hence MULTILINE.
_SEE_RE = re.compile(
    r"(?:On the (?P<on>.+?), you see|The (?P<in>.+?) is open\. In it, you see) (?P<items>.*?)\.?$", re.MULTILINE
)
_CLOSED_RE = re.compile(r"The (?P<recep>.+?) is closed\.")

SKILLS = {
    "find_and_take": """skill find_and_take(obj, where):
    # visit each receptacle named or typed `where`, open it if closed, and pick up the first obj found there
    # ("go to" does nothing when the agent already stands there: then examine shows the receptacle)
    for r in receptacles:
        if " {where} " in " {r} ":
            go to {r}
            if "Nothing happens" in observation:
                examine {r}
            if "closed" in observation:
                open {r}
            for o in objects:
                if " {obj} " in " {o} ":
                    take {o} from {r}
                    if "Nothing happens" not in observation:
                        return""",
    "place_in": """skill place_in(obj, place):
    # carry the held obj to place, open place if closed, and put obj there
    go to {place}
    if "Nothing happens" in observation:
        examine {place}
    if "closed" in observation:
        open {place}
    PUT""",
    "heat_then_place": """skill heat_then_place(obj, microwave, place):
    # heat the held obj with the microwave, then put it in/on place
    go to {microwave}
    heat {obj} with {microwave}
    go to {place}
    if "Nothing happens" in observation:
        examine {place}
    if "closed" in observation:
        open {place}
    PUT""",
    "cool_then_place": """skill cool_then_place(obj, fridge, place):
    # cool the held obj with the fridge, then put it in/on place
    go to {fridge}
    cool {obj} with {fridge}
    go to {place}
    if "Nothing happens" in observation:
        examine {place}
    if "closed" in observation:
        open {place}
    PUT""",
    "clean_then_place": """skill clean_then_place(obj, sink, place):
    # clean the held obj with the sink, then put it in/on place
    go to {sink}
    clean {obj} with {sink}
    go to {place}
    if "Nothing happens" in observation:
        examine {place}
    if "closed" in observation:
        open {place}
    PUT""",
    "use_lamp": """skill use_lamp(lamp, where):
    # switch on the lamp if it is here, else visit each receptacle named or typed `where` until it is there
    use {lamp}
    if "Nothing happens" not in observation:
        return
    for r in receptacles:
        if " {where} " in " {r} ":
            go to {r}
            if "Nothing happens" in observation:
                examine {r}
            if "{lamp}" in observation:
                use {lamp}
                return""",
}
"""The expert's skill programs; ``PUT`` becomes the put command of the game's grammar (:data:`PUT_COMMANDS`)."""

PUT_COMMANDS = {
    name: command_templates(files.grammar.read_text())["PutObject"].format(o="{obj}", r="{place}")
    for name, files in COMMAND_GRAMMARS.items()
}
"""The put command of each command grammar, read from its twl2 grammar: ``{"wheel": "move {obj} to {place}",
"official": "put {obj} in/on {place}"}``."""
# An admissible command -> the grammar whose put command it is (a template's words around its two slots).
_PUT_PATTERNS = {
    name: re.compile(".+".join(re.escape(part) for part in re.split(r"\{obj\}|\{place\}", command)))
    for name, command in PUT_COMMANDS.items()
}


NAME_VARIANTS = {
    "find_and_take": ("find_and_take", "find_take", "take_and_find", "find"),
    "place_in": ("place_in", "place", "in_place"),
    "heat_then_place": ("heat_then_place", "heat_and_place", "heat_place", "heat"),
    "cool_then_place": ("cool_then_place", "cool_and_place", "cool_place", "cool"),
    "clean_then_place": ("clean_then_place", "clean_and_place", "clean_place", "clean"),
    "use_lamp": ("use_lamp", "use", "lamp"),
}
"""Names a varying expert gives each of its skills (words of the skills' own names, so a policy that writes
skills with the vocabulary of :data:`SKILLS` can write them too)."""


DIRECT_SKILLS = {
    "find_and_take": """skill find_and_take(obj, where):
    # go to the receptacle `where`, open it if closed, and pick up the first obj found there
    go to {where}
    if "Nothing happens" in observation:
        examine {where}
    if "closed" in observation:
        open {where}
    for o in objects:
        if " {obj} " in " {o} ":
            take {o} from {where}
            if "Nothing happens" not in observation:
                return""",
    "use_lamp": """skill use_lamp(lamp, where):
    # switch on the lamp if it is here, else go to the receptacle `where` and switch it on there
    use {lamp}
    if "Nothing happens" not in observation:
        return
    go to {where}
    if "Nothing happens" in observation:
        examine {where}
    use {lamp}""",
}
"""Bodies of the search skills that go straight to one named receptacle instead of searching with a loop (the
varying expert's other way to write them; it then calls them with a receptacle, not a type)."""

TASK_SKILLS = {
    "take_and_place": """skill take_and_place(obj, where, place):
    # find and take obj in `where`, then put what is held in/on place
    call find_and_take({obj}, {where})
    for i in inventory:
        call place_in({i}, {place})""",
    "heat_task": """skill heat_task(obj, where, microwave, place):
    # find and take obj in `where`, then heat what is held with the microwave and put it in/on place
    call find_and_take({obj}, {where})
    for i in inventory:
        call heat_then_place({i}, {microwave}, {place})""",
    "cool_task": """skill cool_task(obj, where, fridge, place):
    # find and take obj in `where`, then cool what is held with the fridge and put it in/on place
    call find_and_take({obj}, {where})
    for i in inventory:
        call cool_then_place({i}, {fridge}, {place})""",
    "clean_task": """skill clean_task(obj, where, sink, place):
    # find and take obj in `where`, then clean what is held with the sink and put it in/on place
    call find_and_take({obj}, {where})
    for i in inventory:
        call clean_then_place({i}, {sink}, {place})""",
    "look_task": """skill look_task(obj, where, lamp, place):
    # find and take obj in `where`, then (holding it) switch on the lamp, searching for it in `place`
    call find_and_take({obj}, {where})
    for i in inventory:
        call use_lamp({lamp}, {place})""",
}
"""Whole-task skills of the varying expert: calls of the sub-task skills of :data:`SKILLS` (which must be in the
library; the object found is the one held, the ``inventory``). Keys: the task skill; the sub-task skills it calls
are named in its body."""

TASK_SKILL_OF = {
    "pick_and_place_simple": "take_and_place",
    "pick_two_obj_and_place": "take_and_place",
    "pick_heat_then_place_in_recep": "heat_task",
    "pick_cool_then_place_in_recep": "cool_task",
    "pick_clean_then_place_in_recep": "clean_task",
    "look_at_obj_in_light": "look_task",
}
"""The whole-task skill of each task type."""

TASK_NAME_VARIANTS = {
    "take_and_place": ("take_and_place", "find_and_place", "take_place"),
    "heat_task": ("heat_task", "find_heat_place", "take_and_heat"),
    "cool_task": ("cool_task", "find_cool_place", "take_and_cool"),
    "clean_task": ("clean_task", "find_clean_place", "take_and_clean"),
    "look_task": ("look_task", "find_and_use", "take_and_use"),
}
"""Names a varying expert gives its whole-task skills (words of the skills' names)."""

_CALL_LINE = re.compile(r"^(?P<indent>\s*)call (?P<name>\w+)\((?P<args>[^)]*)\)$")


def definition_variant(
    text: str, rename: str, order: Sequence[int], callees: Mapping[str, tuple[str, Sequence[int]]] | None = None
) -> str:
    """The definition ``text`` called ``rename``, its parameters in ``order``, without comments.

    Args:
        text: a skill definition (``skill NAME(params):`` and its body).
        rename: the name it gets.
        order: its parameters' new order (indices into the old one).
        callees: for the skills its body calls, their name and parameter order in this chain (by the name the
            body calls): a call line of a skill in ``callees`` is renamed and its arguments reordered alike.
    """
    lines = text.split("\n")
    params = lines[0].split("(", 1)[1].split(")", 1)[0].split(", ")
    body = [f"skill {rename}({', '.join(params[i] for i in order)}):"]
    for line in lines[1:]:
        call = _CALL_LINE.match(line)
        if line.strip().startswith("#"):
            continue
        if call and call["name"] in (callees or {}):
            name, callee_order = callees[call["name"]]
            args = call["args"].split(", ")
            line = f"{call['indent']}call {name}({', '.join(args[i] for i in callee_order)})"
        body.append(line)
    return "\n".join(body)


def skill_variant(name: str, rename: str, order: Sequence[int], grammar: str = "wheel") -> str:
    """:func:`skill_definition` of ``name`` called ``rename``, its parameters in ``order``, without comments."""
    return definition_variant(skill_definition(name, grammar), rename, order)


def variant_definitions() -> list[str]:
    """The definitions only a varying expert writes (:data:`DIRECT_SKILLS`, :data:`TASK_SKILLS`), canonical names.

    With :func:`skill_definition` of each skill of :data:`SKILLS`, the vocabulary of a policy that writes skills
    like the varying expert's (the ``inventory`` collection comes from the whole-task skills).
    """
    return [*DIRECT_SKILLS.values(), *TASK_SKILLS.values()]


def skill_definition(name: str, grammar: str = "wheel") -> str:
    """The DSL definition of the expert's skill ``name`` for games of ``grammar`` (a key of :data:`PUT_COMMANDS`).

    Its put line is that grammar's put command only: a skill written for one grammar does nothing where the other
    is spoken, as a skill an agent writes for the game in front of it would. :func:`skill_definitions` gives the
    templates a constrained-decoding policy can offer, or the vocabulary it writes skills with.
    """
    return SKILLS[name].replace("PUT", PUT_COMMANDS[grammar])


def skill_definitions(names: Sequence[str] | None = None, grammars: Sequence[str] = ("wheel",)) -> list[str]:
    """:func:`skill_definition` of each skill of ``names`` (None = all of :data:`SKILLS`) in each of ``grammars``.

    A policy that plays games of several grammars needs each skill in each of them (its put line differs).
    """
    return [
        skill_definition(name, grammar) for name in SKILLS if names is None or name in names for grammar in grammars
    ]


def put_grammar(command: str) -> str:
    """The grammar whose put command ``command`` is (``wheel`` / ``official``), or "" for another command."""
    return next((name for name, pattern in _PUT_PATTERNS.items() if pattern.fullmatch(command)), "")


@dataclass(frozen=True)
class TaskGoal:
    """What a task sentence asks for."""

    task_type: str
    """One of the six ALFWorld task types."""
    obj: str
    """Object type, e.g. ``apple``."""
    place: str = ""
    """Goal receptacle type, e.g. ``countertop`` ("" for look tasks)."""
    lamp: str = ""
    """Light source type for look tasks, e.g. ``desklamp``."""
    action: str = ""
    """``clean`` / ``heat`` / ``cool`` for the three transform tasks."""

    @property
    def count(self) -> int:
        """How many objects must end in the goal receptacle."""
        return 2 if self.task_type == "pick_two_obj_and_place" else 1


def parse_task(sentence: str) -> TaskGoal | None:
    """Parse an ALFWorld task sentence (any of the goal-library templates); None when it matches none."""
    sentence = sentence.strip().rstrip(".").lower()
    if sentence.startswith("your task is to:"):
        sentence = sentence.split(":", 1)[1].strip()
    for pattern, task_type in TASK_PATTERNS:
        match = re.fullmatch(pattern, sentence)
        if match is None:
            continue
        groups = match.groupdict()
        action = groups.get("action") or _STATE_TO_ACTION.get(groups.get("state") or "", "")
        return TaskGoal(
            task_type=task_type or ACTION_TASK_TYPES[action],
            obj=groups["obj"],
            place=groups.get("place") or "",
            lamp=groups.get("lamp") or "",
            action=action,
        )
    return None


def kind_of(name: str) -> str:
    """The type of an entity name: ``cabinet 10`` -> ``cabinet``."""
    head, _, tail = name.rpartition(" ")
    return head if tail.isdigit() else name


@dataclass
class _World:
    """What the agent has observed in the current task."""

    receptacles: list[str] = field(default_factory=list)
    contents: dict[str, list[str]] = field(default_factory=dict)  # receptacle -> objects last seen in it
    closed: set[str] = field(default_factory=set)
    location: str = ""
    holding: str = ""
    treated: bool = False
    placed: list[str] = field(default_factory=list)  # objects of the task's type put in a receptacle of its place
    wanted: tuple[str, str] = ("", "")  # the task's object type and place type (what ``placed`` counts)
    unusable: set[str] = field(default_factory=set)  # receptacles where a clean/heat/cool command did nothing

    def observe(self, command: str, feedback: str) -> None:
        """Update from one executed command and the engine's answer to it."""
        verb = command.split(" ", 1)[0]
        if feedback.strip() == NOTHING:
            # "go to X" fails only when the agent already stands where X is (receptacles share spots).
            if verb == "go":
                self.location = command[len("go to ") :]
            elif verb in APPLIANCES:
                self.unusable.add(command.rsplit(" with ", 1)[1])
            return
        if verb == "go" and feedback.startswith("You arrive at"):
            self.location = command[len("go to ") :]
        elif verb == "take":
            self.holding = command[len("take ") :].split(" from ", 1)[0]
            self.treated = False  # a treatment was of the object held before
            for objects in self.contents.values():
                if self.holding in objects:
                    objects.remove(self.holding)
        elif self.holding and put_grammar(command):
            self.contents.setdefault(self.location, []).append(self.holding)
            if (kind_of(self.holding), kind_of(self.location)) == self.wanted:
                self.placed.append(self.holding)
            self.holding = ""
        elif verb in APPLIANCES:
            self.treated = True
        closed = _CLOSED_RE.search(feedback)
        if closed:
            self.closed.add(closed["recep"])
        seen = _SEE_RE.search(feedback)
        if seen:
            recep = seen["on"] or seen["in"]
            self.closed.discard(recep)
            self.contents[recep] = split_listing(seen["items"])

    def where_is(self, kind: str, exclude: Sequence[str] = ()) -> tuple[str, str]:
        """(object, receptacle) of a seen object of type ``kind`` outside ``exclude``; ("", "") if none."""
        for recep in self.receptacles:
            if recep in exclude:
                continue
            for obj in self.contents.get(recep, []):
                if kind_of(obj) == kind:
                    return obj, recep
        return "", ""


class AlfworldExpert:
    """A scripted ALFWorld agent that acts only on what it observes, with or without program skills.

    Protocol (as for every agent of the project): :meth:`reset` at each chain start, then :meth:`act` with
    the chain env's observation dict (``observation``, ``task``, ``skills``) and ``info``
    (``admissible_commands``, ``new_task``, ``skill_library``, ``action_valid``, ``message``) returns the
    next action text.

    Strategy: parse the task sentence; search receptacles that can hold the object first (non-openable before
    openable, then the rest), open closed ones, take the object; use the sink basin / microwave / fridge or
    the desk lamp; go to the goal receptacle and put the object there with the put command the game admits.
    With skills, the same plan is sent as calls of :data:`SKILLS` (defined on first use in the chain).
    Whenever a skill cannot be used (skills disabled, a failing call), it carries on with plain commands.
    """

    def __init__(
        self,
        use_skills: bool = True,
        skills: Sequence[str] | None = None,
        vary_definitions: int | None = None,
        shuffle_parameters: bool = True,
    ) -> None:
        """Create the agent.

        Args:
            use_skills: send skill definitions and calls (SAGE); False sends plain commands only, as the chain
                env requires with ``skills="none"``.
            skills: the names of :data:`SKILLS` it may use (None = all); the stages of a left-out skill are
                played with plain commands (e.g. only the ``*_then_place`` skills: search with commands).
            vary_definitions: a seed: each chain then gives every skill one of its :data:`NAME_VARIANTS` (or
                :data:`TASK_NAME_VARIANTS`) and a random parameter order, writes definitions without comment
                lines (:func:`definition_variant`), and draws how it writes them: the search skills with a loop
                (:data:`SKILLS`) or going straight to one receptacle (:data:`DIRECT_SKILLS`), and whether a task
                whose sub-task skills are in the library is played by one whole-task skill that calls them
                (:data:`TASK_SKILLS`), so that expert data holds varied definitions; None = the canonical
                definitions, with comments, and no whole-task skills.
            shuffle_parameters: with ``vary_definitions``, draw each skill's parameter order per chain; False
                keeps the canonical order of every definition (the object first, the place last, a tool or a
                search place between them), as a programmer's convention would.
        """
        unknown = sorted(set(skills or ()) - set(SKILLS))
        if unknown:
            raise ValueError(f"unknown expert skills {unknown}; choose among {sorted(SKILLS)}")
        self.use_skills = use_skills
        self.skills = frozenset(SKILLS if skills is None else skills)
        self._rng = np.random.default_rng(vary_definitions) if vary_definitions is not None else None
        self.shuffle_parameters = shuffle_parameters
        self._written: dict[str, str] = {}  # skill name -> the definition last sent under it (across chains)
        self._variants: dict[str, tuple[str, tuple[int, ...]]] = {}
        self._direct: set[str] = set()
        self._whole = False
        self.reset()

    def reset(self) -> None:
        """Forget the previous chain (called at each chain start)."""
        self._skills_off = not self.use_skills
        self._grammar = ""  # "wheel" or "official", once an admissible put command shows the game's grammar
        self._broken: set[str] = set()  # skills that failed to define or run in this chain
        # Kept for a library that outlives the chain (library_scope="persistent"): see _keep_library_variants.
        self._previous = (self._variants, self._direct, self._whole)
        self._variants = {}  # skill -> (its name, parameter order) here
        self._direct = set()  # search skills written with DIRECT_SKILLS' bodies in this chain
        self._whole = False  # tasks whose sub-task skills are in the library are played by a TASK_SKILLS skill
        if self._rng is not None:
            tasks = [t for t, text in TASK_SKILLS.items() if set(_called(text)) <= self.skills]
            variants = {**NAME_VARIANTS, **TASK_NAME_VARIANTS}
            for name in [*sorted(self.skills), *tasks]:
                taken = {rename for rename, _ in self._variants.values()}
                names = [n for n in variants[name] if n not in taken] or [name]
                rename = names[int(self._rng.integers(len(names)))]
                text = TASK_SKILLS.get(name) or SKILLS[name]
                arity = text.split("\n", 1)[0].count(",") + 1
                order = self._rng.permutation(arity) if self.shuffle_parameters else range(arity)
                self._variants[name] = (rename, tuple(int(i) for i in order))
            self._direct = {name for name in sorted(DIRECT_SKILLS) if self._rng.random() < 0.5 and name in self.skills}
            self._whole = bool(tasks) and self._rng.random() < 0.5
        self._start_task("", "")

    def act(self, observation: Mapping[str, str], info: Mapping[str, Any]) -> str:
        """Return the next action for the chain env's ``observation`` and ``info``."""
        text = observation["observation"]
        if self._previous is not None:
            self._keep_library_variants(info)
        if info.get("new_task", False) or observation["task"] != self._task:
            self._start_task(observation["task"], text)
        elif self._last_action.startswith(("skill ", "call ")):
            self._after_skill_turn(text, info)
        else:
            self._world.observe(self._last_action, text)
        admissible = list(info.get("admissible_commands", []))
        self._learn_grammar(admissible)
        action = self._skill_action(info) if not (self._skills_off or self._plain) else None
        self._last_action = action or self._command(admissible)
        return self._last_action

    def _keep_library_variants(self, info: Mapping[str, Any]) -> None:
        """At a chain's first turn: a library that still holds skills written here goes on with their names.

        A library kept across chains (``library_scope="persistent"``) holds the definitions of earlier chains; the
        names and parameter orders drawn for this chain would define the same skills again under other names, or
        call a kept skill of the same name with another parameter order.
        """
        library = {entry.get("name") for entry in info.get("skill_library", [])}
        if library & self._written.keys():
            self._variants, self._direct, self._whole = self._previous
        self._previous = None

    def override(self, action: str) -> None:
        """The action sent this turn was ``action``, not the one :meth:`act` returned (noise injected into its play).

        The next :meth:`act` reads the observation as the result of ``action``: a command's feedback updates the
        world as its own would, and a call's trace is replayed and, not being a call of its plan, judged as one that
        fell short, so the rest of the task is played with plain commands (what it does after its own failed call).
        """
        self._last_action = action
        self._call = ("", ())

    # ------------------------------------------------------------------ bookkeeping
    def _start_task(self, task: str, opening: str) -> None:
        self._task = task
        self._goal = parse_task(task) if task else None
        self._world = _World()
        self._world.receptacles = opening_receptacles(opening)
        self._world.wanted = (self._goal.obj, self._goal.place) if self._goal else ("", "")
        self._target = ""
        self._tried: set[tuple[str, ...]] = set()  # skill calls already sent in this task
        self._call: tuple[str, tuple[str, ...]] = ("", ())  # the skill call of the last turn: name, arguments
        self._placed_before_call = 0  # objects in the goal receptacle when the last call was sent
        self._plain = False  # a skill call fell short in this task: plain commands for the rest of it
        self._last_action = ""

    def _after_skill_turn(self, text: str, info: Mapping[str, Any]) -> None:
        """Replay a skill turn's trace (``> command`` lines, each followed by its feedback) into the world."""
        command, feedback = "", []
        for line in text.splitlines() + ["> "]:
            if line.startswith("> "):
                if command:
                    self._world.observe(command, "\n".join(feedback))
                command, feedback = line[2:], []
            elif command:
                feedback.append(line)
        if not info.get("action_valid", True):
            message = str(info.get("message", ""))
            if "disabled" in message:
                self._skills_off = True
            else:
                self._broken.add(self._call[0])
        elif not self._call_reached_its_goal():
            # A valid call that left the task where it should not (e.g. a sink that cannot clean): calling again
            # would repeat it, so the rest of the task is planned with commands from what the trace showed.
            self._plain = True

    def _call_reached_its_goal(self) -> bool:
        """Whether the world after the last call is what the call was for.

        The task has not ended (act would have started the next one), so a call that should end it fell short.
        """
        world, goal = self._world, self._goal
        name, args = self._call
        if name in TASK_SKILLS:
            # A whole task that did not end: its search found nothing (then as find_and_take's below), or it put
            # the first of two objects down; holding the object, what followed the search fell short.
            if world.holding or len(world.placed) > self._placed_before_call:
                return not world.holding
            name = "find_and_take"
        if name in ("find_and_take", "use_lamp"):
            # A search step: every receptacle it was sent to is now seen, and none holds what it looks for (the
            # object would be in hand; the lamp, switched on, would have ended the task).
            kind = goal.obj if name == "find_and_take" else goal.lamp
            if name == "find_and_take" and world.holding and kind_of(world.holding) == kind:
                return True
            searched = [r for r in world.receptacles if f" {args[1]} " in f" {r} "]
            return (
                all(r in world.contents for r in searched)
                and not world.where_is(kind, [r for r in world.receptacles if r not in searched])[1]
            )
        # place_in and the *_then_place skills end with the object put down, treated for the latter.
        return not world.holding and (name == "place_in" or world.treated)

    def _learn_grammar(self, admissible: Sequence[str]) -> None:
        grammar = next((g for g in map(put_grammar, admissible) if g), "")
        self._grammar = grammar or self._grammar

    # ------------------------------------------------------------------ planning
    def _search_order(self, kind: str, exclude: Sequence[str]) -> list[str]:
        """Receptacles not yet searched, best first: those able to hold ``kind``, non-openable ones first."""
        goal, world = self._goal, self._world
        holders = HOLDERS.get(kind, frozenset())

        # A pick-and-place object never starts in a goal-type receptacle (the task would be won already).
        shunned = goal.place if goal.task_type in ("pick_and_place_simple", "pick_two_obj_and_place") else ""

        def rank(index_recep: tuple[int, str]) -> tuple[int, bool, int]:
            index, recep = index_recep
            rtype = kind_of(recep)
            return rtype not in holders or rtype == shunned, rtype in OPENABLE, index

        pending = [(i, r) for i, r in enumerate(world.receptacles) if r not in world.contents and r not in exclude]
        return [recep for _, recep in sorted(pending, key=rank)]

    def _appliance(self) -> str:
        """The receptacle to clean / heat / cool in: the first of :meth:`_appliances` not yet found unusable."""
        return next((r for r in self._appliances() if r not in self._world.unusable), "")

    def _appliances(self) -> list[str]:
        """Every receptacle, the likeliest appliances first.

        By :data:`APPLIANCES` type (exact, then a name that holds the type, e.g. ``sinkbasinbasin 1``), then the
        other receptacles, which only appliances that all did nothing lead to.
        """
        receptacles = self._world.receptacles
        ranked = []
        for kind in APPLIANCES.get(self._goal.action, ()):
            ranked += [r for r in receptacles if kind_of(r) == kind]
            ranked += [r for r in receptacles if kind in kind_of(r) and kind_of(r) != kind]
        return list(dict.fromkeys(ranked + receptacles))

    def _goal_receptacle(self) -> str:
        if not self._target:
            candidates = [r for r in self._world.receptacles if kind_of(r) == self._goal.place]
            self._target = candidates[0] if candidates else ""
        return self._target

    def _avoid(self) -> list[str]:
        """Receptacles the search must skip: for two objects, the goal receptacle already holding one."""
        return [self._target] if self._goal.count > 1 and self._world.placed else []

    def _stage(self) -> str:
        """What to do next: ``find``, ``treat``, ``place`` or ``lamp``."""
        goal, world = self._goal, self._world
        if not world.holding or kind_of(world.holding) != goal.obj:
            return "find"
        if goal.task_type == "look_at_obj_in_light":
            return "lamp"
        if goal.action and not world.treated:
            return "treat"
        return "place"

    # ------------------------------------------------------------------ plain commands
    def _command(self, admissible: Sequence[str]) -> str:
        command = self._plain_command(admissible)
        # "go to X" is missing from the admissible list only when the agent already stands where X is.
        if command.startswith("go to ") and admissible and command not in admissible:
            self._world.location = command[len("go to ") :]
            command = self._plain_command(admissible)
        return command

    def _plain_command(self, admissible: Sequence[str]) -> str:
        goal, world = self._goal, self._world
        if goal is None:
            return "look"
        stage = self._stage()
        if stage == "find":
            drop = next(self._put_commands(admissible), "")
            if drop:  # holding another object (someone else sent its take): put it down here first
                return drop
            obj, recep = world.where_is(goal.obj, self._avoid())
            if not recep:
                return self._search_command(goal.obj, self._avoid())
            return f"take {obj} from {recep}" if world.location == recep else f"go to {recep}"
        if stage == "lamp":
            lamp, recep = world.where_is(goal.lamp)
            if not recep:
                return self._search_command(goal.lamp, ())
            return f"use {lamp}" if world.location == recep else f"go to {recep}"
        if stage == "treat":
            tool = self._appliance()
            if not tool:  # every receptacle refused: nothing in this room can do it
                return "look"
            if world.location != tool:
                return f"go to {tool}"
            command = f"{goal.action} {world.holding} with {tool}"
            # The game admits the command only where it works: elsewhere, try the next receptacle unsent.
            if admissible and command not in admissible:
                world.unusable.add(tool)
                return self._plain_command(admissible)
            return command
        place = self._goal_receptacle()
        if world.location != place:
            return f"go to {place}"
        if place in world.closed:
            return f"open {place}"
        if place not in world.contents:  # reached without a look at it (it shares the spot we came from)
            return f"examine {place}"
        for command in self._put_commands(admissible):
            if command.endswith(" " + place):
                return command
        return PUT_COMMANDS[self._grammar or "wheel"].format(obj=world.holding, place=place)

    def _put_commands(self, admissible: Sequence[str]) -> Iterator[str]:
        """The admissible commands that put down the object held (none when nothing is held)."""
        held = self._world.holding
        return (c for c in admissible if held and put_grammar(c) and f" {held} " in c)

    def _search_command(self, kind: str, exclude: Sequence[str]) -> str:
        """Next search command for an object of type ``kind``: open the closed receptacle here, or move on."""
        world = self._world
        here = world.location
        if here and here not in world.contents and here not in exclude:
            return f"open {here}" if here in world.closed else f"examine {here}"
        order = self._search_order(kind, exclude)
        return f"go to {order[0]}" if order else "look"

    # ------------------------------------------------------------------ skills
    def _skill_action(self, info: Mapping[str, Any]) -> str | None:
        """The skill call (with its definition on first use) for the current stage, or None for a command."""
        goal, world = self._goal, self._world
        if goal is None:
            return None
        stage = self._stage()
        library = {entry.get("name") for entry in info.get("skill_library", [])}
        if stage == "find":
            exclude = self._avoid()
            where = self._search_where("find_and_take", goal.obj, exclude)
            # A type-wide search would also visit the goal receptacle that already holds the first object.
            if not where or (exclude and where == goal.place):
                return None
            name, args = "find_and_take", (goal.obj, where)
            whole = self._whole_task(where, library)
            if whole is not None and self._attempt(*whole) not in self._tried:
                name, args = whole
        elif stage == "lamp":
            lamp, _ = world.where_is(goal.lamp)
            where = self._search_where("use_lamp", goal.lamp, ())
            if not where:
                return None
            name, args = "use_lamp", (lamp or f"{goal.lamp} 1", where)
        elif stage == "treat":
            tool, place = self._appliance(), self._goal_receptacle()
            if not tool or not place:
                return None
            name, args = f"{goal.action}_then_place", (world.holding, tool, place)
        else:
            place = self._goal_receptacle()
            if not place:
                return None
            name, args = "place_in", (world.holding, place)
        # The same call from the same situation would do the same again: then plain commands take over.
        attempt = self._attempt(name, args)
        if (name not in self.skills and name not in TASK_SKILLS) or name in self._broken or attempt in self._tried:
            return None
        self._tried.add(attempt)
        self._call, self._placed_before_call = (name, args), len(world.placed)
        rename, order = self._variants.get(name, (name, tuple(range(len(args)))))
        call = f"call {rename}({', '.join(args[i] for i in order)})"
        definition = self._definition(name)
        # A library skill of that name is called, unless this expert wrote another definition under it (in a kept
        # library: for the other put grammar, say); a skill it was given (a starting library) is taken as it is.
        if rename in library and self._written.get(rename, definition) == definition:
            return call
        self._written[rename] = definition
        return f"{definition}\n{call}"

    def _attempt(self, name: str, args: tuple[str, ...]) -> tuple[str, ...]:
        """A call with the situation it is sent from (what is held, placed and treated)."""
        world = self._world
        return (name, *args, world.holding, str(len(world.placed)), str(world.treated))

    def _search_where(self, skill: str, kind: str, exclude: Sequence[str]) -> str:
        """Where search skill ``skill`` should look for ``kind``: where it was seen, else the next place to search.

        The next place is a receptacle type (or the one receptacle left of it), or the next receptacle when the
        skill is written with a :data:`DIRECT_SKILLS` body; "" when nothing is left to search.
        """
        _, recep = self._world.where_is(kind, exclude)
        if recep:
            return recep
        if skill in self._direct:
            return next(iter(self._search_order(kind, exclude)), "")
        return self._next_kind(kind, exclude)

    def _whole_task(self, where: str, library: set[str]) -> tuple[str, tuple[str, ...]] | None:
        """The whole-task call that searches ``where`` then finishes the task, when this chain plays tasks so.

        Only when its sub-task skills are in the library (and none has failed in this chain); the appliance,
        goal receptacle or lamp place are chosen as the sub-task calls would choose them.
        """
        goal = self._goal
        name = TASK_SKILL_OF[goal.task_type]
        if not self._whole or name not in self._variants or name in self._broken:
            return None
        called = _called(TASK_SKILLS[name])
        if any(self._variants[c][0] not in library or c in self._broken for c in called):
            return None
        if goal.task_type == "look_at_obj_in_light":
            lamp, _ = self._world.where_is(goal.lamp)
            place = self._search_where("use_lamp", goal.lamp, ())
            return (name, (goal.obj, where, lamp or f"{goal.lamp} 1", place)) if place else None
        place = self._goal_receptacle()
        if not goal.action:
            return (name, (goal.obj, where, place)) if place else None
        tool = self._appliance()
        return (name, (goal.obj, where, tool, place)) if tool and place else None

    def _next_kind(self, kind: str, exclude: Sequence[str]) -> str:
        """The receptacle (if only one is left of its type) or type to search next for ``kind``."""
        order = self._search_order(kind, exclude)
        if not order:
            return ""
        rtype = kind_of(order[0])
        same = [r for r in order if kind_of(r) == rtype]
        return same[0] if len(same) == 1 else rtype

    def _definition(self, name: str) -> str:
        """The definition text, its put line in the game's grammar (the wheel's until a put command was seen)."""
        if name in TASK_SKILLS or name in self._direct:
            text = TASK_SKILLS.get(name) or DIRECT_SKILLS[name]
            return definition_variant(text, *self._variants[name], callees=self._variants)
        if name in self._variants:
            return skill_variant(name, *self._variants[name], self._grammar or "wheel")
        return skill_definition(name, self._grammar or "wheel")


def _called(text: str) -> list[str]:
    """The skills a definition's body calls, in order."""
    return [m["name"] for m in map(_CALL_LINE.match, text.split("\n")) if m]
