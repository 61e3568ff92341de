"""The skill library (program and guidance skills), the skill program language and SKILL.md folders."""

from __future__ import annotations

from sage_envs.skills.dsl import CallResult, Limits, parse_call, parse_definition, run_call, run_calls
from sage_envs.skills.library import SkillLibrary
from sage_envs.skills.skill import Skill, set_source_parser
from sage_envs.skills.skillmd import read_library_dir, read_skill_dir, write_skill_dir

# Modules import one way (skill <- dsl <- skillmd <- library); Skill.from_dict gets the DSL parser from here.
set_source_parser(parse_definition)

__all__ = [
    "CallResult",
    "Limits",
    "Skill",
    "SkillLibrary",
    "parse_call",
    "parse_definition",
    "read_library_dir",
    "read_skill_dir",
    "run_call",
    "run_calls",
    "write_skill_dir",
]
