"""The ALFWorld domain: household tasks on TextWorld's PDDL engine, official or generated games.

Exports load lazily, so that importing this package does not start TextWorld (about 1 s).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sage_envs.domains.alfworld.domain import AlfworldDomain
    from sage_envs.domains.alfworld.expert import AlfworldExpert
    from sage_envs.domains.alfworld.textworld_engine import AlfworldGame

__all__ = ["AlfworldDomain", "AlfworldExpert", "AlfworldGame"]

_EXPORTS = {
    "AlfworldDomain": "sage_envs.domains.alfworld.domain",
    "AlfworldExpert": "sage_envs.domains.alfworld.expert",
    "AlfworldGame": "sage_envs.domains.alfworld.textworld_engine",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
