"""``SageChain-ALFWorld-v0``: the chain env over the ALFWorld domain."""

from __future__ import annotations

from typing import Any

from sage_envs.chain import SageChainEnv
from sage_envs.domains.alfworld.domain import AlfworldDomain, resolve_generator_seed


class AlfworldChainEnv(SageChainEnv):
    """ALFWorld household task chains (6 task types); see :class:`sage_envs.chain.SageChainEnv` for the API.

    ## Arguments
    All of :class:`SageChainEnv`'s (``chain_length``, ``split``, ``max_steps_per_task`` (ALFWorld: 50),
    ``skills``, ``library_scope``, ``expert_plan``, ...) plus:

    * ``source``: ``"generated"`` (default: games generated from the 120 scene layouts shipped in the alfworld
      wheel, cached on disk) or ``"official"`` (ALFWorld's json_2.1.1 games).
    * ``data_dir``: the folder holding ``json_2.1.1/`` for official games (default ``$ALFWORLD_DATA``).
    * ``cache_dir``: where generated games are cached (default ``$SAGE_CACHE_DIR`` or ``~/.cache/sage_envs``).
    * ``generator_seed``: the generator seed that fixes the split's chains (not the episode seed, which
      ``reset(seed=...)`` takes). ``seed=`` is its deprecated name: it still works, with a DeprecationWarning.
    * ``engine``: ``"native"`` (default; in-process, transcript-identical to TextWorld's, see docs/native_engine.md)
      or ``"textworld"`` (TextWorld's PDDL engine, as ALFWorld runs it).
    * ``command_grammar``: the words of generated games: ``"wheel"`` (default: "move X to Y", the wheel's
      ``alfred.twl2``), ``"official"`` ("put X in/on Y", the official games' grammar) or ``"mixed"`` (each chain
      draws one of the two from its seed and index). Official games keep their own grammar.

    ## Version History
    * v0: initial release.
    """

    domain_class = AlfworldDomain

    def __init__(
        self,
        source: str = "generated",
        data_dir: str | None = None,
        cache_dir: str | None = None,
        generator_seed: int = 0,
        engine: str = "native",
        *,
        seed: int | None = None,
        command_grammar: str = "wheel",
        **kwargs: Any,
    ):
        """Create the env; see the class docstring for the ALFWorld arguments."""
        generator_seed = resolve_generator_seed(generator_seed, seed, stacklevel=2)
        domain = AlfworldDomain(
            source=source,
            data_dir=data_dir,
            cache_dir=cache_dir,
            generator_seed=generator_seed,
            engine=engine,
            command_grammar=command_grammar,
        )
        super().__init__(domain, **kwargs)
