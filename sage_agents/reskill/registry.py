"""The registry of library versions: guidance skills changed by bundles of add / modify / delete operations.

ReSkill (arXiv 2606.01619) never edits the live library in place. A :class:`Bundle` of 1-3 operations is
applied to a *copy* of the current library, which becomes a candidate :class:`LibraryVersion` under test; the
current version stays as the snapshot to revert to. Accepting makes the candidate current (its accepted DELETEs
are the prunes); rejecting keeps the snapshot. Every version ever proposed is kept with its status, so the
history can be replayed.

Skill status (``Skill.status``): ``active`` (in the current library), ``testing`` (added or rewritten by the
candidate under test), ``rejected`` (in a rejected version's record). Provenance fields record the creator, the
training step, the version id, the operation and the reason. At most ``max_active`` guidance skills are live in
any version (default 8).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from sage_envs import Skill, SkillLibrary
from sage_envs.error import SkillError, SkillLimitError, UnknownSkillError, suggest

OPS = ("add", "modify", "delete")
MAX_OPS = 3
"""Operations per bundle (ReSkill recommends 1-3)."""
VERSION_STATUSES = ("base", "testing", "accepted", "rejected")


@dataclass
class Operation:
    """One change to the library: ``add`` a new skill, ``modify`` (new version of) one, or ``delete`` one."""

    op: str
    """``add``, ``modify`` or ``delete``."""
    name: str
    """The skill's name."""
    skill: Skill | None = None
    """The new guidance skill (add / modify); None for delete."""
    reason: str = ""
    """Why (from the diagnosis)."""

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise SkillError(f"operation {self.op!r}; use one of {', '.join(OPS)}")
        if self.op == "delete":
            if self.skill is not None:
                raise SkillError(f"delete {self.name!r} takes no skill")
        elif not isinstance(self.skill, Skill) or self.skill.kind != "guidance" or self.skill.name != self.name:
            raise SkillError(f"{self.op} {self.name!r} needs a guidance Skill named {self.name!r}")

    def to_dict(self) -> dict[str, Any]:
        """``{"op", "name", "skill": Skill.to_dict() | None, "reason"}``."""
        return {
            "op": self.op,
            "name": self.name,
            "skill": None if self.skill is None else self.skill.to_dict(),
            "reason": self.reason,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Operation:
        """Inverse of :meth:`to_dict`."""
        skill = None if d.get("skill") is None else Skill.from_dict(d["skill"])
        return cls(d["op"], d["name"], skill, d.get("reason", ""))


@dataclass
class Bundle:
    """1-3 operations tested together as one new library version."""

    operations: list[Operation]
    """The operations, applied in order."""
    creator: str = ""
    """Which creator proposed it (``rule``, ``llm``, ...)."""
    diagnosis: str = ""
    """The creator's diagnosis, in words."""
    evidence: dict[str, Any] = field(default_factory=dict)
    """JSON-serialisable supporting data (assertion pass rates, fire rates)."""

    def __post_init__(self) -> None:
        if not 1 <= len(self.operations) <= MAX_OPS:
            raise SkillError(f"a bundle holds 1-{MAX_OPS} operations, got {len(self.operations)}")
        names = [op.name for op in self.operations]
        if len(set(names)) != len(names):
            raise SkillError(f"a bundle touches each skill once, got {names}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict."""
        return {
            "operations": [op.to_dict() for op in self.operations],
            "creator": self.creator,
            "diagnosis": self.diagnosis,
            "evidence": copy.deepcopy(self.evidence),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Bundle:
        """Inverse of :meth:`to_dict`."""
        ops = [Operation.from_dict(op) for op in d["operations"]]
        return cls(ops, d.get("creator", ""), d.get("diagnosis", ""), copy.deepcopy(d.get("evidence", {})))


@dataclass
class LibraryVersion:
    """One library version: its skills, where it came from and what became of it."""

    id: int
    """0 for the base library, then 1, 2, ... in proposal order."""
    parent: int | None
    """The version it was built from (the snapshot a rejection reverts to)."""
    library: SkillLibrary
    """The skills of this version (statuses as recorded)."""
    bundle: Bundle | None
    """The operations that made it from ``parent`` (None for the base)."""
    status: str
    """``base``, ``testing``, ``accepted`` or ``rejected``."""
    created_step: int
    """Training step of the proposal."""
    decided_step: int | None = None
    """Training step of the accept / reject decision."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict."""
        return {
            "id": self.id,
            "parent": self.parent,
            "library": self.library.to_dict(),
            "bundle": None if self.bundle is None else self.bundle.to_dict(),
            "status": self.status,
            "created_step": self.created_step,
            "decided_step": self.decided_step,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LibraryVersion:
        """Inverse of :meth:`to_dict`."""
        bundle = None if d["bundle"] is None else Bundle.from_dict(d["bundle"])
        return cls(
            d["id"], d["parent"], SkillLibrary.from_dict(d["library"]), bundle, d["status"], d["created_step"],
            d["decided_step"],
        )  # fmt: skip


def shown_library(library: SkillLibrary) -> SkillLibrary:
    """A copy of ``library`` in which ``testing`` skills are ``active``: what the env should show for that arm."""
    out = library.copy()
    for skill in out:
        if skill.status == "testing":
            skill.status = "active"
    return out


class VersionRegistry:
    """Current version, at most one candidate under test, and the history of every version.

    Args:
        library: the starting library (version 0); empty by default.
        max_active: the most guidance skills live in one version (ReSkill: 8).
    """

    def __init__(self, library: SkillLibrary | None = None, max_active: int = 8):
        if type(max_active) is not int or max_active < 1:
            raise ValueError(f"max_active={max_active!r}; use a positive int such as 8")
        self.max_active = max_active
        base = (library or SkillLibrary()).copy()
        if len(base.guidance(status=None)) > max_active:
            raise SkillLimitError(f"the starting library has more than max_active={max_active} guidance skills")
        self.versions: list[LibraryVersion] = [LibraryVersion(0, None, base, None, "base", 0)]
        self.current_id = 0
        self.candidate_id: int | None = None

    @property
    def current(self) -> LibraryVersion:
        """The version in use (the snapshot while a candidate is tested)."""
        return self.versions[self.current_id]

    @property
    def candidate(self) -> LibraryVersion | None:
        """The version under test, or None."""
        return None if self.candidate_id is None else self.versions[self.candidate_id]

    def active_skills(self) -> list[Skill]:
        """The live guidance skills of the current version."""
        return self.current.library.guidance(status="active")

    def env_library(self, which: str = "current") -> SkillLibrary:
        """The library the env should load for an arm: ``current`` (old) or ``candidate`` (new)."""
        version = self.current if which == "current" else self.candidate
        if version is None:
            raise SkillError("no candidate version is under test")
        return shown_library(version.library)

    def propose(self, bundle: Bundle, step: int) -> LibraryVersion:
        """Apply ``bundle`` to a copy of the current library and open it as the candidate under test.

        Raises:
            SkillError: a candidate is already under test, an add names an existing skill, a modify or delete
                names a missing one (with a close-match hint).
            SkillLimitError: the result would hold more than ``max_active`` guidance skills.
        """
        if self.candidate_id is not None:
            raise SkillError(f"version {self.candidate_id} is still under test; accept or reject it first")
        version_id = len(self.versions)
        library = self.current.library.copy()
        for op in bundle.operations:
            present = op.name in library and library.get(op.name).kind == "guidance"
            if op.op == "add" and op.name in library:
                raise SkillError(f"add {op.name!r}: the skill exists; use modify")
            if op.op in ("modify", "delete") and not present:
                names = [s.name for s in library.guidance(status=None)]
                raise UnknownSkillError(f"{op.op} {op.name!r}: no such guidance skill.{suggest(op.name, names)}")
            if op.op == "delete":
                library.remove(op.name)
                continue
            skill = copy.deepcopy(op.skill)
            skill.status = "testing"
            skill.created_in_task = skill.created_in_chain = None
            skill.provenance = {
                **skill.provenance,
                "creator": bundle.creator,
                "step": str(step),
                "library_version": str(version_id),
                "op": op.op,
                "reason": op.reason[:1024],
            }
            library.add(skill)
        if len(library.guidance(status=None)) > self.max_active:
            raise SkillLimitError(
                f"the bundle leaves {len(library.guidance(status=None))} guidance skills; at most "
                f"max_active={self.max_active} may be live. Delete one in the same bundle."
            )
        version = LibraryVersion(version_id, self.current_id, library, bundle, "testing", step)
        self.versions.append(version)
        self.candidate_id = version_id
        return version

    def accept(self, step: int) -> LibraryVersion:
        """Make the candidate current (its testing skills become active); return it."""
        version = self._decide("accepted", step)
        for skill in version.library:
            if skill.status == "testing":
                skill.status = "active"
        self.current_id = version.id
        return version

    def reject(self, step: int) -> LibraryVersion:
        """Drop the candidate (its testing skills are recorded as rejected); the snapshot stays current."""
        version = self._decide("rejected", step)
        for skill in version.library:
            if skill.status == "testing":
                skill.status = "rejected"
        return version

    def _decide(self, status: str, step: int) -> LibraryVersion:
        version = self.candidate
        if version is None:
            raise SkillError("no candidate version is under test")
        version.status, version.decided_step = status, step
        self.candidate_id = None
        return version

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable state (every version)."""
        return {
            "max_active": self.max_active,
            "current_id": self.current_id,
            "candidate_id": self.candidate_id,
            "versions": [v.to_dict() for v in self.versions],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VersionRegistry:
        """Inverse of :meth:`to_dict`."""
        registry = cls(max_active=d["max_active"])
        registry.versions = [LibraryVersion.from_dict(v) for v in d["versions"]]
        registry.current_id, registry.candidate_id = d["current_id"], d["candidate_id"]
        return registry
