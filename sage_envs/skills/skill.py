"""One skill version (:class:`Skill`) and the rules its fields follow: names, regex patterns, sizes.

This is the bottom of :mod:`sage_envs.skills`: the DSL (:mod:`~sage_envs.skills.dsl`), SKILL.md folders
(:mod:`~sage_envs.skills.skillmd`) and the library (:mod:`~sage_envs.skills.library`) build on it, and it imports
none of them. The one thing a Skill needs from above, the DSL parser that :meth:`Skill.from_dict` checks program
sources with, is handed in by the package (:func:`set_source_parser`). Every name here is also importable from
:mod:`sage_envs.skills.library`, where it lived first.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from sage_envs.error import SkillError

try:
    from re import _parser as _sre_parse  # Python >= 3.11
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre_parse  # type: ignore[no-redef]

KINDS = ("program", "guidance")
TRIGGERS = ("general", "beginning", "action_pattern")
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_TEXT_CHARS = 2000
MAX_PATTERN_CHARS = 200
MAX_PROVENANCE_FIELDS = 32
MAX_PROVENANCE_VALUE_CHARS = 1024
MAX_PATTERN_REPEATS = 2
MAX_PATTERN_ALTERNATIVES = 16
MAX_MATCHED_ACTION_CHARS = 200
"""An ``action_pattern`` regex only sees this many leading characters of the last action (bounds its time)."""

_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_PARAM_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_STATUS_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")
_PROVENANCE_KEY_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_edits = 0
"""Counts changes to skills (any field but ``uses`` set on any :class:`Skill`) and to libraries' membership.

:meth:`SkillLibrary.render` caches its text under this count, so a skill edited in place (``skill.description = ...``,
``skill.status = "pruned"``) shows up on the next render, with no version counter to keep in sync by hand."""

_source_parser: Callable[[str], tuple[Skill, list[tuple[str, list[str]]]]] | None = None
"""The DSL's :func:`~sage_envs.skills.dsl.parse_definition`, set by :func:`set_source_parser`."""

_REPEAT_OPS = tuple(
    getattr(_sre_parse, op) for op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") if hasattr(_sre_parse, op)
)


def edit_count() -> int:
    """Return the number of skill and library edits so far in this process (the render cache's key)."""
    return _edits


def record_edit() -> None:
    """Count one edit: a library gained, lost or replaced a skill (field changes count themselves)."""
    global _edits
    _edits += 1


def set_source_parser(parse: Callable[[str], tuple[Skill, list[tuple[str, list[str]]]]]) -> None:
    """Hand in the DSL parser that :meth:`Skill.from_dict` checks program sources with.

    The DSL builds Skills, so this module cannot import it without an import circle; :mod:`sage_envs.skills`
    calls this once with :func:`~sage_envs.skills.dsl.parse_definition`. Python runs that package before any of
    its modules, so no Skill is ever read without it.

    Args:
        parse: ``parse_definition``: definition text to ``(program skill, trailing calls)``.
    """
    global _source_parser
    _source_parser = parse


def name_problem(name: object) -> str | None:
    """Say why ``name`` is not a valid internal skill name, or return None when it is.

    Internal names are ``^[a-z][a-z0-9_]{0,63}$`` without ``__`` and without a trailing ``_``: the extra two
    rules make every name map to a valid Agent Skills folder name (``_`` -> ``-``).

    Args:
        name: the candidate name.

    Returns:
        A short reason, or None.
    """
    if not isinstance(name, str):
        return f"a skill name must be a string, got {type(name).__name__}"
    if "-" in name and _NAME_RE.fullmatch(name.replace("-", "_")):
        return f"skill names use underscores, not hyphens: write {name.replace('-', '_')!r}"
    if not _NAME_RE.fullmatch(name):
        return (
            f"invalid skill name {name[:80]!r}: use 1-64 lowercase letters, digits and underscores, "
            "starting with a letter"
        )
    if "__" in name or name.endswith("_"):
        return f"invalid skill name {name!r}: no double underscore and no trailing underscore"
    return None


def _regex_shape(subpattern: Any, inside_repeat: bool) -> tuple[int, int]:
    """Return (variable repeats, product of alternatives) of a parsed regex: the factors of its worst case.

    Raises:
        ValueError: a repeat holds another repeat or an alternation (exponential backtracking).
    """
    repeats, alternatives = 0, 1
    for op, av in subpattern:
        if op in _REPEAT_OPS:
            low, high, body = av
            if high > 1 and inside_repeat:
                raise ValueError("repeats a group that itself repeats")
            inner_repeats, inner_alternatives = _regex_shape(body, inside_repeat or high > 1)
            repeats += inner_repeats + (low != high)
            alternatives *= inner_alternatives
        elif op == _sre_parse.BRANCH:
            if inside_repeat:
                raise ValueError("repeats an alternation")
            shapes = [_regex_shape(branch, inside_repeat) for branch in av[1]]
            repeats += max(r for r, _ in shapes)
            alternatives *= sum(a for _, a in shapes)
        else:
            for child in _subpatterns(av):
                inner_repeats, inner_alternatives = _regex_shape(child, inside_repeat)
                repeats += inner_repeats
                alternatives *= inner_alternatives
    return repeats, alternatives


def _subpatterns(value: Any) -> Iterator[Any]:
    """Yield the parsed sub-patterns held in a regex node's argument (groups, branches, assertions)."""
    if isinstance(value, _sre_parse.SubPattern):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _subpatterns(item)


def pattern_problem(pattern: str) -> str | None:
    """Say why ``pattern`` is not an acceptable ``action_pattern`` regex, or return None when it is.

    Patterns come from untrusted folders and run on every turn, so besides compiling they must keep Python's
    backtracking matcher fast on the (at most 200-character) text searched: at most 200 characters, no repeat
    of a group that repeats or alternates (``(a+)+``, ``(a|aa)*``: exponential), at most
    ``MAX_PATTERN_REPEATS`` variable repeats (each multiplies the time by the text length) and at most
    ``MAX_PATTERN_ALTERNATIVES`` for the product of alternation sizes.

    Args:
        pattern: the regex source.

    Returns:
        A short reason, or None.
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"pattern has {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}"
    try:
        re.compile(pattern)
        parsed = _sre_parse.parse(pattern)
    except (re.error, OverflowError, RecursionError) as error:
        return f"pattern {pattern!r} is not a valid regex: {error}"
    try:
        repeats, alternatives = _regex_shape(parsed, False)
    except ValueError as error:
        return f"pattern {pattern!r} {error} (catastrophic backtracking risk)"
    if repeats > MAX_PATTERN_REPEATS:
        return f"pattern {pattern!r} has {repeats} variable repeats; the limit is {MAX_PATTERN_REPEATS}"
    if alternatives > MAX_PATTERN_ALTERNATIVES:
        limit = MAX_PATTERN_ALTERNATIVES
        return f"pattern {pattern!r} combines {alternatives} alternatives; the limit is {limit}"
    return None


@dataclass
class Skill:
    """One version of a skill: an executable DSL program (SAGE) or a guidance text with a trigger (ReSkill).

    Construction validates every field and raises :class:`~sage_envs.error.SkillError` naming the rule
    broken; so does assigning a field later (``skill.name = "../x"``), which then leaves the skill unchanged.
    Program skills must have empty ``text`` and the default trigger; guidance skills must have no ``params`` and
    no ``source``. Whether ``source`` parses is checked by :func:`sage_envs.skills.dsl.parse_definition` (which
    builds program skills), by :meth:`from_dict` and when loading ``SKILL.md`` folders, not on assignment.
    """

    name: str
    """Canonical internal name, e.g. ``heat_then_place`` (see :func:`name_problem`)."""
    kind: str
    """``"program"`` or ``"guidance"``."""
    description: str = ""
    """What the skill does, at most 1024 characters."""
    version: int = 1
    """Version number of this name; the library numbers redefinitions old + 1."""
    created_in_task: int | None = None
    """Task index within the chain where this version was made; None = preloaded."""
    created_in_chain: int | None = None
    """The env's chain counter when this version was made; None = preloaded."""
    uses: int = 0
    """Calls of this version (program), or observations of the chain env that showed it (guidance)."""
    params: tuple[str, ...] = ()
    """Program parameter names, in order."""
    source: str = ""
    """Full DSL text of the definition, starting ``skill NAME(params):``."""
    text: str = ""
    """Guidance text shown to the agent, at most 2000 characters."""
    trigger: str = "general"
    """``"general"`` (every turn), ``"beginning"`` (turn 0 only) or ``"action_pattern"``."""
    pattern: str = ""
    """Regex searched in the last action when ``trigger == "action_pattern"`` (at most 200 characters)."""
    status: str = "active"
    """Lifecycle state, a lowercase identifier such as ``"active"``, ``"testing"``, ``"pruned"``."""
    provenance: dict[str, str] = field(default_factory=dict)
    """Free-form string fields (creator, step, task_id, ...)."""

    def __setattr__(self, name: str, value: Any) -> None:
        global _edits
        if name == "params" and isinstance(value, list):
            value = tuple(value)
        # The dataclass __init__ assigns fields one by one: __post_init__ checks them together once all are set.
        validated = "_validated" in self.__dict__
        previous = self.__dict__.get(name)
        object.__setattr__(self, name, value)
        if name != "uses":  # uses is never rendered: counting one must not throw away every render cache
            _edits += 1  # after the change: any other field change invalidates every library's render cache
        if validated:
            # record_use bumps ``uses`` on every call and injection: a count needs only its own rule checked.
            problem = _count_problem(name, value) if name in _COUNT_FIELDS else self._problem()
            if problem:
                object.__setattr__(self, name, previous)
                raise SkillError(f"skill {str(self.name)[:80]!r}: cannot set {name}={_shown(value)}: {problem}")

    def __post_init__(self) -> None:
        problem = self._problem()
        if problem:
            raise SkillError(f"skill {str(self.name)[:80]!r}: {problem}")
        self.__dict__["_validated"] = True  # not a field: to_dict, == and repr ignore it

    def _problem(self) -> str | None:
        """Return the first broken field rule, or None."""
        problem = name_problem(self.name)
        if problem:
            return problem
        if self.kind not in KINDS:
            return f"kind={self.kind!r}; use one of {', '.join(KINDS)}"
        for name in ("description", "source", "text", "trigger", "pattern", "status"):
            if not isinstance(getattr(self, name), str):
                return f"{name} must be a string, got {type(getattr(self, name)).__name__}"
        for name in _COUNT_FIELDS:
            problem = _count_problem(name, getattr(self, name))
            if problem:
                return problem
        if len(self.description) > MAX_DESCRIPTION_CHARS:
            return f"description has {len(self.description)} characters; the limit is {MAX_DESCRIPTION_CHARS}"
        if len(self.text) > MAX_TEXT_CHARS:
            return f"text has {len(self.text)} characters; the limit is {MAX_TEXT_CHARS}"
        if not _STATUS_RE.fullmatch(self.status):
            return f"status={self.status[:40]!r}; use a lowercase identifier such as 'active'"
        if self.trigger not in TRIGGERS:
            return f"trigger={self.trigger[:40]!r}; use one of {', '.join(TRIGGERS)}"
        if self.trigger == "action_pattern" and not self.pattern:
            return "trigger 'action_pattern' needs a non-empty pattern"
        if self.pattern:
            problem = pattern_problem(self.pattern)
            if problem:
                return problem
        if not isinstance(self.params, tuple) or not all(
            isinstance(p, str) and _PARAM_RE.fullmatch(p) for p in self.params
        ):
            return f"params={self.params!r}; use identifiers such as ('obj', 'place')"
        if len(set(self.params)) != len(self.params):
            return f"params={self.params!r} repeat a name"
        if self.kind == "program" and (self.text or self.trigger != "general" or self.pattern):
            return "a program skill has no text, trigger or pattern (those belong to guidance skills)"
        if self.kind == "guidance" and (self.params or self.source):
            return "a guidance skill has no params or source (those belong to program skills)"
        return _provenance_problem(self.provenance)

    @property
    def signature(self) -> str:
        """``heat_then_place(obj, place)`` for program skills, the bare name for guidance skills."""
        if self.kind == "program":
            return f"{self.name}({', '.join(self.params)})"
        return self.name

    def triggered(self, turn: int, last_action: str | None) -> bool:
        """Whether this guidance skill should be shown on ``turn`` (0-based) after ``last_action``.

        Args:
            turn: the agent turn within the current task, 0 for the first.
            last_action: the previous action text, or None before the first action.

        Returns:
            ``general``: always; ``beginning``: on turn 0 only; ``action_pattern``: when ``pattern`` is found
            (``re.search``) in the first 200 characters of ``last_action``. Always False for program skills.
        """
        if self.kind != "guidance":
            return False
        if self.trigger == "general":
            return True
        if self.trigger == "beginning":
            return turn == 0
        return last_action is not None and re.search(self.pattern, last_action[:MAX_MATCHED_ACTION_CHARS]) is not None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict of every field (``params`` as a list)."""
        out = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)}
        out["params"] = list(self.params)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Skill:
        """Build a skill from :meth:`to_dict` output, validating every field.

        For program skills the source must parse under the default :class:`~sage_envs.skills.dsl.Limits` and
        declare the same name and params.

        Args:
            d: the dict; ``name`` and ``kind`` are required, unknown keys are rejected.

        Returns:
            The skill.

        Raises:
            SkillError: a key is unknown or missing, or a field breaks a rule.
        """
        if not isinstance(d, dict):
            raise SkillError(f"a skill dict must be a dict, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(k) for k in d if k not in known)
        if unknown:
            raise SkillError(f"unknown skill field(s) {unknown}; known: {sorted(known)}")
        missing = [k for k in ("name", "kind") if k not in d]
        if missing:
            raise SkillError(f"skill dict lacks {missing}")
        values = dict(d)
        if isinstance(values.get("provenance"), dict):
            values["provenance"] = dict(values["provenance"])
        skill = cls(**values)
        if skill.kind == "program":
            if _source_parser is None:  # only if sage_envs.skills failed to finish importing
                raise RuntimeError("no DSL parser was handed in; import sage_envs.skills to check program sources")
            parsed, calls = _source_parser(skill.source)
            if calls or parsed.name != skill.name or parsed.params != skill.params:
                raise SkillError(
                    f"skill {skill.name!r}: source defines {parsed.signature} with {len(calls)} trailing "
                    f"call(s); expected exactly {skill.signature}"
                )
        return skill


_COUNT_FIELDS = ("version", "uses", "created_in_task", "created_in_chain")
"""Integer fields whose rules involve no other field."""


def _count_problem(name: str, value: object) -> str | None:
    """Say why ``value`` breaks the rule of count field ``name``, or return None."""
    optional = name.startswith("created_in")
    if not (optional and value is None) and (type(value) is not int or value < 0):
        return f"{name}={value!r}; use a non-negative int" + (" or None" if optional else "")
    if name == "version" and value < 1:
        return f"version={value}; versions start at 1"
    return None


def _provenance_problem(provenance: object) -> str | None:
    """Say why a provenance mapping breaks the string-only rules, or return None."""
    if not isinstance(provenance, dict):
        return f"provenance must be a dict of strings, got {type(provenance).__name__}"
    if len(provenance) > MAX_PROVENANCE_FIELDS:
        return f"provenance has {len(provenance)} fields; the limit is {MAX_PROVENANCE_FIELDS}"
    for key, value in provenance.items():
        if not isinstance(key, str) or not _PROVENANCE_KEY_RE.fullmatch(key):
            return f"provenance key {str(key)[:40]!r} must match {_PROVENANCE_KEY_RE.pattern}"
        if not isinstance(value, str) or len(value) > MAX_PROVENANCE_VALUE_CHARS:
            return f"provenance[{key!r}] must be a string of at most {MAX_PROVENANCE_VALUE_CHARS} characters"
    return None


def _shown(value: object) -> str:
    """A short repr of an assigned value for an error message."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."
