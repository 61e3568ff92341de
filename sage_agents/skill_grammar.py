r"""Skill definitions written token by token: the skill DSL's grammar as a constrained-decoding plan.

A policy that writes its skills (``LLMPolicy(write_skills=True)``) is not offered whole definitions: it may
start a turn with ``skill``, then every piece of the definition is a choice of :mod:`sage_agents.decoding`
among what the grammar allows at that point, so every definition it samples parses by construction::

    skill NAME(PARAM, ...):          NAME = word{_word} (at most max_name_words), params distinct
        STATEMENT                    indented by 4 per level, at most max_body_lines lines, max_depth deep
        ...
    call NAME(ARG, ...)              the trailing call: one argument per parameter, as a library call's

    STATEMENT := SHAPE with each {} slot filled by " {param}" or " {loopvar}" in scope
               | "call" SKILL "(" ARG, ... ")"          (a skill of the library in scope, not the one written;
                                                          ARG: "{param}", "{loopvar}" or an entity name)
               | "for" VAR "in" COLLECTION ":"          (VAR: the collection's first letter, not in scope)
               | "if" NEEDLE ["not"] "in" HAYSTACK ":"
               | "return" | "break" (inside a for)
    NEEDLE     := "TEXT" (an observation test) | "{param}" | " {param} "
    HAYSTACK   := observation | " {loopvar} "

The vocabulary (command shapes, collections, name words, parameter names, observation tests) is read from
example definitions (:meth:`SkillGrammar.from_definitions`: the domain expert's, which the agent is otherwise
offered as templates), so the grammar offers the domain's own command shapes and nothing else. A block
opener is offered only when a line is left for its body; the definition ends (``call``) only after a statement
that is not a block opener. Choices are split before spaces (`` {obj}``, `` from``) so that the pieces'
tokens are the tokens of the whole text (for word-level and for space-prefixed BPE vocabularies), the ones
SFT trained. A body's ``call`` statements are what whole-task skills are made of: they call skills already in
the library (the signatures the observation lists), so a skill that finds, heats and places an object can be two
calls of sub-task skills.

Where one skill is written in several forms (ALFWorld's put line: ``move {} to {}`` in the wheel's games,
``put {} in/on {}`` in the official ones), the lines that differ are *alternatives*: given the game's commands
seen so far, the grammar offers the alternatives they show and, while none shows, the first form's (the
expert's rule: the wheel's put line until a put command was seen). Without it, a policy trained on games of both
grammars wrote the official put line into two thirds of its skills in wheel games, where it cannot run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from sage_agents.decoding import Option, Plan, arguments_plan

INDENT = "    "
_PLACEHOLDER = re.compile(r"\{[A-Za-z_]\w*\}")
_HEADER = re.compile(r"skill\s+([A-Za-z_]\w*)\s*\(([^)]*)\)\s*:")
_FOR = re.compile(r"for\s+\w+\s+in\s+(\w+)\s*:")
_OBS_TEST = re.compile(r'if\s+"([^"{}]+)"\s+(?:not\s+)?in\s+observation\s*:')

Signature = tuple[str, Sequence[str]]
"""A skill's name and parameter names."""


@dataclass(frozen=True)
class SkillGrammar:
    """The pieces a written skill definition is made of (see the module docstring)."""

    command_shapes: tuple[str, ...]
    """Primitive commands with ``{}`` for each entity slot (``take {} from {}``)."""
    collections: tuple[str, ...]
    """Entity collections a ``for`` loop may iterate over (``receptacles``)."""
    name_words: tuple[str, ...]
    """Words a skill name is joined from with ``_``."""
    param_names: tuple[str, ...]
    """Parameter names (a parameter's name is its type for typed arguments: ``microwave``)."""
    observation_tests: tuple[str, ...]
    """Texts an ``if`` may look for in the observation (``Nothing happens``)."""
    alternatives: tuple[tuple[str, ...], ...] = ()
    """Groups of command shapes that are one command in different game grammars, the default form first."""
    max_name_words: int = 3
    """Words in a skill name."""
    max_params: int = 4
    """Parameters of a skill (the expert's whole-task skills have 4: object, where to search, appliance, place)."""
    max_body_lines: int = 16
    """Statements in a definition's body (the expert's longest has 12)."""
    max_depth: int = 6
    """Depth of a statement, the body's first level being 1 (the expert's deepest, a ``return``, is at 6)."""

    @classmethod
    def from_definitions(cls, definitions: Sequence[str], **limits: int) -> SkillGrammar:
        """The grammar whose vocabulary is that of ``definitions`` (skill DSL texts; comments are ignored)."""
        shapes, collections, words, params, tests = [], [], [], [], []
        forms: dict[tuple[str, int], list[list[str]]] = {}  # (skill name, line count) -> its forms' lines
        for text in definitions:
            # each line without its comment and indentation, each placeholder as {} (a command line is its shape)
            lines = [_PLACEHOLDER.sub("{}", raw.split("#", 1)[0].strip()) for raw in text.strip().splitlines()]
            first = _HEADER.match(lines[0]) if lines else None
            if first:
                forms.setdefault((first.group(1), len(lines)), []).append(lines)
            for line in lines:
                header, loop, test = _HEADER.match(line), _FOR.match(line), _OBS_TEST.match(line)
                if header:
                    words += header.group(1).split("_")
                    params += [p.strip() for p in header.group(2).split(",") if p.strip()]
                elif loop:
                    collections.append(loop.group(1))
                elif test:
                    tests.append(test.group(1))
                elif line and not line.startswith(("if ", "else", "for ", "call ", "return", "break")):
                    shapes.append(line)
        unique = lambda items: tuple(dict.fromkeys(items))  # noqa: E731
        groups: dict[str, tuple[str, ...]] = {}
        for variants in forms.values():
            for lines in zip(*variants, strict=True):
                group = unique(lines)
                if len(group) > 1 and all(line in shapes for line in group):
                    groups.setdefault(group[0], group)
        return cls(
            unique(shapes), unique(collections), unique(words), unique(params), unique(tests),
            tuple(groups.values()), **limits,
        )  # fmt: skip

    def shapes_for(self, commands: Collection[str] | None) -> tuple[str, ...]:
        """The command shapes a definition may use in a game whose known commands are ``commands`` (None: all).

        Of each group of :attr:`alternatives`, the shapes that some command matches, else the group's first.
        """
        if commands is None:
            return self.command_shapes
        dropped: set[str] = set()
        for group in self.alternatives:
            shown = [shape for shape in group if any(_shape_pattern(shape).fullmatch(c) for c in commands)]
            dropped.update(shape for shape in group if shape not in (shown or group[:1]))
        return tuple(shape for shape in self.command_shapes if shape not in dropped)

    def plan(
        self,
        arguments: Callable[[str], Sequence[str]],
        library: Sequence[Signature] = (),
        commands: Collection[str] | None = None,
    ) -> Plan:
        """A definition then its trailing call, once the turn has taken the ``skill`` option.

        Args:
            arguments: parameter name -> the values a call argument of that name may take (entity names; in the
                trailing call and, beside the placeholders in scope, in a body's ``call`` statements).
            library: ``(name, params)`` of the skills a body may call (those of the library in scope); the skill
                being written is left out (calling itself would recurse until the call depth limit).
            commands: the game's commands known so far (the admissible list, the commands run): they choose among
                :attr:`alternatives` (:meth:`shapes_for`); None offers every shape.
        """
        shapes = self.shapes_for(commands)
        name = yield _options(f" {w}" for w in self.name_words)
        for _ in range(self.max_name_words - 1):
            piece = yield _options([*(f"_{w}" for w in self.name_words), "("])
            if piece == "(":
                break
            name += piece
        else:
            yield [Option("(", False)]
        params = [(yield _options(self.param_names))]
        while len(params) < min(self.max_params, len(self.param_names)):
            piece = yield _options([*(f", {p}" for p in self.param_names if p not in params), "):\n"])
            if piece == "):\n":
                break
            params.append(piece[2:])
        else:
            yield [Option("):\n", False)]
        callable_ = [(n, tuple(p)) for n, p in library if n != name.strip()]
        yield from self._body(shapes, params, callable_, arguments)
        yield [Option(f" {name.strip()}(", False)]
        yield from arguments_plan([arguments(param) for param in params])

    def accepts(self, text: str, library: Sequence[Signature] = (), commands: Collection[str] | None = None) -> bool:
        """Whether :meth:`plan` can write ``text`` (a definition, comments and blank lines removed, + its call).

        Any argument value of the text's call lines is taken as one :meth:`plan`'s ``arguments`` offers;
        ``library`` and ``commands`` are as for :meth:`plan`.
        """
        lines = [line.split("#", 1)[0].rstrip() for line in text.strip().splitlines()]
        text = "\n".join(line for line in lines if line.strip())
        values = [
            value.strip()
            for line in lines
            if line.strip().startswith("call ")
            for value in line.partition("(")[2].rpartition(")")[0].split(",")
            if not _PLACEHOLDER.fullmatch(value.strip())
        ]
        plan, rest = self.plan(lambda _param: values, library, commands), text.removeprefix("skill")
        if rest == text:
            return False
        options = next(plan)
        while True:
            taken = [o for o in options if rest.startswith(o.text)]  # options are prefix-free: at most one
            if not taken:
                return False
            rest = rest[len(taken[0].text) :]
            if taken[0].ends:
                return rest == ""
            options = plan.send(taken[0].text)

    def _body(
        self,
        shapes: Sequence[str],
        params: list[str],
        library: Sequence[Signature],
        arguments: Callable[[str], Sequence[str]],
    ) -> Plan:
        """The body's lines; ends having taken ``call`` (the trailing call line's first word)."""
        scopes: list[list[str]] = [[]]  # loop variables of each open block; scopes[d - 1] holds depth d's
        loops: list[bool] = [False]  # whether each open block is (inside) a for loop
        opened, lines = True, 0  # the previous line opened a block (the header opens the body)
        while True:
            depth = len(scopes)
            left = self.max_body_lines - lines
            starts: dict[str, tuple[str, int]] = {}
            for d in ([depth] if opened else range(1, depth + 1)) if left else ():
                variables = [v for scope in scopes[:d] for v in scope]
                can_open = left > 1 and d < self.max_depth
                heads = self._heads(shapes, variables, in_loop=loops[d - 1], can_open=can_open, can_call=bool(library))
                for head in heads:
                    if head:
                        starts[f"{INDENT * d}{head}"] = (head, d)
                    else:  # a shape whose verb is a slot ("{how} {food} with {knife}"): its value starts the line
                        starts.update({f"{INDENT * d}{{{v}}}": ("", d) for v in [*params, *variables]})
            if not opened or not left:
                starts["call"] = ("call", 0)
            # Ending the body and writing one more line are two kinds of step: greedy decoding weighs the end
            # against all the line starts together (decoding._likeliest), as it weighs a turn's kinds of action.
            start = yield [Option(text, False, "end" if text == "call" else "line") for text in starts]
            head, d = starts[start]
            if d == 0:  # the trailing call
                return
            del scopes[d:], loops[d:]
            variables = [v for scope in scopes for v in scope]
            opened = head in ("for", "if")
            if head == "for":
                var = yield _options(f" {c[0]}" for c in self.collections if c[0] not in variables)
                yield [Option(" in", False)]
                yield _options(f" {c}:\n" for c in self.collections if c[0] == var.strip())
                scopes.append([var.strip()])
                loops.append(True)
            elif head == "if":
                values = [*params, *variables]
                needle = yield _options(
                    [
                        *(f' "{t}"' for t in self.observation_tests),
                        *(f' "{{{p}}}"' for p in values),
                        *(f' " {{{p}}} "' for p in params),
                    ]  # fmt: skip
                )
                yield _options([" in", " not in"])
                haystacks = [" observation:\n"]
                if needle.startswith(' " {'):  # " {param} " in " {loopvar} ": is this entity of the named type?
                    haystacks += [f' " {{{v}}} ":\n' for v in variables]
                yield _options(haystacks)
                scopes.append([])
                loops.append(loops[-1])
            elif head == "call":
                yield from _nested_call(library, [*params, *variables], arguments)
            elif head not in ("return\n", "break\n"):
                yield from _command(shapes, head, [*params, *variables], first_slot_taken=not head)
            lines += 1

    def _heads(
        self, shapes: Sequence[str], variables: list[str], *, in_loop: bool, can_open: bool, can_call: bool
    ) -> list[str]:
        """First words of the statements allowed at a depth (a command shape's fixed text up to its first slot)."""
        heads = [_head(shape) for shape in shapes] + ["call"] * can_call
        if can_open:
            heads += ["if"] + (["for"] if any(c[0] not in variables for c in self.collections) else [])
        heads.append("return\n")
        if in_loop:
            heads.append("break\n")
        return list(dict.fromkeys(heads))


_SLOT = object()


def _command(shapes: Sequence[str], head: str, values: list[str], first_slot_taken: bool = False) -> Plan:
    """The rest of a command line after ``head``: each slot a `` {value}``, then the shape's next text.

    ``first_slot_taken``: the line's start held the first slot's value (a shape with an empty ``head``).
    """
    alive = [_pieces(shape) for shape in shapes if _head(shape) == head]
    for i in range(int(first_slot_taken), max(len(p) for p in alive)):
        if alive[0][i] is _SLOT:  # shapes of one head share their slots until their texts differ
            yield _options(f" {{{v}}}" for v in values)
            continue
        text = yield _options(p[i] for p in alive)
        alive = [p for p in alive if p[i] == text]
        if text.endswith("\n"):
            return


def _shape_pattern(shape: str) -> re.Pattern[str]:
    """A regex that matches the commands of ``shape`` (each ``{}`` one or more characters)."""
    return re.compile(".+".join(map(re.escape, shape.split("{}"))))


def _nested_call(library: Sequence[Signature], values: list[str], arguments: Callable[[str], Sequence[str]]) -> Plan:
    """A body's ``call`` statement after its first word: a library skill, then one argument per parameter.

    An argument is a placeholder in scope (``{obj}``) or an entity name that ``arguments`` offers for the
    callee's parameter; written ``NAME(a,`` `` b)``, as a trailing call, the last closing the line.
    """
    openings = {f" {name}(" if params else f" {name}()\n": params for name, params in library}
    opening = yield _options(openings)
    params = openings[opening]
    for i, param in enumerate(params):
        end = ")\n" if i == len(params) - 1 else ","
        choices = [*(f"{{{v}}}" for v in values), *arguments(param)]
        yield _options(f"{' ' if i else ''}{choice}{end}" for choice in choices)


def _head(shape: str) -> str:
    """A command shape's first words: its text up to the first slot (``take`` of ``take {} from {}``)."""
    return shape.split("{}", 1)[0].rstrip()


def _pieces(shape: str) -> list[object]:
    """What follows a shape's head: ``_SLOT`` per slot and the texts between (`` from``), ending in a newline."""
    texts = shape.split("{}")
    pieces: list[object] = []
    for i, text in enumerate(texts[1:]):
        pieces.append(_SLOT)
        last = i == len(texts) - 2
        if text.strip() or last:
            pieces.append(text.rstrip() + "\n" if last else text.rstrip())
    return pieces or ["\n"]


def _options(texts: Iterable[str]) -> list[Option]:
    """Non-ending options of one choice, in order, without duplicates."""
    return [Option(text, False) for text in dict.fromkeys(texts)]
