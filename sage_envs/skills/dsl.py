"""The skill program language: a small, line-based, deterministic DSL, parsed and interpreted here.

Program text is data: it is parsed by a recursive-descent parser over lines into a tree of frozen statements
and interpreted by walking that tree. Nothing here hands program text to ``eval``, ``exec``, ``compile`` or an
import machinery. The grammar, with examples, is in ``docs/skills.md``::

    definition := "skill" NAME "(" [PARAM {"," PARAM}] "):" NEWLINE block {call_line}
    block      := INDENT statement {statement} DEDENT
    statement  := "for" VAR "in" COLLECTION ":" block
                | "if" test ":" block ["else:" block]
                | "call" NAME "(" [ARG {"," ARG}] ")"
                | "break" | "return" | "#" comment | command
    test       := STRING ["not"] "in" ("observation" | STRING)

``{param}`` / ``{loopvar}`` placeholders in commands, call arguments and strings are substituted at run time.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sage_envs.error import (
    InvalidConfigError,
    SkillError,
    SkillLimitError,
    SkillSyntaxError,
    UnknownSkillError,
    suggest,
)
from sage_envs.skills.skill import MAX_DESCRIPTION_CHARS, Skill, name_problem

if TYPE_CHECKING:  # annotations only: the library imports this module, so a run-time import would be circular
    from sage_envs.skills.library import SkillLibrary

MAX_BLOCK_DEPTH = 8
"""How deeply ``for`` / ``if`` blocks may nest; bounds the parser's and interpreter's recursion."""
MAX_CALL_DEPTH_CAP = 16
"""The largest ``Limits.max_call_depth`` accepted; bounds the interpreter's recursion."""
TEXT_CHARS_PER_STATEMENT = 1000
"""A statement counts once more against ``max_statements_per_turn`` per this many characters it substitutes or
searches (a test on 4000-character texts costs ~50 us against ~3 us for a short one)."""

_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_HEADER_RE = re.compile(r"skill\s+(?P<name>[^\s(]+)\s*\((?P<params>[^()]*)\)\s*(?P<colon>:?)")
_CALL_RE = re.compile(r"call\s+(?P<name>[^\s(]+)\s*\((?P<args>.*)\)")
_FOR_RE = re.compile(r"for\s+(?P<var>\S+)\s+in\s+(?P<coll>[^\s:]+)\s*(?P<colon>:?)")
_IF_RE = re.compile(r"if\s+(?P<test>.*?)\s*(?P<colon>:?)")
_TEST_RE = re.compile(
    r"(?P<q1>[\"'])(?P<needle>.*?)(?P=q1)\s+(?P<neg>not\s+)?in\s+"
    r"(?:(?P<obs>observation)|(?P<q2>[\"'])(?P<hay>.*?)(?P=q2))"
)
_PLACEHOLDER_RE = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True)
class Limits:
    """Hard limits on programs and turns; every violation is an invalid action with a clear message.

    The run-time limits are per turn: one turn's skill calls (a plain call, or every trailing call of a definition)
    and all the calls nested in them share one budget of statements, primitive steps and loop iterations.
    """

    max_primitive_steps_per_call: int = 60
    """Primitive commands one turn may execute, all its calls (trailing and nested) together."""
    max_call_depth: int = 4
    """Nesting of calls; the top-level call is depth 1 (this also stops unbounded recursion)."""
    max_program_lines: int = 60
    """Non-blank lines of a definition text (header, body, comments and trailing calls)."""
    max_program_chars: int = 4000
    """Characters of a definition text; also caps any text built by substitution at run time."""
    max_loop_iterations: int = 200
    """``for`` iterations one turn may run, all its calls, nested loops included, together."""
    max_statements_per_turn: int = 1000
    """Statements one turn may execute: every command, call, for, if, break, return and call line (long texts more)."""

    def __post_init__(self) -> None:
        for name in (
            "max_primitive_steps_per_call",
            "max_call_depth",
            "max_program_lines",
            "max_program_chars",
            "max_loop_iterations",
            "max_statements_per_turn",
        ):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise InvalidConfigError(f"Limits.{name}={value!r}; use a positive int.")
        if self.max_call_depth > MAX_CALL_DEPTH_CAP:
            raise InvalidConfigError(
                f"Limits.max_call_depth={self.max_call_depth}; at most {MAX_CALL_DEPTH_CAP} is supported."
            )


# ---------------------------------------------------------------- syntax tree (immutable: parses are cached)
Template = tuple[str, ...]
"""Literal text at even indices, placeholder names at odd indices: ``("go to ", "r", "")``."""


@dataclass(frozen=True)
class _Command:
    line: int
    text: Template


@dataclass(frozen=True)
class _Call:
    line: int
    name: str
    args: tuple[Template, ...]


@dataclass(frozen=True)
class _For:
    line: int
    var: str
    collection: str
    body: tuple[_Statement, ...]


@dataclass(frozen=True)
class _If:
    line: int
    needle: Template
    haystack: Template | None  # None: the observation
    negate: bool
    then: tuple[_Statement, ...]
    orelse: tuple[_Statement, ...]


@dataclass(frozen=True)
class _Break:
    line: int


@dataclass(frozen=True)
class _Return:
    line: int


_Statement = _Command | _Call | _For | _If | _Break | _Return


@dataclass(frozen=True)
class _Program:
    name: str
    params: tuple[str, ...]
    description: str
    source: str
    body: tuple[_Statement, ...]
    calls: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class _Line:
    number: int  # 1-based line number in the parsed text
    indent: int
    text: str  # stripped content


# ---------------------------------------------------------------- parser
def _error(number: int, reason: str) -> SkillSyntaxError:
    return SkillSyntaxError(f"line {number}: {reason}")


def _split_lines(text: str) -> tuple[list[str], list[_Line]]:
    """Return the raw lines (right-stripped) and the non-blank lines with their indentation."""
    raw = [line.rstrip() for line in text.splitlines()]
    lines = []
    for number, line in enumerate(raw, 1):
        if not line:
            continue
        content = line.lstrip(" ")
        if content[0].isspace():  # tabs and exotic spaces make indentation ambiguous
            raise _error(number, "indent with spaces only (no tabs)")
        lines.append(_Line(number, len(line) - len(content), content))
    return raw, lines


def _template(text: str, scope: Sequence[str], number: int) -> Template:
    """Split ``text`` on ``{name}`` placeholders; each must name a param or loop variable in scope."""
    parts: list[str] = []
    position = 0
    for match in _PLACEHOLDER_RE.finditer(text):
        parts.append(text[position : match.start()])
        key = match.group(1)
        if key not in scope:
            known = ", ".join("{" + s + "}" for s in scope) or "none"
            raise _error(number, f"unknown placeholder {{{key[:40]}}} (known: {known}).{suggest(key, scope)}")
        parts.append(key)
        position = match.end()
    parts.append(text[position:])
    if any("{" in part or "}" in part for part in parts[::2]):
        raise _error(number, "unmatched '{' or '}': braces only wrap placeholders such as {obj}")
    return tuple(parts)


def _split_args(text: str, number: int) -> list[str]:
    """Split a call's argument text on commas; ``""`` means no arguments."""
    if not text.strip():
        return []
    args = [arg.strip() for arg in text.split(",")]
    if not all(args):
        raise _error(number, "empty item in a comma-separated list (two commas in a row or a trailing comma)")
    return args


def parse_call(line: str) -> tuple[str, list[str]]:
    """Parse one ``call NAME(arg, arg)`` line.

    Arguments are raw text split on commas and stripped; ``{x}`` placeholders are left as they are.

    Args:
        line: the line, e.g. ``call heat_then_place(apple 1, countertop 1)``.

    Returns:
        ``(name, args)``, e.g. ``("heat_then_place", ["apple 1", "countertop 1"])``.

    Raises:
        SkillSyntaxError: the line is not a well-formed call or the name is invalid.
    """
    return _parse_call(line, 1)


def _parse_call(line: str, number: int) -> tuple[str, list[str]]:
    text = line.strip()
    if "\n" in text or "\r" in text:
        raise _error(number, "a call is one line: 'call NAME(arg, arg)'")
    if not re.match(r"call\s", text):
        raise _error(number, f"expected 'call NAME(arg, arg)', got {text[:60]!r}")
    match = _CALL_RE.fullmatch(text)
    if match is None:
        if "(" not in text:
            raise _error(number, "a call needs parentheses: 'call NAME(arg, arg)' (use 'call NAME()' for none)")
        raise _error(number, "a call must end with ')': 'call NAME(arg, arg)'")
    problem = name_problem(match["name"])
    if problem:
        raise _error(number, problem)
    return match["name"], _split_args(match["args"], number)


def _is_else(text: str) -> bool:
    return text.split(None, 1)[0] in ("else", "else:")


class _BlockParser:
    """Recursive descent over the indented, comment-free body lines of one definition."""

    def __init__(self, lines: list[_Line]):
        self.lines = lines
        self.position = 0

    def block(self, indent: int, scope: tuple[str, ...], in_loop: bool, depth: int) -> tuple[_Statement, ...]:
        """Parse statements at exactly ``indent`` until a line indented less (or the end)."""
        if depth > MAX_BLOCK_DEPTH:
            raise SkillLimitError(
                f"line {self.lines[self.position].number}: blocks nest deeper than {MAX_BLOCK_DEPTH} levels"
            )
        statements: list[_Statement] = []
        while self.position < len(self.lines):
            line = self.lines[self.position]
            if line.indent < indent:
                break
            if line.indent > indent:
                raise _error(line.number, "unexpected indent")
            self.position += 1
            statements.append(self.statement(line, scope, in_loop, depth))
        return tuple(statements)

    def child(self, header: _Line, scope: tuple[str, ...], in_loop: bool, depth: int) -> tuple[_Statement, ...]:
        """Parse the block indented under ``header`` and check the dedent that ends it."""
        if self.position >= len(self.lines) or self.lines[self.position].indent <= header.indent:
            raise _error(header.number, f"expected an indented block after {header.text[:60]!r}")
        indent = self.lines[self.position].indent
        body = self.block(indent, scope, in_loop, depth + 1)
        if self.position < len(self.lines) and self.lines[self.position].indent > header.indent:
            raise _error(self.lines[self.position].number, "unindent does not match any outer indentation level")
        return body

    def statement(self, line: _Line, scope: tuple[str, ...], in_loop: bool, depth: int) -> _Statement:
        """Parse one statement (and, for blocks, its body)."""
        text, number = line.text, line.number
        keyword = text.split(None, 1)[0]
        if text == "break":
            if not in_loop:
                raise _error(number, "'break' outside a for loop")
            return _Break(number)
        if text == "return":
            return _Return(number)
        if keyword in ("break", "return"):
            raise _error(number, f"'{keyword}' takes nothing after it")
        if keyword == "for":
            match = _FOR_RE.fullmatch(text)
            if match is None:
                raise _error(number, "expected 'for VAR in COLLECTION:'")
            if not match["colon"]:
                raise _error(number, "missing ':' at the end of the for line")
            var, collection = match["var"], match["coll"]
            for what, value in (("loop variable", var), ("collection", collection)):
                if not _IDENT_RE.fullmatch(value):
                    raise _error(number, f"{what} {value[:40]!r} must be an identifier")
            if var in scope:
                raise _error(number, f"loop variable {var!r} shadows a parameter or an outer loop variable")
            return _For(number, var, collection, self.child(line, (*scope, var), True, depth))
        if keyword == "if":
            match = _IF_RE.fullmatch(text)
            if match is None:
                raise _error(number, "expected 'if TEST:'")
            if not match["colon"]:
                raise _error(number, "missing ':' at the end of the if line")
            test = _TEST_RE.fullmatch(match["test"])
            if test is None:
                raise _error(
                    number,
                    "expected 'if \"TEXT\" in observation:', 'if \"TEXT\" not in observation:' or "
                    '\'if "TEXT" in "TEXT2":\'',
                )
            needle = _template(test["needle"], scope, number)
            haystack = None if test["obs"] else _template(test["hay"], scope, number)
            then = self.child(line, scope, in_loop, depth)
            orelse: tuple[_Statement, ...] = ()
            following = self.lines[self.position] if self.position < len(self.lines) else None
            if following is not None and following.indent == line.indent and _is_else(following.text):
                if following.text.replace(" ", "") != "else:":
                    raise _error(following.number, "expected 'else:' alone on its line")
                self.position += 1
                orelse = self.child(following, scope, in_loop, depth)
            return _If(number, needle, haystack, bool(test["neg"]), then, orelse)
        if keyword in ("else", "else:") or text.startswith("else:"):
            raise _error(number, "'else' without a matching 'if' at the same indentation")
        if keyword in ("elif", "while", "def", "skill", "import", "with", "try"):
            raise _error(number, f"'{keyword}' is not part of the skill language (see docs/skills.md)")
        if keyword == "call":
            name, args = _parse_call(text, number)
            return _Call(number, name, tuple(_template(arg, scope, number) for arg in args))
        if text.endswith(":"):
            raise _error(number, "unknown block: blocks are 'for VAR in COLLECTION:', 'if TEST:' and 'else:'")
        return _Command(number, _template(text, scope, number))


@functools.lru_cache(maxsize=512)
def _parse(text: str, limits: Limits) -> _Program:
    """Parse a definition text into an immutable program (cached: library sources are re-parsed per call)."""
    if len(text) > limits.max_program_chars:
        raise SkillLimitError(f"the definition has {len(text)} characters; the limit is {limits.max_program_chars}")
    raw, lines = _split_lines(text)
    if len(lines) > limits.max_program_lines:
        raise SkillLimitError(f"the definition has {len(lines)} lines; the limit is {limits.max_program_lines}")
    if not lines:
        raise SkillSyntaxError("empty definition: expected 'skill NAME(params):' and an indented body")
    head = lines[0]
    if head.indent:
        raise _error(head.number, "the 'skill NAME(params):' line must not be indented")
    if not head.text.startswith("skill "):
        raise _error(head.number, "a definition starts with 'skill NAME(params):'")
    match = _HEADER_RE.fullmatch(head.text)
    if match is None:
        raise _error(head.number, "expected 'skill NAME(param, param):'")
    if not match["colon"]:
        raise _error(head.number, "missing ':' at the end of the skill line")
    name = match["name"]
    problem = name_problem(name)
    if problem:
        raise _error(head.number, problem)
    params = tuple(_split_args(match["params"], head.number))
    for param in params:
        if not _IDENT_RE.fullmatch(param):
            raise _error(head.number, f"parameter {param[:40]!r} must be an identifier such as obj or place")
    if len(set(params)) != len(params):
        raise _error(head.number, "a parameter name is repeated")

    end = 1
    while end < len(lines) and lines[end].indent > 0:
        end += 1
    body_lines, tail = lines[1:end], lines[end:]
    description_lines = []
    for line in body_lines:
        if not line.text.startswith("#"):
            break
        description_lines.append(line.text.lstrip("#").strip())
    description = " ".join(d for d in description_lines if d)
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillLimitError(
            f"the description comment has {len(description)} characters; the limit is {MAX_DESCRIPTION_CHARS}"
        )
    statements = [line for line in body_lines if not line.text.startswith("#")]
    if not statements:
        raise _error(head.number, "expected an indented body with at least one statement")
    parser = _BlockParser(statements)
    body = parser.block(statements[0].indent, params, False, 1)
    if parser.position < len(statements):
        raise _error(statements[parser.position].number, "unindent does not match any outer indentation level")

    calls = []
    for line in tail:
        if line.text.startswith("#"):
            continue
        if not line.text.startswith("call"):
            raise _error(line.number, "after the skill body only unindented 'call NAME(args)' lines may follow")
        call_name, args = _parse_call(line.text, line.number)
        calls.append((call_name, tuple(args)))
    source = "\n".join(raw[head.number - 1 : body_lines[-1].number])
    return _Program(name, params, description, source, body, tuple(calls))


def parse_definition(text: str, limits: Limits = Limits()) -> tuple[Skill, list[tuple[str, list[str]]]]:  # noqa: B008
    """Parse a skill definition, optionally followed by unindented ``call NAME(args)`` lines.

    Args:
        text: ``skill NAME(params):`` then an indented body, then zero or more call lines. Leading comment
            lines of the body become the description.
        limits: size limits to enforce.

    Returns:
        A program :class:`Skill` (name, params, description, ``source`` = the definition without the trailing
        calls) and the trailing calls as ``(name, args)`` pairs.

    Raises:
        SkillSyntaxError: the text does not parse (the message names the line and the reason).
        SkillLimitError: the text exceeds a size limit.
    """
    if not isinstance(text, str):
        raise SkillSyntaxError(f"a definition must be text, got {type(text).__name__}")
    program = _parse(text, limits)
    skill = Skill(
        name=program.name,
        kind="program",
        description=program.description,
        params=program.params,
        source=program.source,
    )
    return skill, [(name, list(args)) for name, args in program.calls]


# ---------------------------------------------------------------- interpreter
@dataclass
class CallResult:
    """What one turn's skill calls did (one call, or a definition's trailing calls), nested calls included."""

    trace: list[tuple[str, str]] = field(default_factory=list)
    """``(command, feedback)`` for every primitive executed, in order."""
    skills_called: list[str] = field(default_factory=list)
    """Every skill entered, top-level and nested, in call order (with repeats)."""
    primitive_steps: int = 0
    """Primitive commands executed (``len(trace)``)."""
    statements: int = 0
    """Statements executed, counted against ``Limits.max_statements_per_turn`` (each call line counts one)."""
    error: str | None = None
    """None on success, else why the turn stopped (steps already executed stay in ``trace``)."""
    done: bool = False
    """The turn stopped because ``execute`` reported the task ended."""


class _Stop(Exception):
    """Ends the whole turn: with an error message, or with ``error=None`` when the task is done."""

    def __init__(self, error: str | None):
        super().__init__(error)
        self.error = error


class _BreakSignal(Exception):
    """Leaves the innermost for loop."""


class _ReturnSignal(Exception):
    """Leaves the current skill, back to its caller."""


class _Interpreter:
    """Walks parsed programs; one instance per turn, holding that turn's counters (one budget for all its calls)."""

    def __init__(
        self,
        library: SkillLibrary,
        execute: Callable[[str], tuple[str, bool]],
        entities: Callable[[], Mapping[str, Sequence[str]]],
        limits: Limits,
        pending: Skill | None,
    ):
        self.library = library
        self.execute = execute
        self.entities = entities
        self.limits = limits
        self.pending = pending
        self.result = CallResult()
        self.iterations = 0
        self.observation = ""  # feedback of the most recent primitive of this turn
        # The collections can only change when a primitive runs, so loops between two primitives share one read
        # (nested loops would otherwise ask the engine once per outer iteration).
        self.collections: Mapping[str, Sequence[str]] | None = None

    def count(self, where: str, cost: int = 1) -> None:
        """Count ``cost`` statements (one statement or call line, or its long texts) against the turn's budget."""
        if self.result.statements + cost > self.limits.max_statements_per_turn:
            raise _Stop(
                f"{where}: statement limit reached ({self.limits.max_statements_per_turn} per turn, calls and loop "
                f"bodies included; a text counts once more per {TEXT_CHARS_PER_STATEMENT} characters)"
            )
        self.result.statements += cost

    def lookup(self, name: str) -> Skill:
        """The latest version of ``name``: the pending definition first, then the library."""
        if self.pending is not None and name == self.pending.name:
            return self.pending
        try:
            return self.library.get(name)
        except UnknownSkillError as error:
            if self.pending is None:
                raise _Stop(str(error)) from None
            known = [*self.library.names(), self.pending.name]
            raise _Stop(f"unknown skill {name!r} (known: {', '.join(known)}).{suggest(name, known)}") from None

    def call(self, name: str, args: list[str], depth: int) -> None:
        """Enter skill ``name`` with ``args`` at call depth ``depth`` (1 = top level)."""
        if depth > self.limits.max_call_depth:
            raise _Stop(
                f"calling {name!r} would exceed the call depth limit ({self.limits.max_call_depth}); "
                "is the skill recursive?"
            )
        skill = self.lookup(name)
        if skill.kind != "program":
            raise _Stop(f"{name!r} is a guidance skill; only program skills can be called")
        try:
            program = _parse(skill.source, self.limits)
        except SkillError as error:
            raise _Stop(f"skill {name!r} (version {skill.version}) does not parse: {error}") from None
        if len(args) != len(program.params):
            raise _Stop(f"{skill.signature} takes {len(program.params)} argument(s), got {len(args)}: {args!r}")
        self.result.skills_called.append(name)
        try:
            self.block(program.body, dict(zip(program.params, args, strict=True)), name, depth)
        except _ReturnSignal:
            pass

    def substitute(self, template: Template, env: Mapping[str, str], where: str) -> str:
        """Fill a template's placeholders; the result may not exceed ``max_program_chars``."""
        pieces = [part if i % 2 == 0 else env[part] for i, part in enumerate(template)]
        size = sum(map(len, pieces))
        # Arguments feed arguments, so without this cap nested calls could grow text exponentially.
        if size > self.limits.max_program_chars:
            raise _Stop(f"{where}: substituted text exceeds {self.limits.max_program_chars} characters")
        if size >= TEXT_CHARS_PER_STATEMENT:
            self.count(where, size // TEXT_CHARS_PER_STATEMENT)
        return "".join(pieces)

    def block(self, statements: tuple[_Statement, ...], env: dict[str, str], name: str, depth: int) -> None:
        """Run statements in order, each counted against the turn's statement budget."""
        for statement in statements:
            where = f"skill {name!r} line {statement.line}"
            self.count(where)
            if isinstance(statement, _Command):
                self.command(self.substitute(statement.text, env, where), where)
            elif isinstance(statement, _Call):
                args = [self.substitute(arg, env, where) for arg in statement.args]
                self.call(statement.name, args, depth + 1)
            elif isinstance(statement, _For):
                self.loop(statement, env, name, depth, where)
            elif isinstance(statement, _If):
                needle = self.substitute(statement.needle, env, where)
                if statement.haystack is None:
                    haystack = self.observation
                    if len(haystack) >= TEXT_CHARS_PER_STATEMENT:
                        self.count(where, len(haystack) // TEXT_CHARS_PER_STATEMENT)
                else:
                    haystack = self.substitute(statement.haystack, env, where)
                branch = (needle in haystack) != statement.negate
                self.block(statement.then if branch else statement.orelse, env, name, depth)
            elif isinstance(statement, _Break):
                raise _BreakSignal
            else:
                raise _ReturnSignal

    def command(self, command: str, where: str) -> None:
        """Execute one primitive command, enforcing the per-turn step limit."""
        if self.result.primitive_steps >= self.limits.max_primitive_steps_per_call:
            raise _Stop(
                f"{where}: primitive step limit reached ({self.limits.max_primitive_steps_per_call} per turn, "
                "all calls together)"
            )
        feedback, done = self.execute(command)
        self.collections = None
        self.result.trace.append((command, feedback))
        self.result.primitive_steps += 1
        self.observation = feedback
        if done:
            raise _Stop(None)

    def loop(self, statement: _For, env: dict[str, str], name: str, depth: int, where: str) -> None:
        """Run a for loop over a domain collection as it is now (the world may have changed since the turn began)."""
        if self.collections is None:
            self.collections = self.entities()
        collections = self.collections
        if statement.collection not in collections:
            known = ", ".join(sorted(collections)) or "none"
            raise _Stop(
                f"{where}: unknown collection {statement.collection!r} (known: {known})."
                f"{suggest(statement.collection, collections)}"
            )
        for item in tuple(collections[statement.collection]):
            self.iterations += 1
            if self.iterations > self.limits.max_loop_iterations:
                raise _Stop(
                    f"{where}: loop iteration limit reached ({self.limits.max_loop_iterations} per turn, "
                    "all loops together)"
                )
            try:
                self.block(statement.body, {**env, statement.var: str(item)}, name, depth)
            except _BreakSignal:
                break


def run_calls(
    library: SkillLibrary,
    calls: Sequence[tuple[str, Sequence[str]]],
    *,
    execute: Callable[[str], tuple[str, bool]],
    entities: Callable[[], Mapping[str, Sequence[str]]],
    limits: Limits = Limits(),  # noqa: B008
    pending: Skill | None = None,
) -> CallResult:
    """Run one turn's program-skill calls in order, under one budget, executing primitives through ``execute``.

    Every call line, every executed statement and every nested call counts against the turn's
    ``max_statements_per_turn``; primitive steps, loop iterations and statements are counted over all the calls
    together, so splitting work across call lines gains nothing. The first error or the task ending stops the turn.

    The library is not modified (the caller counts uses with :meth:`SkillLibrary.record_use` and stores
    definitions). Every skill is re-parsed from its current ``source`` (parses are cached by source text).

    Args:
        library: where skills are looked up, by latest version.
        calls: ``(name, args)`` pairs, e.g. the trailing calls of a definition, or one call.
        execute: runs one primitive command and returns ``(feedback, task_done)``.
        entities: returns the domain's named entity collections; read when a ``for`` loop starts (again only
            after a primitive has run since the last read).
        limits: the hard limits.
        pending: a definition not stored yet (a definition's trailing calls try it before it is stored): calls
            of its name run it instead of the library's version.

    Returns:
        A :class:`CallResult`. Runtime violations (unknown skill or collection, wrong argument count, depth,
        statement, step or loop-iteration limit) set ``error`` and stop the turn; ``task_done`` stops it with
        ``done=True`` and no error. Commands executed before a stop stay in ``trace``.
    """
    interpreter = _Interpreter(library, execute, entities, limits, pending)
    try:
        for position, (name, args) in enumerate(calls, 1):
            interpreter.count(f"call line {position} ({name})")
            interpreter.call(name, list(args), 1)
    except _Stop as stop:
        interpreter.result.error = stop.error
        interpreter.result.done = stop.error is None
    return interpreter.result


def run_call(
    library: SkillLibrary,
    name: str,
    args: list[str],
    *,
    execute: Callable[[str], tuple[str, bool]],
    entities: Callable[[], Mapping[str, Sequence[str]]],
    limits: Limits = Limits(),  # noqa: B008
) -> CallResult:
    """Run program skill ``name`` with ``args`` as a turn of its own: :func:`run_calls` with one call.

    Args:
        library: where skills are looked up, by latest version.
        name: the skill to call.
        args: its arguments, one per parameter.
        execute: runs one primitive command and returns ``(feedback, task_done)``.
        entities: returns the domain's named entity collections (see :func:`run_calls`).
        limits: the hard limits.

    Returns:
        A :class:`CallResult` (see :func:`run_calls`).
    """
    return run_calls(library, [(name, args)], execute=execute, entities=entities, limits=limits)
