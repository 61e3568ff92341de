"""Exceptions raised by sage_envs. Bad *actions* never raise: they are flagged in ``info`` instead."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from gymnasium.error import ResetNeeded


class SageError(Exception):
    """Base class of every sage_envs exception."""


class SkillError(SageError):
    """A skill definition, program or call is not acceptable."""


class SkillSyntaxError(SkillError):
    """A skill program does not parse under the DSL grammar."""


class SkillLimitError(SkillError):
    """A program, call or library exceeds one of the hard limits."""


class UnknownSkillError(SkillError, KeyError):
    """A skill name is not in the library."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class SkillFolderError(SkillError):
    """A SKILL.md folder is malformed or unsafe and was rejected."""


class DataNotFoundError(SageError):
    """Game data (e.g. the official ALFWorld json_2.1.1 folder) is missing."""


class InvalidConfigError(SageError, ValueError):
    """An env or trainer argument is outside its allowed values."""


class NoDomainError(SageError, LookupError):
    """A registered env id's entry point names no domain class (it is not a ``SageChainEnv`` subclass with one)."""


class ResetNeededError(SageError, ResetNeeded):
    """``step`` was called before ``reset()``, after the chain terminated or after ``close()``: call ``reset()``."""


def suggest(name: str, candidates: Iterable[str]) -> str:
    """Return a " Did you mean 'x'?" hint for ``name`` among ``candidates``, or "" when nothing is close."""
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


class GameGenerationError(SageError):
    """A game could not be generated (no solvable placement within the allowed attempts)."""
