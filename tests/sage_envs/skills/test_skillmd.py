"""Tests of SKILL.md folders: the written format and every rejection rule for untrusted folders."""

from __future__ import annotations

import os
import pathlib
import re

import pytest
import yaml

from sage_envs.error import SkillError, SkillFolderError
from sage_envs.skills import Skill, SkillLibrary, parse_definition, read_skill_dir, write_skill_dir
from sage_envs.skills.skillmd import MAX_SKILL_MD_BYTES, parse_skill_md, read_library_dir, render_skill_md

PROGRAM = "skill heat_then_place(obj, place):\n    # Heat it.\n    heat {obj}\n    move {obj} to {place}"


def program_md(name="heat-then-place", description="Heat it.", metadata=None, body=None) -> str:
    meta = {"kind": "program", "version": "1"} if metadata is None else metadata
    front = yaml.safe_dump({"name": name, "description": description, "metadata": meta}, sort_keys=False)
    body = f"```sage\n{PROGRAM}\n```\n" if body is None else body
    return f"---\n{front}---\n{body}"


def make_folder(root, folder, text):
    path = root / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(text, encoding="utf-8")
    return path


def test_written_file_follows_agent_skills_layout(tmp_path):
    skill = parse_definition(PROGRAM)[0]
    skill.created_in_task, skill.provenance = 0, {"creator": "sage"}
    folder = write_skill_dir(skill, tmp_path)
    assert folder == tmp_path / "heat-then-place"
    text = (folder / "SKILL.md").read_text()
    assert text.startswith("---\nname: heat-then-place\ndescription: Heat it.\nmetadata:\n")
    front = yaml.safe_load(text.split("---\n")[1])
    assert all(isinstance(v, str) for v in front["metadata"].values())
    assert front["metadata"]["provenance.creator"] == "sage" and front["metadata"]["version"] == "1"
    assert f"```sage\n{PROGRAM}\n```" in text
    assert read_skill_dir(folder) == skill


def test_guidance_round_trip_and_plain_agent_skill(tmp_path):
    skill = Skill(
        "after_open",
        "guidance",
        description="d",
        text="## When to Use\nx\n\n## Action\ny",
        trigger="action_pattern",
        pattern="^open ",
        status="testing",
    )
    assert read_skill_dir(write_skill_dir(skill, tmp_path)) == skill
    # A SKILL.md without project metadata loads as an always-on guidance skill.
    plain = make_folder(tmp_path, "pdf-tips", "---\nname: pdf-tips\ndescription: Tips.\n---\nUse pdftotext.\n")
    loaded = read_skill_dir(plain)
    assert (loaded.name, loaded.kind, loaded.trigger, loaded.text) == (
        "pdf_tips",
        "guidance",
        "general",
        "Use pdftotext.",
    )


def test_empty_description_is_written_as_signature(tmp_path):
    skill = parse_definition("skill look_twice():\n    look\n    look")[0]
    assert read_skill_dir(write_skill_dir(skill, tmp_path)).description == "look_twice()"


def test_json_encoded_provenance_is_accepted(tmp_path):
    text = program_md(metadata={"kind": "program", "provenance": '{"creator": "x"}', "provenance.step": "3"})
    assert read_skill_dir(make_folder(tmp_path, "heat-then-place", text)).provenance == {
        "creator": "x",
        "step": "3",
    }


def test_library_dir_skips_hidden_and_plain_files(tmp_path):
    make_folder(tmp_path, "heat-then-place", program_md())
    (tmp_path / ".git").mkdir()
    (tmp_path / "README.md").write_text("not a skill")
    assert [s.name for s in read_library_dir(tmp_path)] == ["heat_then_place"]


# ---------------------------------------------------------------- hostile folders
@pytest.mark.parametrize(
    "folder, text, rule",
    [
        ("heat-then-place", program_md(name="other-name"), "must equal the folder name"),
        ("Heat", program_md(name="Heat"), "invalid folder name"),
        ("heat--place", program_md(name="heat--place"), "invalid folder name"),
        ("-heat", program_md(name="-heat"), "invalid folder name"),
        ("heat-", program_md(name="heat-"), "invalid folder name"),
        ("1heat", program_md(name="1heat"), "invalid skill name"),
        ("heat-then-place", "name: heat-then-place\n", "must start with YAML front matter"),
        ("heat-then-place", "---\nname: [unclosed\n---\n", "not safe YAML"),
        ("heat-then-place", "---\n- a list\n---\n", "must be a YAML mapping"),
        (
            "heat-then-place",
            "---\nname: !!python/object/apply:os.system ['true']\ndescription: x\n---\n",
            "not safe YAML",
        ),
        ("heat-then-place", "---\n!!python/object:builtins.dict {}\n---\n", "not safe YAML"),
        ("heat-then-place", program_md(description=""), "description is required"),
        ("heat-then-place", program_md(description="d" * 1025), "description is required"),
        (
            "heat-then-place",
            "---\nname: heat-then-place\nmetadata: {kind: program}\n---\n",
            "description is required",
        ),
        (
            "heat-then-place",
            program_md(metadata={"kind": "program", "version": 2}),
            "'version' must be a string",
        ),
        ("heat-then-place", program_md(metadata={"kind": "program", "x": ["a"]}), "'x' must be a string"),
        ("heat-then-place", program_md(metadata="kind: program"), "metadata must be a mapping"),
        ("heat-then-place", program_md(metadata={"kind": "script"}), "kind 'script' is unknown"),
        (
            "heat-then-place",
            program_md(metadata={"kind": "program", "version": "-1"}),
            "non-negative integer",
        ),
        ("heat-then-place", program_md(metadata={"kind": "program", "status": "Bad!"}), "status="),
        (
            "heat-then-place",
            program_md(metadata={"kind": "program", "provenance": "[1]"}),
            "JSON object of strings",
        ),
        ("heat-then-place", program_md(body="no block\n"), "exactly one ```sage fenced block"),
        (
            "heat-then-place",
            program_md(body=f"```sage\n{PROGRAM}\n```\n```sage\n{PROGRAM}\n```\n"),
            "exactly one",
        ),
        (
            "heat-then-place",
            program_md(body="```sage\nskill heat_then_place(obj, place)\n    x\n```\n"),
            "program does not parse: line 1: missing ':'",
        ),
        ("heat-then-place", program_md(body="```sage\nskill other(obj):\n    x\n```\n"), "defines 'other'"),
        (
            "heat-then-place",
            program_md(body=f"```sage\n{PROGRAM}\ncall heat_then_place(a, b)\n```\n"),
            "no trailing call lines",
        ),
        (
            "heat-then-place",
            program_md(metadata={"kind": "program", "params": "obj"}),
            "differ from the program's",
        ),
        (
            "after-open",
            "---\nname: after-open\ndescription: d\nmetadata:\n  trigger: action_pattern\n"
            "  pattern: 'open ('\n---\ntext\n",
            "not a valid regex",
        ),
        (
            "after-open",
            "---\nname: after-open\ndescription: d\nmetadata:\n  trigger: action_pattern\n"
            "  pattern: '(a*)*b'\n---\ntext\n",
            "catastrophic backtracking",
        ),
        (
            "after-open",
            "---\nname: after-open\ndescription: d\nmetadata:\n  trigger: when\n---\ntext\n",
            "trigger='when'",
        ),
        (
            "after-open",
            "---\nname: after-open\ndescription: d\n---\n" + "t" * 2001,
            "text has 2001 characters",
        ),
        (
            "after-open",
            "---\nname: after-open\ndescription: d\nmetadata:\n  kind: guidance\n  x: &a [*a]\n---\nt\n",
            "'x' must be a string",
        ),
    ],
)
def test_hostile_content_is_rejected(tmp_path, folder, text, rule):
    path = make_folder(tmp_path, folder, text)
    with pytest.raises(SkillFolderError) as caught:
        read_skill_dir(path)
    assert f"skill folder {folder!r}" in str(caught.value)
    assert rule in str(caught.value)


def test_billion_laughs_is_rejected_quickly(tmp_path):
    lines = ["---", "name: x", "description: d", "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 12)]
    lines += ["metadata:", "  kind: *a11", "---", "body"]
    path = make_folder(tmp_path, "x", "\n".join(lines))
    with pytest.raises(SkillFolderError, match="'kind' must be a string"):
        read_skill_dir(path)
    text = "\n".join(lines).replace("name: x\n", "").replace("metadata:", "name: *a11\nmetadata:")
    with pytest.raises(SkillFolderError, match="name <list> must equal"):
        parse_skill_md(text, "x")


def test_path_traversal_names_are_rejected(tmp_path):
    for name in ("..", "../evil", "a/b", "a.b", "..-evil"):
        with pytest.raises(SkillFolderError, match="invalid folder name"):
            parse_skill_md(program_md(name=name), name)


def test_huge_file_is_rejected_unread(tmp_path):
    path = make_folder(tmp_path, "heat-then-place", program_md() + "x" * MAX_SKILL_MD_BYTES)
    with pytest.raises(SkillFolderError, match=f"the limit is {MAX_SKILL_MD_BYTES}"):
        read_skill_dir(path)


def test_not_utf8_is_rejected(tmp_path):
    path = tmp_path / "heat-then-place"
    path.mkdir()
    (path / "SKILL.md").write_bytes(b"---\nname: \xff\n---\n")
    with pytest.raises(SkillFolderError, match="not valid UTF-8"):
        read_skill_dir(path)


def test_symlinks_are_rejected(tmp_path):
    real = make_folder(tmp_path / "elsewhere", "heat-then-place", program_md())
    lib = tmp_path / "lib"
    lib.mkdir()
    os.symlink(real, lib / "heat-then-place")
    with pytest.raises(SkillFolderError, match="is a symlink"):
        read_skill_dir(lib / "heat-then-place")
    with pytest.raises(SkillFolderError, match="'heat-then-place': is a symlink"):
        read_library_dir(lib)
    inner = tmp_path / "inner" / "heat-then-place"
    inner.mkdir(parents=True)
    os.symlink(real / "SKILL.md", inner / "SKILL.md")
    with pytest.raises(SkillFolderError, match="SKILL.md is a symlink"):
        read_skill_dir(inner)
    skill = parse_definition(PROGRAM)[0]
    with pytest.raises(SkillFolderError, match="refusing to write through a symlink"):
        write_skill_dir(skill, lib)
    assert (real / "SKILL.md").read_text() == program_md()


def test_missing_pieces_are_rejected(tmp_path):
    with pytest.raises(SkillFolderError, match="is not a directory"):
        read_skill_dir(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SkillFolderError, match="has no SKILL.md"):
        read_skill_dir(tmp_path / "empty")
    (tmp_path / "dir-md" / "SKILL.md").mkdir(parents=True)
    with pytest.raises(SkillFolderError, match="not a regular file"):
        read_skill_dir(tmp_path / "dir-md")
    with pytest.raises(SkillFolderError, match="does not exist"):
        read_library_dir(tmp_path / "missing")


def test_folder_count_is_capped(tmp_path):
    for i in range(3):
        text = f"---\nname: tip-{i}\ndescription: d\n---\nt\n"
        make_folder(tmp_path, f"tip-{i}", text)
    assert len(SkillLibrary.load(tmp_path, max_size=3)) == 3
    with pytest.raises(SkillFolderError, match="3 skill folders; the limit is 2"):
        SkillLibrary.load(tmp_path, max_size=2)


def test_render_is_stable():
    skill = Skill("tip", "guidance", description="d", text="t", uses=2)
    assert render_skill_md(skill) == render_skill_md(skill)
    assert parse_skill_md(render_skill_md(skill), "tip") == skill


def test_docs_examples_parse():
    docs = (pathlib.Path(__file__).parents[3] / "docs" / "skills.md").read_text()
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", docs, re.DOTALL | re.MULTILINE)
    programs = [body for lang, body in blocks if not lang and body.startswith("skill ")]
    assert programs
    for block in programs:
        skill, calls = parse_definition(block)
        assert calls == [("find_and_take", ["apple 1", "countertop 1"])] and skill.name == "find_and_take"
    example = re.search(r"````markdown\n(.*?)````", docs, re.DOTALL)[1]
    skill = parse_skill_md(example, "heat-then-place")
    assert (skill.version, skill.uses, skill.params) == (2, 3, ("obj", "place"))
    assert render_skill_md(skill) == example


def test_renamed_skill_cannot_write_outside_the_library_folder(tmp_path):
    lib_dir = tmp_path / "deep" / "lib"
    skill = parse_definition(PROGRAM)[0]
    with pytest.raises(SkillError, match="invalid skill name '../x'"):
        skill.name = "../x"  # the attack of issue 18: refused on assignment...
    assert skill.name == "heat_then_place"
    object.__setattr__(skill, "name", "../x")  # ...and forced past the dataclass, refused where it is written
    library = SkillLibrary([parse_definition(PROGRAM)[0]])
    library._versions["heat_then_place"][-1] = skill
    with pytest.raises(SkillFolderError, match="resolves outside the library folder"):
        library.save(lib_dir)
    for name in ("..", ".", "", "../../escape", "/tmp/abs"):
        object.__setattr__(skill, "name", name)
        with pytest.raises(SkillFolderError, match="resolves outside the library folder"):
            write_skill_dir(skill, lib_dir)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["deep", "deep/lib"]
