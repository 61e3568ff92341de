"""``sage skills show | export | validate``: look into a skill library, a checkpoint or a run.

A PATH is resolved by :func:`resolve`:

- a run's ``output_dir`` (it holds ``checkpoints/``): its newest checkpoint, and the run's ReSkill lifecycle log
  (``reskill/lifecycle.jsonl``, with ``lifecycle.png`` drawn next to it by the trainer);
- a checkpoint (``skill_bank.json``, ``skill_library/``, ``reskill_state.json`` or ``reskill_library/``): the
  SAGE skill bank with every version (``skill_bank.json``, else the ``skill_library/`` folders) and ReSkill's
  library versions (``reskill_state.json``'s registry, else ``reskill_library/``);
- otherwise a folder of Agent Skills ``SKILL.md`` folders (latest versions only), or one such folder.

A lifecycle log is found in the run, or as ``lifecycle.jsonl`` / ``reskill/lifecycle.jsonl`` in PATH itself.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sage_envs import Skill, SkillLibrary
from sage_envs.error import SkillError, SkillFolderError
from sage_envs.skills.skillmd import MAX_DIRECTORY_ENTRIES, SKILL_FILE, read_skill_dir, render_skill_md, write_skill_dir

CHECKPOINT_FILES = ("skill_bank.json", "skill_library", "reskill_state.json", "reskill_library")
"""Entries that mark a folder as a training checkpoint."""


@dataclass
class Shelf:
    """One library found at a path, with every version of each skill that it records."""

    label: str
    """Where it came from, e.g. ``skill_bank.json`` or ``reskill_state.json``."""
    versions: dict[str, dict[int, Skill]]
    """Per skill name, its versions by number, oldest first: ``Skill.version``, or for ReSkill the library version
    (registry id) that made it, since two branches of the registry can each hold a "version 2" of one skill."""
    live: set[tuple[str, int]] = field(default_factory=set)
    """The (name, version) pairs of the library in use; the others are history (shown ``superseded``/``pruned``)."""


@dataclass
class Found:
    """What :func:`resolve` found at a path."""

    source: Path
    """The folder read: the library folder or the (newest) checkpoint."""
    shelves: list[Shelf]
    """The libraries it holds."""
    lifecycle: Path | None = None
    """ReSkill's lifecycle log, when there is one."""


def resolve(path: str | os.PathLike) -> Found:
    """Read the libraries at ``path`` (a run, a checkpoint or a SKILL.md library folder; see the module docstring).

    Raises:
        FileNotFoundError: ``path`` is not a folder, or a run has no checkpoint yet.
        SkillError: a library file or folder is malformed (a :class:`SkillFolderError` names the folder and rule).
    """
    from sage_agents.checkpoints import latest_checkpoint

    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path} is not a folder; give a SKILL.md library folder, a checkpoint or a run")
    run = None
    if (path / "checkpoints").is_dir():
        run, checkpoint = path, latest_checkpoint(path / "checkpoints")
        if checkpoint is None:
            raise FileNotFoundError(f"the run {path} has no checkpoint yet (nothing in {path / 'checkpoints'})")
    elif any((path / name).exists() for name in CHECKPOINT_FILES):
        checkpoint = path
        run = path.parent.parent if path.parent.name == "checkpoints" else None
    else:
        single = (path / SKILL_FILE).is_file()  # one skill's folder
        library = SkillLibrary([read_skill_dir(path)]) if single else SkillLibrary.load(path)
        return Found(path, [_shelf(path.name, library)], _lifecycle(path))
    return Found(checkpoint, _checkpoint_shelves(checkpoint), _lifecycle(run) if run else _lifecycle(checkpoint))


def _lifecycle(folder: Path) -> Path | None:
    """The lifecycle log in ``folder`` (``reskill/lifecycle.jsonl`` or ``lifecycle.jsonl``), or None."""
    for candidate in (folder / "reskill" / "lifecycle.jsonl", folder / "lifecycle.jsonl"):
        if candidate.is_file():
            return candidate
    return None


def _shelf(label: str, library: SkillLibrary) -> Shelf:
    """A shelf of ``library``: every version of each name, the latest ones live."""
    return Shelf(
        label,
        {name: {skill.version: skill for skill in library.history(name)} for name in library.names()},
        {(skill.name, skill.version) for skill in library},
    )


def _checkpoint_shelves(checkpoint: Path) -> list[Shelf]:
    """The SAGE skill bank and ReSkill's library of a checkpoint (each when present)."""
    from sage_agents.reskill.controller import LIBRARY_DIR, STATE_FILE
    from sage_agents.reskill.registry import VersionRegistry

    shelves = []
    if (checkpoint / "skill_bank.json").is_file():
        bank = SkillLibrary.from_dict(json.loads((checkpoint / "skill_bank.json").read_text()))
        shelves.append(_shelf("skill bank (skill_bank.json)", bank))
    elif (checkpoint / "skill_library").is_dir():
        shelves.append(_shelf("skill bank (skill_library/)", SkillLibrary.load(checkpoint / "skill_library")))
    if (checkpoint / STATE_FILE).is_file():
        registry = VersionRegistry.from_dict(json.loads((checkpoint / STATE_FILE).read_text())["registry"])
        shelves.append(registry_shelf(registry, f"ReSkill ({STATE_FILE}; versions are library versions)"))
    elif (checkpoint / LIBRARY_DIR).is_dir():
        shelves.append(_shelf(f"ReSkill ({LIBRARY_DIR}/)", SkillLibrary.load(checkpoint / LIBRARY_DIR)))
    return shelves


def registry_shelf(registry: Any, label: str) -> Shelf:
    """Every skill version of a ReSkill :class:`~sage_agents.reskill.registry.VersionRegistry`.

    A skill version is numbered by the library version that made it (its ``library_version`` provenance; 0 for
    the base library's) and shown as the latest library version holding it recorded it (``testing``,
    ``active``, ``rejected``); the live ones are those of the current library (and of a candidate under test).
    """
    seen: dict[str, dict[int, Skill]] = {}
    for version in registry.versions:  # in proposal order: a later record of a skill version wins
        for name in version.library.names():
            for skill in version.library.history(name):
                seen.setdefault(name, {})[_made_in(skill)] = skill
    live = {(s.name, _made_in(s)) for s in registry.current.library}
    if registry.candidate is not None:
        live |= {(s.name, _made_in(s)) for s in registry.candidate.library}
    return Shelf(label, {name: dict(sorted(by.items())) for name, by in seen.items()}, live)


def _made_in(skill: Skill) -> int:
    """The library version (registry id) that made a ReSkill skill version; 0 for the base library's."""
    made = skill.provenance.get("library_version", "0")
    return int(made) if made.isdigit() else 0


def status(shelf: Shelf, number: int, skill: Skill) -> str:
    """Version ``number``'s status: as recorded, but ``superseded`` / ``pruned`` for an active one no longer live."""
    if (skill.name, number) in shelf.live or skill.status != "active":
        return skill.status
    return "superseded" if any(name == skill.name for name, _ in shelf.live) else "pruned"


def show_rows(shelf: Shelf) -> list[dict[str, str]]:
    """One row per skill: its newest version, the versions known, status, uses, provenance and description."""
    rows = []
    for versions in shelf.versions.values():
        number, skill = max(versions.items())
        rows.append({
            "skill": skill.signature,
            "kind": skill.kind,
            "version": str(number),
            "versions": ", ".join(map(str, versions)),
            "status": status(shelf, number, skill),
            "uses": str(skill.uses),
            "provenance": ", ".join(f"{k}={v}" for k, v in skill.provenance.items()) or "-",
            "description": skill.description or skill.text or "-",
        })  # fmt: skip
    return rows


def version_diff(found: Found, name: str, old: int, new: int) -> str:
    """The unified diff of the ``SKILL.md`` texts of versions ``old`` and ``new`` of skill ``name``.

    Raises:
        KeyError: no shelf holds ``name``, or not both versions (the message lists the versions known).
    """
    versions = {n: s for shelf in found.shelves for n, s in shelf.versions.get(name, {}).items()}
    if not versions:
        known = sorted({n for shelf in found.shelves for n in shelf.versions})
        raise KeyError(f"no skill {name!r} in {found.source}; its skills are {', '.join(known) or 'none'}")
    missing = [v for v in (old, new) if v not in versions]
    if missing:
        raise KeyError(
            f"skill {name!r} has no version {missing[0]} in {found.source}; its versions are "
            f"{', '.join(map(str, sorted(versions)))} (a SKILL.md folder holds the latest only: give a checkpoint)"
        )
    lines = difflib.unified_diff(
        render_skill_md(versions[old]).splitlines(keepends=True),
        render_skill_md(versions[new]).splitlines(keepends=True),
        f"{name} v{old}",
        f"{name} v{new}",
    )
    return "".join(lines)


def lifecycle_lines(events: list[dict[str, Any]]) -> list[str]:
    """One line per lifecycle event but ``tested`` (one per test: its steps and final P(new))."""
    from sage_agents.reskill.lifecycle import tested_segments

    lines = []
    for event in events:
        kind = event["event"]
        if kind == "tested":
            continue
        what = " ".join(
            f"{key}={event[key]}" for key in ("version", "op", "skill", "reason") if event.get(key) not in (None, "")
        )
        lines.append(f"step {event['step']:>5}  {kind:<10} {what}")
    for segment in tested_segments(events):
        last = segment[-1]
        p_new = last.get("posterior", {}).get("p_new")
        shown = "?" if p_new is None else f"{p_new:.2f}"
        lines.append(
            f"test of version {last['version']}: steps {segment[0]['step']}-{last['step']}, last P(new)={shown}"
        )
    return lines


def export(found: Found, destination: str | os.PathLike) -> list[Path]:
    """Write the live version of every skill of ``found`` as Agent Skills folders in ``destination``.

    Raises:
        FileExistsError: ``destination`` exists and is not empty (an export would mix with what is there).
        SkillError: two libraries hold skills of one name (their folders would collide).
    """
    destination = Path(destination)
    if destination.exists() and any(destination.iterdir()):
        raise FileExistsError(f"{destination} is not empty; export into a new or empty folder")
    chosen: dict[str, tuple[str, Skill]] = {}
    for shelf in found.shelves:
        for name, versions in shelf.versions.items():
            live = [s for number, s in versions.items() if (name, number) in shelf.live]
            if not live:  # pruned: nothing of it is in use
                continue
            if name in chosen:
                raise SkillError(f"skill {name!r} is in both {chosen[name][0]} and {shelf.label}; export one of them")
            chosen[name] = (shelf.label, live[-1])
    return [write_skill_dir(skill, destination) for _, skill in chosen.values()]


@dataclass
class Verdict:
    """What :func:`validate` made of one entry of a library folder."""

    name: str
    """The entry's name."""
    skill: Skill | None
    """The skill read, or None when the entry was rejected."""
    reason: str = ""
    """Why it was rejected ("" when accepted)."""


def validate(folder: str | os.PathLike) -> list[Verdict]:
    """Check every skill folder in ``folder`` (or ``folder`` itself when it holds a ``SKILL.md``), each on its own.

    Each entry goes through the library's own reader (:func:`~sage_envs.skills.skillmd.read_skill_dir`), so an
    entry passes exactly when ``SkillLibrary.load`` would take it; hidden entries and plain files are skipped as
    the loader skips them, symlinks are rejected. A folder-level rule the loader applies (too many entries or
    skill folders) is reported as a verdict named after the folder.
    """
    from sage_envs.skills.skillmd import read_library_dir

    root = Path(folder)
    if (root / SKILL_FILE).is_file() and not root.is_symlink():
        return [_verdict(root)]
    if not root.is_dir():
        return [Verdict(str(root), None, "is not a folder")]
    verdicts = []
    with os.scandir(root) as entries:
        for count, entry in enumerate(entries, 1):
            if count > MAX_DIRECTORY_ENTRIES:
                break
            if not entry.name.startswith(".") and (entry.is_symlink() or entry.is_dir(follow_symlinks=False)):
                verdicts.append(_verdict(root / entry.name))
    try:  # the loader itself, for its folder-level rules (too many entries or skill folders)
        read_library_dir(root)
    except SkillFolderError as error:
        if str(error) not in {v.reason for v in verdicts}:
            verdicts.append(Verdict(root.name, None, str(error)))
    return sorted(verdicts, key=lambda v: v.name)


def _verdict(path: Path) -> Verdict:
    """The verdict of one skill folder (a symlink is rejected by the reader)."""
    try:
        return Verdict(path.name, read_skill_dir(path))
    except SkillFolderError as error:
        return Verdict(path.name, None, str(error))
