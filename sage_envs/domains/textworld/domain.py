"""The TextWorld domain plug-in: ``tw-cooking`` games made offline, seeded and cached, one house per chain."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sage_envs.domain import Domain, TaskSpec
from sage_envs.domains.textworld import generator
from sage_envs.domains.textworld.expert import CUTS, SKILLS, TextworldExpert
from sage_envs.domains.textworld.generator import NUM_CHAINS, SPLITS, CookingSettings

if TYPE_CHECKING:
    from sage_envs.domains.textworld.game import TextworldGame

__all__ = ["SPLITS", "TextworldDomain"]

DEFAULT_CHAIN_LENGTH = 2
"""Chain length behind :meth:`TextworldDomain.tasks` (SAGE's default chain length)."""


class TextworldDomain(Domain):
    """TextWorld cooking games: find the recipe's ingredients, cook and cut them as it says, prepare and eat the meal.

    A chain is one house (one world seed) and its tasks are different recipes there
    (:mod:`sage_envs.domains.textworld.generator`). A game is lost when an ingredient is ruined (cooked or cut the
    wrong way, burned, eaten); its score is the share of the recipe's points earned (0-100).
    """

    name = "textworld"
    splits = SPLITS
    scored = True
    # Cooking games name things without numbers: a name is what an admissible command examines or opens
    # ("examine block of cheese", "open frosted-glass door": every thing in reach) or up to three words after "the"
    # (the recipe's "slice the orange bell pepper", its ingredients before they are in reach), stopping at the
    # words that follow a name in descriptions ("the counter is vast"). Three words after any article took 59
    # names on three valid chains, 35 of them no thing's name ("counter is vast", "knife from the").
    entity_pattern = (
        r"(?:^(?:examine|open) |\bthe )"
        r"([a-z-]+(?: (?!(?:from|with|in|on|into|and|is|are|to|for|you|appears|seems|has)\b)[a-z-]+){0,2})"
    )
    # "You are hungry! Let's cook a delicious meal. Check the cookbook ...", for every recipe: its words ("you",
    # "enjoy") are no arguments, and typed by them, a call's arguments were mostly those words.
    task_names_entities = False
    argument_values = {"how": CUTS}  # the expert's cut_with_knife(food, how, knife, place): its verb

    def __init__(
        self,
        rooms: int = 6,
        ingredients: int = 1,
        generator_seed: int = 0,
        cache_dir: str | os.PathLike[str] | None = None,
        num_chains: int | None = None,
    ) -> None:
        """Configure the domain; no game is made until a chain's task is loaded.

        Args:
            rooms: locations per house (1, 6, 9 or 12; ``tw-cooking --go``).
            ingredients: ingredients per recipe (1 to 5; ``tw-cooking --recipe``, all of them to be found).
            generator_seed: the seed that fixes the splits' houses (not the episode seed of ``reset``).
            cache_dir: where games are cached (default ``$SAGE_CACHE_DIR``, else ``~/.cache/sage_envs``).
            num_chains: chains per split (default :data:`~sage_envs.domains.textworld.generator.NUM_CHAINS`).

        Raises:
            InvalidConfigError: a setting outside its range.
        """
        self.settings = CookingSettings(rooms=rooms, ingredients=ingredients)
        generator.chain_tasks(self.settings, "train", 0, 1, generator_seed)  # validates generator_seed
        if num_chains is not None:
            generator.check_count("num_chains", num_chains, 1)
        self.generator_seed = generator_seed
        self.cache_dir = cache_dir
        self.num_chains = num_chains

    def chains(self, split: str, chain_length: int) -> list[tuple[TaskSpec, ...]]:
        """The split's chains ``0 .. num_chains - 1``: one house each, ``chain_length`` distinct recipes."""
        generator.check_split(split)
        count = self.num_chains or NUM_CHAINS[split]
        return [
            generator.chain_tasks(self.settings, split, index, chain_length, self.generator_seed)
            for index in range(count)
        ]

    def tasks(self, split: str) -> list[TaskSpec]:
        """The tasks of the split's chains of :data:`DEFAULT_CHAIN_LENGTH` recipes, in chain order."""
        return [task for chain in self.chains(split, DEFAULT_CHAIN_LENGTH) for task in chain]

    def load(self, task: TaskSpec) -> TextworldGame:
        """The task's game, made and compiled on first use (its chain's games with it), then read from the cache."""
        from sage_envs.domains.textworld.game import TextworldGame

        return TextworldGame(generator.game_file(task.task_id, self.cache_dir))

    @classmethod
    def expert(
        cls,
        *,
        use_skills: bool = True,
        skills: Sequence[str] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> TextworldExpert:
        """The walkthrough expert (:class:`~sage_envs.domains.textworld.expert.TextworldExpert`)."""
        return TextworldExpert(use_skills=use_skills, skills=skills, cache_dir=cache_dir)

    @classmethod
    def vocabulary(cls) -> list[str]:
        """Texts that cover the cooking games' words, read from the installed ``textworld`` ([] if absent).

        Food, furniture and room names of ``tw-cooking``, its preparations and their verbs, the text grammars
        its games are described with (``*.twg``) and the command templates of its logic (``*.twl``).
        """
        try:
            from textworld.challenges.tw_cooking import cooking
        except ImportError:  # textworld is optional for agents built for other domains
            return []
        names = [*cooking.FOODS, *cooking.ENTITIES, *(room for rooms in cooking.ROOMS for room in rooms)]
        words = [*cooking.TYPES_OF_COOKING, *cooking.TYPES_OF_CUTTING]
        words += [*cooking.TYPES_OF_COOKING_VERBS.values(), *cooking.TYPES_OF_CUTTING_VERBS.values()]
        texts = [" ".join(names), " ".join(words), "prepare meal eat meal examine cookbook inventory look"]
        data = Path(cooking.KB_PATH)
        texts += [path.read_text(errors="replace") for path in sorted(data.glob("text_grammars/*.twg"))]
        texts += [path.read_text(errors="replace") for path in sorted(data.glob("logic/*.twl"))]
        return texts

    @classmethod
    def skill_templates(cls, **_env_kwargs: Any) -> dict[str, list[str]]:
        """The expert's skill definitions by name (one form each: every game speaks one grammar)."""
        return {name: [text] for name, text in SKILLS.items()}
