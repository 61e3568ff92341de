"""`sage skills show / export / validate` on libraries, checkpoints and runs built here."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from sage_app.cli import app
from sage_envs import Skill, SkillLibrary
from sage_envs.skills.dsl import parse_definition

WIDE = {"COLUMNS": "250", "TERMINAL_WIDTH": "250"}
GRAB_V1 = "skill grab(obj):\n    take {obj}"
GRAB_V2 = "skill grab(obj):\n    look\n    take {obj}"


def _program(source: str, **fields) -> Skill:
    skill = parse_definition(source)[0]
    for key, value in fields.items():
        setattr(skill, key, value)
    return skill


def _bank() -> SkillLibrary:
    """grab in two versions (the second used 3 times) and tip, a guidance skill."""
    bank = SkillLibrary()
    bank.add(_program(GRAB_V1, description="take obj", provenance={"creator": "sage", "step": "1"}))
    bank.add(_program(GRAB_V2, description="look, take obj", uses=3, provenance={"creator": "sage", "step": "4"}))
    bank.add(Skill("tip", "guidance", description="a tip", text="Open a closed receptacle first."))
    return bank


EVENTS = [
    {"event": "created", "step": 2, "version": 1, "op": "add", "skill": "tip", "creator": "rule", "reason": "r"},
    *[
        {
            "event": "tested",
            "step": s,
            "version": 1,
            "posterior": {"p_new": p, "new": {"mean": p}, "old": {"mean": 0.5}},
        }
        for s, p in ((3, 0.6), (4, 0.8))
    ],
    {"event": "accepted", "step": 4, "version": 1, "op": "add", "skill": "tip"},
]


@pytest.fixture
def run(tmp_path):
    """A run folder: an older and the newest checkpoint (named by ``latest``), and a lifecycle log."""
    checkpoints = tmp_path / "run" / "checkpoints"
    old = checkpoints / "step_0000002"
    old.mkdir(parents=True)
    (old / "skill_bank.json").write_text(json.dumps(SkillLibrary([_program(GRAB_V1)]).to_dict()))
    new = checkpoints / "step_0000004"
    new.mkdir()
    (new / "skill_bank.json").write_text(json.dumps(_bank().to_dict()))
    _bank().save(new / "skill_library")
    (checkpoints / "latest").write_text("step_0000004")
    (tmp_path / "run" / "reskill").mkdir()
    (tmp_path / "run" / "reskill" / "lifecycle.jsonl").write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    return tmp_path / "run"


def _invoke(*args):
    return CliRunner().invoke(app, ["skills", *map(str, args)], env=WIDE)


def _rows(output: str) -> dict[str, list[str]]:
    """The table rows of ``sage skills show``, by skill signature."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells and cells[0] and cells[0] != "skill":
            rows[cells[0]] = cells[1:]
    return rows


def test_show_a_run_reads_its_newest_checkpoint_and_lifecycle(run, tmp_path):
    result = _invoke("show", run)
    assert result.exit_code == 0, result.output
    assert "step_0000004" in result.output and "skill bank (skill_bank.json): 2 skills" in result.output
    rows = _rows(result.output)
    # kind, version, versions, status, uses, provenance, description
    assert rows["grab(obj)"] == ["program", "2", "1, 2", "active", "3", "creator=sage, step=4", "look, take obj"]
    assert rows["tip"][:5] == ["guidance", "1", "1", "active", "0"]
    assert "ReSkill lifecycle" in result.output and "4 events" in result.output
    assert "step     2  created    version=1 op=add skill=tip reason=r" in result.output
    assert "test of version 1: steps 3-4, last P(new)=0.80" in result.output
    assert "plot: none drawn yet" in result.output
    plotted = _invoke("show", run, "--plot", tmp_path / "life.png")
    assert plotted.exit_code == 0, plotted.output
    assert (tmp_path / "life.png").read_bytes()[:4] == b"\x89PNG" and f"plot: {tmp_path / 'life.png'}" in plotted.output


def test_diff_between_two_versions(run):
    result = _invoke("show", run, "--diff", "grab", "1", "2")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[:2] == ["--- grab v1", "+++ grab v2"]
    assert "+    look" in lines and "-  version: '1'" in lines and "+  version: '2'" in lines
    assert "+  uses: '3'" in lines and "+  provenance.step: '4'" in lines
    missing = _invoke("show", run, "--diff", "grab", "1", "7")
    assert missing.exit_code != 0 and "has no version 7" in missing.output and "versions are 1, 2" in missing.output
    unknown = _invoke("show", run, "--diff", "grabb", "1", "2")
    assert unknown.exit_code != 0 and "no skill 'grabb'" in unknown.output


def test_show_a_reskill_checkpoint_marks_rejected_superseded_and_pruned_versions(tmp_path):
    from sage_agents.reskill.registry import Bundle, Operation, VersionRegistry

    def tip(name, text):
        return Skill(name, "guidance", description=name, text=text)

    registry = VersionRegistry()
    registry.propose(Bundle([Operation("add", "tip", tip("tip", "one")), Operation("add", "old", tip("old", "x"))]), 1)
    registry.accept(3)
    registry.propose(Bundle([Operation("modify", "tip", tip("tip", "two"))]), 4)
    registry.reject(6)
    registry.propose(Bundle([Operation("modify", "tip", tip("tip", "three")), Operation("delete", "old")]), 7)
    registry.accept(9)
    checkpoint = tmp_path / "step_0000009"
    checkpoint.mkdir()
    (checkpoint / "reskill_state.json").write_text(json.dumps({"registry": registry.to_dict()}))
    result = _invoke("show", checkpoint)
    assert result.exit_code == 0, result.output
    rows = _rows(result.output)
    # numbered by the library version that made each: 2 (rejected) and 3 (accepted) are both tip's second version
    assert rows["tip"][:4] == ["guidance", "3", "1, 2, 3", "active"]
    assert rows["old"][:4] == ["guidance", "1", "1", "pruned"]
    from sage_app.skills_cli import resolve, status

    [shelf] = resolve(checkpoint).shelves
    tips = shelf.versions["tip"]
    assert [(n, s.text, status(shelf, n, s)) for n, s in tips.items()] == [
        (1, "one", "superseded"),
        (2, "two", "rejected"),
        (3, "three", "active"),
    ]
    diff = _invoke("show", checkpoint, "--diff", "tip", "2", "3")
    assert "-two" in diff.output.splitlines() and "+three" in diff.output.splitlines()


def test_export_round_trip(run, tmp_path):
    result = _invoke("export", run, tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "wrote 2 skill folders" in result.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["grab", "tip"]
    loaded = SkillLibrary.load(tmp_path / "out")
    assert [s.to_dict() for s in loaded] == [s.to_dict() for s in _bank()]  # the live versions, every field
    again = _invoke("export", run, tmp_path / "out")  # never mixed into a filled folder
    assert again.exit_code != 0 and "is not empty" in again.output
    shown = _invoke("show", tmp_path / "out")  # a SKILL.md folder shows too (latest versions only)
    assert _rows(shown.output)["grab(obj)"][:4] == ["program", "2", "2", "active"]


def test_validate_lists_each_rejected_folder_with_its_reason(tmp_path):
    lib = tmp_path / "lib"
    _bank().save(lib)
    (lib / "bad-yaml").mkdir()
    (lib / "bad-yaml" / "SKILL.md").write_text("---\nname: bad-yaml\ndescription: [unclosed\n---\nt\n")
    (lib / "other-name").mkdir()
    (lib / "other-name" / "SKILL.md").write_text("---\nname: else\ndescription: d\n---\nt\n")
    (lib / "no-file").mkdir()
    os.symlink(lib / "tip", lib / "linked")
    (lib / "README.md").write_text("not a skill")  # plain files and hidden entries are skipped, as by the loader
    (lib / ".git").mkdir()
    result = _invoke("validate", lib)
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    assert "ok        grab" in lines and "ok        tip" in lines
    assert "rejected  bad-yaml: skill folder 'bad-yaml': front matter is not safe YAML" in result.output
    assert (
        "rejected  other-name: skill folder 'other-name': front-matter name 'else' must equal the folder name" in lines
    )
    assert "rejected  no-file: skill folder 'no-file': has no SKILL.md" in lines
    assert "rejected  linked: skill folder 'linked': is a symlink; skill folders must be real directories" in lines
    assert lines[-1] == "2 accepted, 4 rejected"
    clean = _invoke("validate", lib / "tip")  # one skill's folder
    assert clean.exit_code == 0 and clean.output.splitlines() == ["ok        tip", "1 accepted, 0 rejected"]


def test_validate_reports_the_loaders_folder_rules(tmp_path, monkeypatch):
    import sage_envs.skills.skillmd as skillmd

    _bank().save(tmp_path)
    monkeypatch.setattr(skillmd, "MAX_DIRECTORY_ENTRIES", 1)  # the loader's own cap, as the loader reads it
    result = _invoke("validate", tmp_path)
    assert result.exit_code == 1 and "has more than 1 entries" in result.output


def test_show_refuses_what_is_not_a_library(tmp_path):
    missing = _invoke("show", tmp_path / "nothing")
    assert missing.exit_code != 0 and "is not a folder" in missing.output
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    empty = _invoke("show", tmp_path / "run")
    assert empty.exit_code != 0 and "has no checkpoint yet" in empty.output
    (tmp_path / "lib" / "Bad_Name").mkdir(parents=True)
    (tmp_path / "lib" / "Bad_Name" / "SKILL.md").write_text("---\nname: Bad_Name\ndescription: d\n---\nt\n")
    bad = _invoke("show", tmp_path / "lib")
    assert bad.exit_code != 0 and "invalid folder name" in bad.output
