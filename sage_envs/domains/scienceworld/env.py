"""``SageChain-ScienceWorld-v0``: the chain env over the ScienceWorld domain."""

from __future__ import annotations

from typing import Any

from sage_envs.chain import SageChainEnv
from sage_envs.domains.scienceworld.domain import DEFAULT_MAX_STEPS_PER_TASK, ScienceWorldDomain


class ScienceWorldChainEnv(SageChainEnv):
    """ScienceWorld task chains: variations of one task family (30 families); see :class:`SageChainEnv` for the API.

    ## Arguments
    All of :class:`SageChainEnv`'s (``chain_length``, ``split`` (``train`` / ``dev`` / ``test``, ScienceWorld's own
    variation splits), ``max_steps_per_task`` (ScienceWorld: 200), ``skills``, ...) plus:

    * ``simplifications``: ScienceWorld's simplification string, e.g. ``"easy"`` or ``"openDoors,teleportAction"``
      (default ``""``: none; docs/scienceworld.md).
    * ``task_names``: the task families to play (default: all 30).
    * ``cache_dir``: where the variation lists and the expert's gold sequences are cached (default
      ``$SAGE_CACHE_DIR`` or ``~/.cache/sage_envs``).

    ## Version History
    * v0: initial release.
    """

    domain_class = ScienceWorldDomain

    def __init__(
        self,
        simplifications: str = "",
        task_names: tuple[str, ...] | list[str] | None = None,
        cache_dir: str | None = None,
        *,
        max_steps_per_task: int = DEFAULT_MAX_STEPS_PER_TASK,
        **kwargs: Any,
    ):
        """Create the env; see the class docstring for the ScienceWorld arguments."""
        domain = ScienceWorldDomain(simplifications=simplifications, task_names=task_names, cache_dir=cache_dir)
        super().__init__(domain, max_steps_per_task=max_steps_per_task, **kwargs)
