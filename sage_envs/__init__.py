"""Gymnasium task-chain environments with a skill library (SAGE / ReSkill).

``import sage_envs`` registers every env id (see :mod:`sage_envs.registration`) and loads no torch.
"""

from sage_envs.chain import SageChainEnv
from sage_envs.domain import Domain, StepResult, TaskGame, TaskSpec
from sage_envs.registration import ENV_IDS, domain_class, register_envs
from sage_envs.skills import Limits, Skill, SkillLibrary

register_envs()

__version__ = "0.1.0"

__all__ = [
    "ENV_IDS",
    "Domain",
    "Limits",
    "SageChainEnv",
    "Skill",
    "SkillLibrary",
    "StepResult",
    "TaskGame",
    "TaskSpec",
    "domain_class",
]
