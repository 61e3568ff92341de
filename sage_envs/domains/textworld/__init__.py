"""The TextWorld domain: seeded cooking games (``tw-cooking``), chains of recipes in one house.

Exports load lazily, so that importing this package does not start TextWorld.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sage_envs.domains.textworld.domain import TextworldDomain
    from sage_envs.domains.textworld.expert import TextworldExpert
    from sage_envs.domains.textworld.game import TextworldGame

__all__ = ["TextworldDomain", "TextworldExpert", "TextworldGame"]

_EXPORTS = {
    "TextworldDomain": "sage_envs.domains.textworld.domain",
    "TextworldExpert": "sage_envs.domains.textworld.expert",
    "TextworldGame": "sage_envs.domains.textworld.game",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
