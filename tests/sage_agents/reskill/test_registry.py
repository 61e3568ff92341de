"""Library versions: bundles applied to a snapshot copy, accept / revert, statuses, the max-active cap."""

import json

import pytest

from sage_agents.reskill.registry import Bundle, Operation, VersionRegistry, shown_library
from sage_envs import Skill, SkillLibrary
from sage_envs.error import SkillError, SkillLimitError, UnknownSkillError


def g(name, text="do it", trigger="general", pattern=""):
    return Skill(name=name, kind="guidance", text=text, trigger=trigger, pattern=pattern)


def add(name, **kw):
    return Operation("add", name, g(name, **kw), reason="because")


def test_propose_accept_makes_the_candidate_current():
    registry = VersionRegistry(SkillLibrary([g("base_tip")]))
    version = registry.propose(Bundle([add("heat_first")], creator="rule"), step=3)
    assert version.id == 1 and version.parent == 0 and registry.candidate is version
    assert registry.current.id == 0 and [s.name for s in registry.active_skills()] == ["base_tip"]
    candidate = version.library.get("heat_first")
    assert candidate.status == "testing"
    assert candidate.provenance == {
        "creator": "rule",
        "step": "3",
        "library_version": "1",
        "op": "add",
        "reason": "because",
    }
    # the new arm shows the testing skill as active; the old arm does not have it
    assert registry.env_library("candidate").get("heat_first").status == "active"
    assert "heat_first" not in registry.env_library("current")
    accepted = registry.accept(step=9)
    assert accepted.status == "accepted" and accepted.decided_step == 9 and registry.candidate is None
    assert registry.current.id == 1 and {s.name for s in registry.active_skills()} == {"base_tip", "heat_first"}


def test_reject_reverts_to_the_snapshot_and_records_the_rejected_skills():
    registry = VersionRegistry(SkillLibrary([g("base_tip")]))
    snapshot = registry.current.library.to_dict()
    registry.propose(Bundle([add("bad_tip"), Operation("delete", "base_tip")]), step=1)
    rejected = registry.reject(step=6)
    assert rejected.status == "rejected" and rejected.library.get("bad_tip").status == "rejected"
    assert registry.current.id == 0 and registry.current.library.to_dict() == snapshot
    assert [v.status for v in registry.versions] == ["base", "rejected"]


def test_modify_makes_a_new_version_and_delete_prunes():
    registry = VersionRegistry(SkillLibrary([g("tip", text="v1"), g("old_tip")]))
    modified = Operation("modify", "tip", g("tip", text="v2", trigger="action_pattern", pattern="^take"))
    registry.propose(Bundle([modified, Operation("delete", "old_tip")]), step=2)
    registry.accept(step=7)
    library = registry.current.library
    assert library.get("tip").text == "v2" and library.get("tip").version == 2
    assert [s.version for s in library.history("tip")] == [1, 2] and "old_tip" not in library
    assert library.get("tip").status == "active"


def test_invalid_bundles():
    registry = VersionRegistry(SkillLibrary([g("tip")]), max_active=2)
    with pytest.raises(SkillError, match="use modify"):
        registry.propose(Bundle([add("tip")]), 0)
    with pytest.raises(UnknownSkillError, match="Did you mean 'tip'"):
        registry.propose(Bundle([Operation("delete", "tipp")]), 0)
    with pytest.raises(SkillLimitError, match="max_active=2"):
        registry.propose(Bundle([add("a"), add("b")]), 0)
    registry.propose(Bundle([add("a"), add("b"), Operation("delete", "tip")]), 0)  # a delete makes room
    with pytest.raises(SkillError, match="still under test"):
        registry.propose(Bundle([add("c")]), 0)
    with pytest.raises(SkillError, match="1-3 operations"):
        Bundle([])
    with pytest.raises(SkillError, match="once"):
        Bundle([add("a"), Operation("delete", "a")])
    with pytest.raises(SkillError, match="needs a guidance Skill"):
        Operation("add", "x", None)
    with pytest.raises(SkillError, match="operation 'rename'"):
        Operation("rename", "x")


def test_registry_round_trips_through_json():
    registry = VersionRegistry(SkillLibrary([g("tip")]))
    registry.propose(Bundle([add("new_tip", trigger="beginning")], creator="llm", diagnosis="d", evidence={"x": 1}), 4)
    restored = VersionRegistry.from_dict(json.loads(json.dumps(registry.to_dict())))
    assert restored.to_dict() == registry.to_dict()
    assert restored.candidate.bundle.operations[0].skill.trigger == "beginning"


def test_shown_library_only_flips_testing_skills():
    library = SkillLibrary([g("a"), g("b")])
    library.get("b").status = "testing"
    shown = shown_library(library)
    assert [s.status for s in shown] == ["active", "active"] and library.get("b").status == "testing"
