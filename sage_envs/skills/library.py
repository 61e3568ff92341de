"""The skill library: program skills (SAGE) and guidance skills (ReSkill), versioned, with provenance.

A :class:`Skill` is one version of one named skill. A :class:`SkillLibrary` keeps, per name, every version
ever added (oldest first) and exposes the latest one. The library is JSON-serialisable
(:meth:`SkillLibrary.to_dict`) and can be written to / read from a folder of Agent Skills ``SKILL.md`` folders
(:mod:`sage_envs.skills.skillmd`).
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from sage_envs.error import InvalidConfigError, SkillError, SkillLimitError, UnknownSkillError, suggest

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
"""Counts changes to skills (any field set on any :class:`Skill`) and to libraries' membership in this process.

:meth:`SkillLibrary.render` caches its text under this count, so a skill edited in place (``skill.description = ...``,
``skill.status = "pruned"``) shows up on the next render, with no version counter to keep in sync by hand."""

_REPEAT_OPS = tuple(
    getattr(_sre_parse, op)
    for op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
    if hasattr(_sre_parse, op)
)


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
    broken. Program skills must have empty ``text`` and the default trigger; guidance skills must have no
    ``params`` and no ``source``. Whether ``source`` parses is checked by
    :func:`sage_envs.skills.dsl.parse_definition` (which builds program skills), by :meth:`from_dict` and when
    loading ``SKILL.md`` folders.
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
    """Calls of this version (program) or injections (guidance)."""
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
        object.__setattr__(self, name, value)
        _edits += 1  # after the change: any field change invalidates every library's render cache

    def __post_init__(self) -> None:
        self.params = tuple(self.params) if isinstance(self.params, (list, tuple)) else self.params
        problem = self._problem()
        if problem:
            raise SkillError(f"skill {str(self.name)[:80]!r}: {problem}")

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
        for name in ("version", "uses", "created_in_task", "created_in_chain"):
            value = getattr(self, name)
            optional = name.startswith("created_in")
            if not (optional and value is None) and (type(value) is not int or value < 0):
                return f"{name}={value!r}; use a non-negative int" + (" or None" if optional else "")
        if self.version < 1:
            return f"version={self.version}; versions start at 1"
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
        return (
            last_action is not None
            and re.search(self.pattern, last_action[:MAX_MATCHED_ACTION_CHARS]) is not None
        )

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
            # Imported here because the DSL builds Skill objects: a module-level import would be circular.
            from sage_envs.skills.dsl import parse_definition

            parsed, calls = parse_definition(skill.source)
            if calls or parsed.name != skill.name or parsed.params != skill.params:
                raise SkillError(
                    f"skill {skill.name!r}: source defines {parsed.signature} with {len(calls)} trailing "
                    f"call(s); expected exactly {skill.signature}"
                )
        return skill


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


class SkillLibrary:
    """Named, versioned skills: the latest version of each name is live, older ones are kept as history.

    Iteration, :meth:`names`, :meth:`programs` and :meth:`guidance` follow the order in which names were first
    added. ``max_size`` bounds the number of names (not versions). Equality compares :meth:`to_dict`.
    """

    def __init__(self, skills: Iterable[Skill] = (), max_size: int = 64):
        """Create a library holding ``skills`` (added in order, so a repeated name becomes a new version).

        Args:
            skills: initial skills.
            max_size: the most distinct names the library may hold.

        Raises:
            InvalidConfigError: ``max_size`` is not a positive int.
            SkillLimitError: ``skills`` has more than ``max_size`` names.
        """
        if type(max_size) is not int or max_size < 1:
            raise InvalidConfigError(f"max_size={max_size!r}; the library needs a positive int size limit.")
        self.max_size = max_size
        self._versions: dict[str, list[Skill]] = {}
        # (edit count, kinds, program section, [(guidance skill, its line)]) of the last render; see render().
        self._render_cache: tuple[int, tuple[str, ...], str, list[tuple[Skill, str]]] | None = None
        for skill in skills:
            self.add(skill)

    def add(self, skill: Skill) -> Skill:
        """Store a copy of ``skill``; an existing name gets version old + 1 and keeps its older versions.

        A new name keeps ``skill.version`` (so a loaded library keeps its numbers).

        Args:
            skill: the skill to store.

        Returns:
            The stored skill (the library's own object).

        Raises:
            SkillLimitError: the name is new and the library already holds ``max_size`` names.
        """
        global _edits
        if not isinstance(skill, Skill):
            raise TypeError(f"SkillLibrary.add takes a Skill, got {type(skill).__name__}")
        stored = copy.deepcopy(skill)
        versions = self._versions.get(skill.name)
        if versions is None:
            if len(self._versions) >= self.max_size:
                raise SkillLimitError(
                    f"the skill library is full ({self.max_size} skills); cannot add {skill.name!r}. "
                    "Redefine an existing skill instead."
                )
            self._versions[skill.name] = [stored]
        else:
            stored.version = versions[-1].version + 1
            versions.append(stored)
        _edits += 1
        return stored

    def _versions_of(self, name: str) -> list[Skill]:
        """Return the version list of ``name`` or raise UnknownSkillError with a suggestion."""
        versions = self._versions.get(name)
        if versions is None:
            known = ", ".join(self._versions) or "none"
            raise UnknownSkillError(
                f"unknown skill {name!r} (known: {known}).{suggest(name, self._versions)}"
            )
        return versions

    def get(self, name: str) -> Skill:
        """Return the latest version of ``name``; UnknownSkillError (with a close-match hint) if absent."""
        return self._versions_of(name)[-1]

    def remove(self, name: str) -> Skill:
        """Delete ``name`` and its whole history (ReSkill's delete); return its latest version.

        Raises:
            UnknownSkillError: ``name`` is not in the library.
        """
        global _edits
        latest = self._versions_of(name)[-1]
        del self._versions[name]
        _edits += 1
        return latest

    def history(self, name: str) -> list[Skill]:
        """Return every version of ``name``, oldest first."""
        return list(self._versions_of(name))

    def record_use(self, name: str) -> None:
        """Count one use (call or injection) of the latest version of ``name``."""
        self.get(name).uses += 1

    def __contains__(self, name: object) -> bool:
        return name in self._versions

    def __iter__(self) -> Iterator[Skill]:
        return iter([versions[-1] for versions in self._versions.values()])

    def __len__(self) -> int:
        return len(self._versions)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SkillLibrary) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]  # mutable: not hashable

    def __getstate__(self) -> dict[str, Any]:
        # Copies and pickles start without a render cache: its edit count means nothing in another process.
        state = self.__dict__.copy()
        state["_render_cache"] = None
        return state

    def __repr__(self) -> str:
        return f"SkillLibrary({self.names()!r}, max_size={self.max_size})"

    def names(self) -> list[str]:
        """Return the skill names in insertion order."""
        return list(self._versions)

    def programs(self) -> list[Skill]:
        """Return the latest version of every program skill."""
        return [skill for skill in self if skill.kind == "program"]

    def guidance(self, status: str | None = "active") -> list[Skill]:
        """Return the latest version of every guidance skill with ``status`` (None: any status)."""
        return [skill for skill in self if skill.kind == "guidance" and status in (None, skill.status)]

    def copy(self) -> SkillLibrary:
        """Return a deep copy (history included)."""
        return copy.deepcopy(self)

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"max_size": int, "skills": [{"name": str, "versions": [Skill.to_dict(), ...]}]}``."""
        return {
            "max_size": self.max_size,
            "skills": [
                {"name": name, "versions": [skill.to_dict() for skill in versions]}
                for name, versions in self._versions.items()
            ],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SkillLibrary:
        """Rebuild a library (history and version numbers included) from :meth:`to_dict` output.

        Raises:
            SkillError: the structure is wrong, a version list is empty or not strictly increasing, a version
                has another name, or a skill breaks a rule.
            SkillLimitError: more names than ``max_size``.
        """
        if not isinstance(d, dict) or not isinstance(d.get("skills"), list):
            raise SkillError("a library dict needs a 'skills' list (see SkillLibrary.to_dict)")
        library = cls(max_size=d.get("max_size", 64))
        if len(d["skills"]) > library.max_size:
            raise SkillLimitError(f"{len(d['skills'])} skills exceed max_size={library.max_size}")
        for entry in d["skills"]:
            if (
                not isinstance(entry, dict)
                or not isinstance(entry.get("versions"), list)
                or not entry["versions"]
            ):
                raise SkillError("each library entry needs a 'name' and a non-empty 'versions' list")
            versions = [Skill.from_dict(v) for v in entry["versions"]]
            name = entry.get("name")
            if name in library._versions or any(v.name != name for v in versions):
                raise SkillError(
                    f"library entry {str(name)[:80]!r} is repeated or holds versions of another name"
                )
            if any(a.version >= b.version for a, b in itertools.pairwise(versions)):
                raise SkillError(f"versions of {name!r} must be strictly increasing")
            library._versions[name] = versions
        global _edits
        _edits += 1
        return library

    def save(self, directory: str | Path) -> None:
        """Write the latest version of every skill as ``directory/<folder-name>/SKILL.md``.

        Existing folders of the same names are overwritten; other folders in ``directory`` are left alone, so
        save into an empty directory for an exact round trip. History is not saved.
        """
        # Imported here because skillmd builds on Skill: a module-level import would be circular.
        from sage_envs.skills.skillmd import write_skill_dir

        for skill in self:
            write_skill_dir(skill, directory)

    @classmethod
    def load(cls, directory: str | Path, max_size: int = 64) -> SkillLibrary:
        """Read a folder of ``SKILL.md`` folders (untrusted input) into a new library, in folder-name order.

        Raises:
            SkillFolderError: a folder is malformed or unsafe, or there are more than ``max_size`` folders.
        """
        # Imported here because skillmd builds on Skill: a module-level import would be circular.
        from sage_envs.skills.skillmd import read_library_dir

        return cls(read_library_dir(directory, max_skills=max_size), max_size=max_size)

    def render(
        self, *, turn: int, last_action: str | None, kinds: Iterable[str] = ("program", "guidance")
    ) -> str:
        """Return the library as the agent should see it in the observation's ``skills`` field.

        Program skills come as ``- signature: description`` lines under ``Program skills (call NAME(args)):``;
        active guidance skills whose trigger fires come as ``- name: text`` under ``Guidance:`` (continuation
        lines of a multi-line text are indented by two spaces). Sections are separated by a blank line.

        Args:
            turn: the agent turn within the current task (0 = first).
            last_action: the previous action, or None.
            kinds: which kinds to show.

        Returns:
            The text, or ``""`` when nothing is shown.
        """
        # The text only changes with the skills (cached under the edit count) and with which guidance triggers fire.
        kinds = tuple(kinds)
        edits = _edits  # read before rendering: a text cached while an edit lands is keyed too old to be reused
        cache = getattr(self, "_render_cache", None)
        if cache is None or cache[0] != edits or cache[1] != kinds:
            programs = ""
            if "program" in kinds:
                lines = [
                    (f"- {s.signature}: {s.description}" if s.description else f"- {s.signature}").replace(
                        "\n", "\n  "
                    )
                    for s in self.programs()
                ]
                if lines:
                    programs = "\n".join(["Program skills (call NAME(args)):", *lines])
            guidance = []
            if "guidance" in kinds:
                guidance = [(s, f"- {s.name}: {s.text}".replace("\n", "\n  ")) for s in self.guidance("active")]
            cache = self._render_cache = (edits, kinds, programs, guidance)
        sections = [cache[2]] if cache[2] else []
        lines = [line for skill, line in cache[3] if skill.triggered(turn, last_action)]
        if lines:
            sections.append("\n".join(["Guidance:", *lines]))
        return "\n\n".join(sections)
