"""The ScienceWorld domain: elementary-science tasks on the ``scienceworld`` package's simulator (Java).

Exports load lazily, so that importing this package neither imports ``scienceworld`` nor starts a JVM.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sage_envs.domains.scienceworld.domain import ScienceWorldDomain, ScienceWorldExpert, ScienceWorldGame

__all__ = ["ScienceWorldDomain", "ScienceWorldExpert", "ScienceWorldGame"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("sage_envs.domains.scienceworld.domain"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
