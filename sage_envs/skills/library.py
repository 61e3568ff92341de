"""The skill library: program skills (SAGE) and guidance skills (ReSkill), versioned, with provenance.

A :class:`~sage_envs.skills.skill.Skill` is one version of one named skill. A :class:`SkillLibrary` keeps, per
name, every version ever added (oldest first) and exposes the latest one. The library is JSON-serialisable
(:meth:`SkillLibrary.to_dict`) and can be written to / read from a folder of Agent Skills ``SKILL.md`` folders
(:mod:`sage_envs.skills.skillmd`). ``Skill`` and its field rules live in :mod:`sage_envs.skills.skill` and are
importable from here too.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sage_envs.error import InvalidConfigError, SkillError, SkillLimitError, UnknownSkillError, suggest
from sage_envs.skills.skill import (
    KINDS,
    MAX_DESCRIPTION_CHARS,
    MAX_MATCHED_ACTION_CHARS,
    MAX_NAME_CHARS,
    MAX_PATTERN_ALTERNATIVES,
    MAX_PATTERN_CHARS,
    MAX_PATTERN_REPEATS,
    MAX_PROVENANCE_FIELDS,
    MAX_PROVENANCE_VALUE_CHARS,
    MAX_TEXT_CHARS,
    TRIGGERS,
    Skill,
    edit_count,
    name_problem,
    pattern_problem,
    record_edit,
)
from sage_envs.skills.skillmd import read_library_dir, write_skill_dir

__all__ = [
    "KINDS",
    "MAX_DESCRIPTION_CHARS",
    "MAX_MATCHED_ACTION_CHARS",
    "MAX_NAME_CHARS",
    "MAX_PATTERN_ALTERNATIVES",
    "MAX_PATTERN_CHARS",
    "MAX_PATTERN_REPEATS",
    "MAX_PROVENANCE_FIELDS",
    "MAX_PROVENANCE_VALUE_CHARS",
    "MAX_TEXT_CHARS",
    "TRIGGERS",
    "Skill",
    "SkillLibrary",
    "name_problem",
    "pattern_problem",
]


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
        record_edit()
        return stored

    def _versions_of(self, name: str) -> list[Skill]:
        """Return the version list of ``name`` or raise UnknownSkillError with a suggestion."""
        versions = self._versions.get(name)
        if versions is None:
            known = ", ".join(self._versions) or "none"
            raise UnknownSkillError(f"unknown skill {name!r} (known: {known}).{suggest(name, self._versions)}")
        return versions

    def get(self, name: str) -> Skill:
        """Return the latest version of ``name``; UnknownSkillError (with a close-match hint) if absent."""
        return self._versions_of(name)[-1]

    def remove(self, name: str) -> Skill:
        """Delete ``name`` and its whole history (ReSkill's delete); return its latest version.

        Raises:
            UnknownSkillError: ``name`` is not in the library.
        """
        latest = self._versions_of(name)[-1]
        del self._versions[name]
        record_edit()
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
            if not isinstance(entry, dict) or not isinstance(entry.get("versions"), list) or not entry["versions"]:
                raise SkillError("each library entry needs a 'name' and a non-empty 'versions' list")
            versions = [Skill.from_dict(v) for v in entry["versions"]]
            name = entry.get("name")
            if name in library._versions or any(v.name != name for v in versions):
                raise SkillError(f"library entry {str(name)[:80]!r} is repeated or holds versions of another name")
            if any(a.version >= b.version for a, b in itertools.pairwise(versions)):
                raise SkillError(f"versions of {name!r} must be strictly increasing")
            library._versions[name] = versions
        record_edit()
        return library

    def save(self, directory: str | Path) -> None:
        """Write the latest version of every skill as ``directory/<folder-name>/SKILL.md``.

        Existing folders of the same names are overwritten; other folders in ``directory`` are left alone, so
        save into an empty directory for an exact round trip. History is not saved.
        """
        for skill in self:
            write_skill_dir(skill, directory)

    @classmethod
    def load(cls, directory: str | Path, max_size: int = 64) -> SkillLibrary:
        """Read a folder of ``SKILL.md`` folders (untrusted input) into a new library, in folder-name order.

        Raises:
            SkillFolderError: a folder is malformed or unsafe, or there are more than ``max_size`` folders.
        """
        return cls(read_library_dir(directory, max_skills=max_size), max_size=max_size)

    def render(
        self,
        *,
        turn: int,
        last_action: str | None,
        kinds: Iterable[str] = ("program", "guidance"),
        record_uses: bool = False,
    ) -> str:
        """Return the library as the agent should see it in the observation's ``skills`` field.

        Program skills come as ``- signature: description`` lines under ``Program skills (call NAME(args)):``;
        active guidance skills whose trigger fires come as ``- name: text`` under ``Guidance:`` (continuation
        lines of a multi-line text are indented by two spaces). Sections are separated by a blank line.

        Args:
            turn: the agent turn within the current task (0 = first).
            last_action: the previous action, or None.
            kinds: which kinds to show.
            record_uses: add one use to every guidance skill shown (a guidance skill's ``uses`` counts the
                observations that showed it; the chain env renders each observation once with this set).

        Returns:
            The text, or ``""`` when nothing is shown.
        """
        # The text only changes with the skills (cached under the edit count) and with which guidance triggers fire.
        kinds = tuple(kinds)
        edits = edit_count()  # read before rendering: a text cached while an edit lands is keyed too old to be reused
        cache = getattr(self, "_render_cache", None)
        if cache is None or cache[0] != edits or cache[1] != kinds:
            programs = ""
            if "program" in kinds:
                lines = [
                    (f"- {s.signature}: {s.description}" if s.description else f"- {s.signature}").replace("\n", "\n  ")
                    for s in self.programs()
                ]
                if lines:
                    programs = "\n".join(["Program skills (call NAME(args)):", *lines])
            guidance = []
            if "guidance" in kinds:
                guidance = [(s, f"- {s.name}: {s.text}".replace("\n", "\n  ")) for s in self.guidance("active")]
            cache = self._render_cache = (edits, kinds, programs, guidance)
        sections = [cache[2]] if cache[2] else []
        lines = []
        for skill, line in cache[3]:
            if skill.triggered(turn, last_action):
                lines.append(line)
                if record_uses:
                    skill.uses += 1
        if lines:
            sections.append("\n".join(["Guidance:", *lines]))
        return "\n\n".join(sections)
