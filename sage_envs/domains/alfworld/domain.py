"""The ALFWorld domain plug-in: official json_2.1.1 games or games generated from the wheel's 120 layouts."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sage_envs.domain import SPLITS, Advice, Domain, TaskSpec
from sage_envs.domains.alfworld.engines import ENGINES, check_engine, make_game
from sage_envs.domains.alfworld.official import DATA_ENV_VAR, TASK_TYPES, official_tasks
from sage_envs.error import DataNotFoundError, InvalidConfigError, suggest

if TYPE_CHECKING:
    from sage_envs.domain import TaskGame
    from sage_envs.domains.alfworld.expert import AlfworldExpert

__all__ = ["ENGINES", "SOURCES", "TASK_TYPES", "AlfworldDomain"]

SOURCES = ("generated", "official")
GENERATED_TASKS_CHAIN_LENGTH = 2
"""Chain length behind :meth:`AlfworldDomain.tasks` for generated games (SAGE's default chain length)."""


class AlfworldDomain(Domain):
    """ALFWorld household tasks (the six :data:`TASK_TYPES`), on the native engine or TextWorld's (``engine``).

    ``source="official"`` lists ALFWorld's own games under ``data_dir/json_2.1.1/<split>`` with ALFWorld's
    filters (:mod:`sage_envs.domains.alfworld.official`); chains group them by floor plan (one household).
    ``source="generated"`` delegates tasks, chains and game files to
    :mod:`sage_envs.domains.alfworld.generator`, which draws seeded chains in the scene layouts shipped in the
    alfworld wheel and writes (and checks) a game the first time a task is loaded, cached under ``cache_dir``;
    ``command_grammar`` chooses the words its games speak.
    """

    name = "alfworld"
    splits = SPLITS  # train / valid_seen / valid_unseen: generated games split by scene, official by folder

    def __init__(
        self,
        source: str = "generated",
        data_dir: str | os.PathLike[str] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        generator_seed: int = 0,
        engine: str = "native",
        *,
        seed: int | None = None,
        command_grammar: str = "wheel",
    ) -> None:
        """Configure the domain; nothing is read from disk until a split is first used.

        Args:
            source: ``"generated"`` or ``"official"``.
            data_dir: the folder holding ``json_2.1.1/`` (official games); default ``$ALFWORLD_DATA``.
            cache_dir: where generated games are written; default ``$SAGE_CACHE_DIR``, else
                ``~/.cache/sage_envs``.
            generator_seed: the generator seed, which fixes the generated splits (unused for official games).
                Not the episode seed, which ``reset(seed=...)`` takes.
            engine: ``"native"`` (in-process, transcript-identical, fast) or ``"textworld"`` (TextWorld's PDDL
                engine, as ALFWorld runs it).
            seed: deprecated name of ``generator_seed`` (warns with a DeprecationWarning).
            command_grammar: the grammar of generated games: ``"wheel"`` ("move X to Y", the default),
                ``"official"`` ("put X in/on Y", "You arrive at loc 12.", as the official games) or ``"mixed"``
                (each chain draws one, the same every time; :mod:`sage_envs.domains.alfworld.generator`).
                Official games speak their own grammar: with ``source="official"`` only the default is accepted.

        Raises:
            InvalidConfigError: for an unknown ``source``, ``engine`` or ``command_grammar``, a grammar other than
                the default for official games, or both ``seed`` and ``generator_seed`` given.
        """
        generator_seed = resolve_generator_seed(generator_seed, seed, stacklevel=2)
        if source not in SOURCES:
            raise InvalidConfigError(f"source={source!r} is not one of {SOURCES}.{suggest(source, SOURCES)}")
        check_engine(engine)
        if source == "generated":
            self._generator().check_command_grammar(command_grammar)
        elif command_grammar != "wheel":
            raise InvalidConfigError(
                f"command_grammar={command_grammar!r} chooses the grammar of generated games; the official games "
                "speak their own (put X in/on Y): leave command_grammar unset with source='official'."
            )
        self.source = source
        self.command_grammar = command_grammar
        self.engine = engine
        self.data_dir = data_dir if data_dir is not None else os.environ.get(DATA_ENV_VAR)
        self.cache_dir = cache_dir  # None: the generator's default
        self.generator_seed = generator_seed
        self._tasks: dict[str, list[TaskSpec]] = {}

    def tasks(self, split: str) -> list[TaskSpec]:
        """All tasks of ``split`` in a fixed order (read once, then cached).

        Generated games are drawn chain by chain, so their list depends on the chain length: this lists the
        tasks of the default 2-task chains; :meth:`chains` is what the chain env plays.

        Raises:
            InvalidConfigError: for a split outside :attr:`splits` (``train`` / ``valid_seen`` / ``valid_unseen``).
            DataNotFoundError: official source, when ``data_dir`` is unset or lacks the split's folder.
        """
        _check_split(split)
        if split not in self._tasks:
            if self.source == "official":
                self._tasks[split] = official_tasks(self._official_data_dir(), split)
            else:
                generator = self._generator()
                self._tasks[split] = generator.generated_tasks(
                    split, GENERATED_TASKS_CHAIN_LENGTH, self.generator_seed, command_grammar=self.command_grammar
                )
        return list(self._tasks[split])

    def load(self, task: TaskSpec) -> TaskGame:
        """Open ``task``'s game on the configured engine (:mod:`sage_envs.domains.alfworld.engines`).

        An official task names its game folder in ``extra["game_path"]``; a generated task's game is written
        (and checked) by the generator on first use, then read from its cache.

        Raises:
            DataNotFoundError: an official task whose game folder is gone.
        """
        if self.source == "official":
            return make_game(task.extra["game_path"], self.engine)
        return make_game(self._generator().generate_game(task, self.cache_dir), self.engine)

    def chains(self, split: str, chain_length: int) -> list[tuple[TaskSpec, ...]]:
        """Chains of tasks from one household.

        Official games: the base class grouping by floor plan (``scenario``), in listing order. Generated
        games: the generator's chains ``0 .. NUM_CHAINS[split] - 1`` (each drawn in one household).
        """
        if self.source == "official":
            return super().chains(split, chain_length)
        _check_split(split)
        generator = self._generator()
        return [
            generator.chain_tasks(split, index, chain_length, self.generator_seed, self.command_grammar)
            for index in range(generator.NUM_CHAINS[split])
        ]

    @classmethod
    def expert(
        cls,
        *,
        use_skills: bool = True,
        skills: Sequence[str] | None = None,
        vary_definitions: int | None = None,
        shuffle_parameters: bool = True,
    ) -> AlfworldExpert:
        """The observation-only scripted expert (:class:`~sage_envs.domains.alfworld.expert.AlfworldExpert`)."""
        from sage_envs.domains.alfworld.expert import AlfworldExpert

        return AlfworldExpert(use_skills, skills, vary_definitions, shuffle_parameters)

    @classmethod
    def vocabulary(cls) -> list[str]:
        """Texts that cover ALFWorld's words, read from the installed ``alfworld`` wheel ([] if absent).

        Object and receptacle names (``alfworld.gen.constants``), the goal templates
        (``alfworld.gen.goal_library``) and the command words and messages of every
        command grammar a game can speak (the wheel's ``alfred.twl2``, the official games').
        """
        texts: list[str] = []
        try:
            import alfworld.gen.constants as constants
            import alfworld.gen.goal_library as goals
        except ImportError:  # the alfworld wheel is optional for agents built for other domains
            return texts
        names = set(constants.OBJECTS) | set(constants.RECEPTACLES)
        texts.append(" ".join(sorted(name.lower() for name in names)))
        texts += [template for goal in goals.gdict.values() for template in goal.get("templates", [])]
        from sage_envs.domains.alfworld.scenes import COMMAND_GRAMMARS

        texts += [files.grammar.read_text(errors="replace") for files in COMMAND_GRAMMARS.values()]
        return texts

    @classmethod
    def skill_templates(cls, command_grammar: str = "wheel", **_env_kwargs: Any) -> dict[str, list[str]]:
        """The expert's skill definitions by name, one per grammar the ``command_grammar`` games speak.

        Their put line is the grammar's ("move X to Y" or "put X in/on Y"); ``mixed`` gives both, wheel first.

        Raises:
            InvalidConfigError: ``command_grammar`` is not a generator choice.
        """
        from sage_envs.domains.alfworld.expert import SKILLS, skill_definition
        from sage_envs.domains.alfworld.generator import check_command_grammar
        from sage_envs.domains.alfworld.scenes import COMMAND_GRAMMARS

        check_command_grammar(command_grammar)
        grammars = tuple(COMMAND_GRAMMARS) if command_grammar == "mixed" else (command_grammar,)
        return {name: [skill_definition(name, grammar) for grammar in grammars] for name in SKILLS}

    @classmethod
    def skill_examples(cls) -> list[str]:
        """The varying expert's other definitions: searches straight to one receptacle, whole-task skills."""
        from sage_envs.domains.alfworld.expert import variant_definitions

        return variant_definitions()

    @classmethod
    def advise(cls, task: str, earlier: Sequence[str], command: str) -> Advice | None:
        """The expert's advice (:func:`sage_envs.domains.alfworld.expert_guidance.advise`)."""
        from sage_envs.domains.alfworld.expert_guidance import advise

        return advise(task, earlier, command)

    def _official_data_dir(self) -> str | os.PathLike[str]:
        if self.data_dir is None:
            raise DataNotFoundError(
                f"official ALFWorld games need a data folder: set ${DATA_ENV_VAR} (or pass data_dir=) to the "
                "folder that holds json_2.1.1/."
            )
        return self.data_dir

    @staticmethod
    def _generator():
        # Imported on first use: the official source must not depend on the generator (or its layouts).
        from sage_envs.domains.alfworld import generator

        return generator


def resolve_generator_seed(generator_seed: int, seed: int | None, *, stacklevel: int) -> int:
    """Return the generator seed, accepting the deprecated ``seed=`` keyword with a DeprecationWarning.

    ``seed`` was renamed because it reads like ``reset(seed=...)``, the episode seed, while it fixes the splits.

    Args:
        generator_seed: the value of ``generator_seed=`` (0 when not given).
        seed: the value of the deprecated ``seed=``, or None when not given.
        stacklevel: which frame the warning names, counted from the function calling this one (1: that
            function, 2: its caller, as :func:`warnings.warn` counts).

    Raises:
        InvalidConfigError: ``seed`` and a non-zero ``generator_seed`` that differ were both given.
    """
    if seed is None:
        return generator_seed
    if generator_seed not in (0, seed):
        raise InvalidConfigError(
            f"seed={seed!r} and generator_seed={generator_seed!r} were both given; pass generator_seed only "
            "(seed= is its deprecated name)."
        )
    warnings.warn(
        "the ALFWorld keyword seed= is deprecated: pass generator_seed= (the seed that fixes the generated splits; "
        "the episode seed goes to reset(seed=...)).",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )
    return seed


def _check_split(split: str) -> None:
    if split not in AlfworldDomain.splits:
        splits = AlfworldDomain.splits
        raise InvalidConfigError(f"split={split!r} is not one of {splits}.{suggest(split, splits)}")
