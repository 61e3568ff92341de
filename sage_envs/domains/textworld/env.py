"""``SageChain-TextWorld-v0``: the chain env over TextWorld cooking games."""

from __future__ import annotations

import os
from typing import Any

from sage_envs.chain import SageChainEnv
from sage_envs.domains.textworld.domain import TextworldDomain


class TextworldChainEnv(SageChainEnv):
    """TextWorld cooking chains: recipes cooked one after another in one house; see :class:`SageChainEnv`.

    ## Description
    Each task is a ``tw-cooking`` game: read the cookbook in the kitchen, find the recipe's ingredients, cook
    (stove, oven, BBQ) and cut (knife) each one as the recipe says, prepare the meal and eat it. The tasks of a
    chain are different recipes in the same house (same map, furniture and food placement), so skills written for
    one recipe (fetching from the fridge, cutting with the knife) serve the next. Games are made offline by
    TextWorld's generator, seeded and cached (docs/textworld.md).

    ## Episode End
    As :class:`SageChainEnv`; a task is also lost, and the chain moves on, when TextWorld reports the game lost
    (an ingredient cooked or cut the wrong way, burned, or eaten): ``info["task_lost"]``.

    ## Info
    As :class:`SageChainEnv`, with ``task_score``: the share of the recipe's points earned in the task (0-100).

    ## Arguments
    All of :class:`SageChainEnv`'s (``chain_length``, ``split`` (``train`` / ``valid`` / ``test``),
    ``max_steps_per_task``, ``skills``, ``library_scope``, ``expert_plan`` (TextWorld's ``policy_commands``), ...)
    plus:

    * ``rooms``: locations per house, 1, 6 (default), 9 or 12 (``tw-cooking --go``).
    * ``ingredients``: ingredients per recipe, 1 (default) to 5 (``tw-cooking --recipe``).
    * ``generator_seed``: the seed that fixes the splits' houses (not the episode seed of ``reset(seed=...)``).
    * ``cache_dir``: where games are cached (default ``$SAGE_CACHE_DIR``, else ``~/.cache/sage_envs``).
    * ``num_chains``: chains per split (default 1000 / 100 / 100 for train / valid / test).

    ## Version History
    * v0: initial release.
    """

    domain_class = TextworldDomain

    def __init__(
        self,
        rooms: int = 6,
        ingredients: int = 1,
        generator_seed: int = 0,
        cache_dir: str | os.PathLike[str] | None = None,
        num_chains: int | None = None,
        **kwargs: Any,
    ):
        """Create the env; see the class docstring for the TextWorld arguments."""
        domain = TextworldDomain(
            rooms=rooms,
            ingredients=ingredients,
            generator_seed=generator_seed,
            cache_dir=cache_dir,
            num_chains=num_chains,
        )
        super().__init__(domain, **kwargs)
