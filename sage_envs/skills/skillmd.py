"""Skill folders on disk: one folder per skill holding a ``SKILL.md`` valid under the Agent Skills spec.

A ``SKILL.md`` is YAML front matter between ``---`` lines, then a markdown body::

    ---
    name: heat-then-place
    description: Heat an object in the microwave and put it somewhere.
    metadata:
      kind: program
      version: '2'
      status: active
      params: obj, place
      created_in_task: '0'
      uses: '3'
      provenance.creator: sage
    ---
    ```sage
    skill heat_then_place(obj, place):
        ...
    ```

Reading a folder is treated as reading untrusted input: ``yaml.safe_load`` only, a size cap on ``SKILL.md``,
a cap on the number of folders, no symlinks, names validated against the folder name (no path escapes),
string-only metadata, known kinds and triggers, safe regexes and programs that parse. Every rejection is a
:class:`~sage_envs.error.SkillFolderError` naming the folder and the rule broken.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from sage_envs.error import SkillError, SkillFolderError
from sage_envs.skills.dsl import parse_definition
from sage_envs.skills.skill import Skill, name_problem

SKILL_FILE = "SKILL.md"
MAX_SKILL_MD_BYTES = 64 * 1024
"""Largest ``SKILL.md`` read; anything bigger is rejected unread."""
MAX_DIRECTORY_ENTRIES = 1024
"""Most entries scanned in a library directory (files and folders together)."""

_DISK_NAME_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_FRONT_MATTER_RE = re.compile(r"---[ \t]*\n(?P<front>.*?\n)?---[ \t]*(?:\n(?P<body>.*))?", re.DOTALL)
_SAGE_BLOCK_RE = re.compile(r"^```sage[ \t]*\n(?P<source>.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
_COUNT_RE = re.compile(r"[0-9]{1,9}")
_PROVENANCE_PREFIX = "provenance."


def disk_name(name: str) -> str:
    """Map an internal skill name to its folder name (``heat_then_place`` -> ``heat-then-place``)."""
    return name.replace("_", "-")


def internal_name(folder_name: str) -> str:
    """Map a folder name to the internal skill name (``heat-then-place`` -> ``heat_then_place``)."""
    return folder_name.replace("-", "_")


def render_skill_md(skill: Skill) -> str:
    """Return the ``SKILL.md`` text of ``skill``.

    An empty description is written as the skill's signature, since the Agent Skills spec requires one.

    Args:
        skill: the skill (one version).

    Returns:
        Front matter with ``name``, ``description`` and string-valued ``metadata``, then the body: a ``sage``
        fenced block for programs, the guidance text for guidance skills.
    """
    metadata = {"kind": skill.kind, "version": str(skill.version), "status": skill.status}
    if skill.kind == "program":
        metadata["params"] = ", ".join(skill.params)
    else:
        metadata["trigger"] = skill.trigger
        if skill.pattern:
            metadata["pattern"] = skill.pattern
    for key in ("created_in_task", "created_in_chain"):
        if getattr(skill, key) is not None:
            metadata[key] = str(getattr(skill, key))
    metadata["uses"] = str(skill.uses)
    for key, value in skill.provenance.items():
        metadata[_PROVENANCE_PREFIX + key] = value
    front = {
        "name": disk_name(skill.name),
        "description": skill.description or skill.signature,
        "metadata": metadata,
    }
    header = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100_000)
    body = f"```sage\n{skill.source}\n```" if skill.kind == "program" else skill.text
    return f"---\n{header}---\n{body}\n"


def write_skill_dir(skill: Skill, parent_dir: str | Path) -> Path:
    """Write ``skill`` as ``parent_dir/<folder-name>/SKILL.md`` (creating folders as needed).

    Args:
        skill: the skill (one version).
        parent_dir: the library directory.

    Returns:
        The skill folder.

    Raises:
        SkillFolderError: the folder would not be a direct child of ``parent_dir`` once resolved (a name such as
            ``../x`` forced past :class:`Skill`'s checks), or the target folder or file is a symlink (writing
            through it could escape).
    """
    parent = Path(parent_dir)
    parent.mkdir(parents=True, exist_ok=True)
    folder = parent / disk_name(skill.name)
    # Skill validates its name, even on assignment, but the folder is checked where it is written: a name set
    # around the dataclass (object.__setattr__, __dict__) must not write outside the library folder.
    if folder.is_symlink() or (folder / SKILL_FILE).is_symlink():
        raise SkillFolderError(f"skill folder {folder.name!r}: refusing to write through a symlink")
    if folder.resolve().parent != parent.resolve():
        raise SkillFolderError(
            f"skill {str(skill.name)[:80]!r}: its folder {str(folder)[:200]!r} resolves outside the library folder "
            f"{str(parent)[:200]!r}; skill names may not hold path separators or '..'"
        )
    folder.mkdir(exist_ok=True)
    temporary = folder / f".{SKILL_FILE}.tmp"
    temporary.write_text(render_skill_md(skill), encoding="utf-8")
    os.replace(temporary, folder / SKILL_FILE)  # atomic: a reader never sees half a file
    return folder


def read_skill_dir(path: str | Path) -> Skill:
    """Read one skill folder (untrusted input).

    Args:
        path: the folder, whose name must equal the front-matter ``name``.

    Returns:
        The skill, with the internal name (hyphens mapped to underscores).

    Raises:
        SkillFolderError: the folder or its ``SKILL.md`` is missing, a symlink, too big, not UTF-8, or its
            content breaks a rule (see :func:`parse_skill_md`).
    """
    folder = Path(path)
    fail = _failer(folder.name)
    if folder.is_symlink():
        raise fail("is a symlink; skill folders must be real directories")
    if not folder.is_dir():
        raise fail("is not a directory")
    try:
        info = os.lstat(folder / SKILL_FILE)
    except FileNotFoundError:
        raise fail(f"has no {SKILL_FILE}") from None
    if stat.S_ISLNK(info.st_mode):
        raise fail(f"{SKILL_FILE} is a symlink")
    if not stat.S_ISREG(info.st_mode):
        raise fail(f"{SKILL_FILE} is not a regular file")
    if info.st_size > MAX_SKILL_MD_BYTES:
        raise fail(f"{SKILL_FILE} has {info.st_size} bytes; the limit is {MAX_SKILL_MD_BYTES}")
    # O_NOFOLLOW closes the window between the lstat above and the open; read one byte past the cap in case
    # the file grew meanwhile.
    descriptor = os.open(folder / SKILL_FILE, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(descriptor, "rb") as handle:
        data = handle.read(MAX_SKILL_MD_BYTES + 1)
    if len(data) > MAX_SKILL_MD_BYTES:
        raise fail(f"{SKILL_FILE} is larger than {MAX_SKILL_MD_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise fail(f"{SKILL_FILE} is not valid UTF-8") from None
    return parse_skill_md(text, folder.name)


def read_library_dir(directory: str | Path, *, max_skills: int = 64) -> list[Skill]:
    """Read every skill folder in ``directory`` (untrusted input), in folder-name order.

    Hidden entries (``.git``, ``.DS_Store``) and plain files (a README) are skipped; symlinks are rejected.

    Args:
        directory: the library directory.
        max_skills: the most skill folders accepted.

    Returns:
        The skills.

    Raises:
        SkillFolderError: the directory is missing, has more than ``MAX_DIRECTORY_ENTRIES`` entries or more
            than ``max_skills`` folders, holds a symlink, or a folder is rejected by :func:`read_skill_dir`.
    """
    root = Path(directory)
    if not root.is_dir():
        raise SkillFolderError(f"skill library directory {str(root)!r} does not exist or is not a directory")
    names = []
    with os.scandir(root) as entries:
        for count, entry in enumerate(entries, 1):
            if count > MAX_DIRECTORY_ENTRIES:
                raise SkillFolderError(
                    f"skill library directory {str(root)!r} has more than {MAX_DIRECTORY_ENTRIES} entries"
                )
            if entry.name.startswith("."):
                continue
            if entry.is_symlink():
                raise _failer(entry.name)("is a symlink; skill folders must be real directories")
            if entry.is_dir(follow_symlinks=False):
                names.append(entry.name)
    if len(names) > max_skills:
        raise SkillFolderError(
            f"skill library directory {str(root)!r} has {len(names)} skill folders; the limit is {max_skills}"
        )
    return [read_skill_dir(root / name) for name in sorted(names)]


def _show(value: object) -> str:
    """Describe an untrusted YAML value without str() on containers (aliases can make that exponential)."""
    return repr(value[:80]) if isinstance(value, str) else f"<{type(value).__name__}>"


def _failer(folder_name: str):
    """Return a function building SkillFolderErrors that name ``folder_name``."""
    shown = folder_name[:80]
    return lambda rule: SkillFolderError(f"skill folder {shown!r}: {rule}")


def parse_skill_md(text: str, folder_name: str) -> Skill:
    """Parse ``SKILL.md`` text found in a folder called ``folder_name`` (untrusted input).

    Rules: front matter between ``---`` lines, loaded with ``yaml.safe_load`` into a mapping; ``name`` equals
    the folder name and is a valid Agent Skills name (lowercase letters, digits, single inner hyphens, <= 64
    chars) that maps to a valid internal name; ``description`` is 1..1024 characters; ``metadata`` (optional)
    maps strings to strings. ``metadata.kind`` is ``program`` or ``guidance`` (default ``guidance``, so a
    plain Agent Skills folder loads as an always-on guidance skill). A program body holds exactly one ``sage``
    fenced block whose definition parses, has the folder's name and no trailing calls; a guidance body is the
    text (stripped). Provenance is read from ``provenance.KEY`` entries or from a ``provenance`` entry holding
    a JSON object.

    Args:
        text: the file content.
        folder_name: the name of the folder holding it.

    Returns:
        The skill.

    Raises:
        SkillFolderError: a rule is broken; the message names the folder and the rule.
    """
    fail = _failer(folder_name)
    if not (len(folder_name) <= 64 and _DISK_NAME_RE.fullmatch(folder_name)):
        raise fail(
            "invalid folder name: use 1-64 lowercase letters, digits and single hyphens "
            "(no leading, trailing or double hyphen, no '.', '/' or '..')"
        )
    match = _FRONT_MATTER_RE.fullmatch(text.replace("\r\n", "\n"))
    if match is None:
        raise fail(f"{SKILL_FILE} must start with YAML front matter between '---' lines")
    try:
        front = yaml.safe_load(match["front"] or "")
    except Exception as error:  # noqa: BLE001 - PyYAML raises assorted exception types on hostile input
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise fail(f"front matter is not safe YAML: {first_line[:200]}") from None
    if not isinstance(front, dict):
        raise fail("front matter must be a YAML mapping")
    name, description = front.get("name"), front.get("description")
    if not isinstance(name, str) or name != folder_name:
        raise fail(f"front-matter name {_show(name)} must equal the folder name")
    problem = name_problem(internal_name(name))
    if problem:
        raise fail(problem)
    if not isinstance(description, str) or not 1 <= len(description) <= 1024:
        raise fail("description is required: a string of 1 to 1024 characters")
    metadata = front.get("metadata", {})
    if not isinstance(metadata, dict):
        raise fail("metadata must be a mapping of string keys to string values")
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise fail(f"metadata value of {_show(key)} must be a string (quote it), got {type(value).__name__}")
    kind = metadata.get("kind", "guidance")
    if kind not in ("program", "guidance"):
        raise fail(f"metadata kind {kind[:40]!r} is unknown; use 'program' or 'guidance'")
    fields: dict[str, Any] = {
        "name": internal_name(name),
        "kind": kind,
        "description": description,
        "status": metadata.get("status", "active"),
        "provenance": _provenance(metadata, fail),
    }
    for key in ("version", "uses", "created_in_task", "created_in_chain"):
        if key in metadata:
            if not _COUNT_RE.fullmatch(metadata[key]):
                raise fail(f"metadata {key} {metadata[key][:40]!r} must be a non-negative integer in a string")
            fields[key] = int(metadata[key])
    body = match["body"] or ""
    if kind == "program":
        fields.update(_program_fields(body, fields["name"], metadata, fail))
    else:
        fields.update(
            text=body.strip(), trigger=metadata.get("trigger", "general"), pattern=metadata.get("pattern", "")
        )
    try:
        return Skill(**fields)
    except SkillError as error:
        raise fail(str(error)) from None


def _provenance(metadata: dict[str, str], fail) -> dict[str, str]:
    """Collect provenance from ``provenance.KEY`` entries and/or a JSON-encoded ``provenance`` entry."""
    provenance: dict[str, str] = {}
    if "provenance" in metadata:
        try:
            decoded = json.loads(metadata["provenance"])
        except ValueError:
            raise fail("metadata provenance must be a JSON object of strings") from None
        if not isinstance(decoded, dict) or not all(isinstance(v, str) for v in decoded.values()):
            raise fail("metadata provenance must be a JSON object of strings")
        provenance.update(decoded)
    for key, value in metadata.items():
        if key.startswith(_PROVENANCE_PREFIX):
            provenance[key[len(_PROVENANCE_PREFIX) :]] = value
    return provenance


def _program_fields(body: str, name: str, metadata: dict[str, str], fail) -> dict[str, Any]:
    """Extract and check the ``sage`` block of a program skill; return its ``source`` and ``params``."""
    # Counting fences first keeps the lazy block search linear on bodies full of unclosed fences.
    blocks = _SAGE_BLOCK_RE.findall(body) if body.count("```sage") == 1 else []
    if len(blocks) != 1:
        raise fail(f"a program skill needs exactly one ```sage fenced block in the body, found {len(blocks)}")
    try:
        parsed, calls = parse_definition(blocks[0])
    except SkillError as error:
        raise fail(f"program does not parse: {error}") from None
    if parsed.name != name:
        raise fail(f"the program defines {parsed.name!r} but the folder is for {name!r}")
    if calls:
        raise fail("the sage block must hold only the definition (no trailing call lines)")
    if "params" in metadata and [p.strip() for p in metadata["params"].split(",") if p.strip()] != list(parsed.params):
        raise fail(f"metadata params {metadata['params'][:80]!r} differ from the program's {parsed.signature}")
    return {"source": parsed.source, "params": parsed.params}
