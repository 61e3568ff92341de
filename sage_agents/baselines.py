"""Built-in agents that need no training: ``random`` and ``expert`` (registered as entry points)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sage_envs.registration import DEFAULT_ENV_ID


class RandomAgent:
    """Picks uniformly among the admissible commands (the lower bound of every leaderboard)."""

    given = "the admissible commands (picks one uniformly)"
    """What the agent is handed, in words (the leaderboard's "given")."""

    def __init__(self, seed: int = 0):
        """Create the agent; ``seed`` fixes its choices."""
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def reset(self, seed: int | None = None) -> None:
        """Start a chain; a given ``seed`` (the evaluator passes one per episode) makes its choices reproducible."""
        if seed is not None:
            self.rng = np.random.default_rng([self.seed, seed])

    def act(self, observation: dict[str, str], info: dict[str, Any]) -> str:
        """Return one admissible command, or "look" when the engine lists none."""
        commands = info.get("admissible_commands") or ["look"]
        return commands[int(self.rng.integers(len(commands)))]


def make_random(seed: int = 0) -> RandomAgent:
    """A random admissible command each turn (the floor of every table; :class:`RandomAgent`)."""
    return RandomAgent(seed=seed)


def make_expert(
    use_skills: bool = True,
    skills: list[str] | None = None,
    skills_path: str | None = None,
    env_id: str = DEFAULT_ENV_ID,
):
    """The scripted expert of the env's domain: plans from the observations only, defines and reuses skills.

    ``env_id``: the env it plays (the evaluator passes its ``--env``); its domain supplies the expert
    (:meth:`sage_envs.domain.Domain.expert`). ``skills``: the names of the domain's skill templates it may use
    (None = all). ``skills_path``: a folder of SKILL.md folders every chain starts from; the expert calls those of
    its skills found there without defining them (what cross-chain reuse of a skill bank would cost, at perfect
    play).
    """
    import sage_envs
    from sage_envs.skills import SkillLibrary

    expert = sage_envs.domain_class(env_id).expert(use_skills=use_skills, skills=skills)
    expert.skill_library = SkillLibrary.load(skills_path) if skills_path else None
    # What it is handed, in words (the leaderboard's "given"): a domain's expert may say (a gold sequence, a
    # walkthrough); else hand-written rules reading the admissible commands, not a learned policy.
    own = getattr(expert, "given", "")
    parts = [own] if own else ["hand-written rules", "the admissible commands"]
    if use_skills and expert.skills:
        parts.append(f"its own skills ({', '.join(sorted(expert.skills))}), defined in the chain where first used")
        if expert.skill_library is not None:
            parts.append(f"skill bank of {len(expert.skill_library)} ({', '.join(expert.skill_library.names())})")
    expert.given = "; ".join(parts)
    return expert
