"""ReSkill's training-time loop around GRPO: version assignment, outcome tracking, creation and decisions.

The trainer calls two methods per step (``algo="reskill"``, arXiv 2606.01619):

1. :meth:`ReSkill.assign` before the rollouts: one library per rollout slot. While a candidate version is under
   test each slot independently gets the new (candidate) or old (current) library by Thompson sampling;
   otherwise every slot gets the current library. The env loads it at reset
   (``options={"skill_library": lib}``) and shows the triggered guidance skills in ``obs["skills"]`` turn by
   turn.
2. :meth:`ReSkill.observe` after them: the episodes enter the reservoir; during a test each episode's success
   is counted for its arm, the posteriors are discounted and the test is decided once long enough (accept:
   the candidate becomes current, accepted deletes are prunes; reject: the snapshot stays). With no test
   running, the creator is asked for a bundle, which becomes the next candidate.

All rollouts feed the ordinary GRPO update with their plain episode reward; ReSkill only picks libraries.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sage_agents.reskill.assertions import Assertion
from sage_agents.reskill.creator import MAX_SKILL_CHARS, MIN_FIRE_RATE, Creator, RuleCreator
from sage_agents.reskill.lifecycle import LifecycleLog, plot_lifecycle
from sage_agents.reskill.llm import LLMCreator, hf_generate, openai_generate
from sage_agents.reskill.registry import Bundle, VersionRegistry
from sage_agents.reskill.reservoir import ExperienceReservoir, episodes_from_rollouts
from sage_agents.reskill.thompson import ThompsonTracker
from sage_envs import SkillLibrary
from sage_envs.error import SkillError

REJECT_COOLDOWN = 20
"""Steps during which the rule creator does not re-propose a skill for an assertion family whose skill was
rejected (:attr:`~sage_agents.reskill.assertions.Assertion.family`: the check and its patterns, not its counts)."""
STATE_FILE = "reskill_state.json"
LIBRARY_DIR = "reskill_library"


def make_creator(
    kind: str = "rule",
    *,
    endpoint: str | None = None,
    model: str | None = None,
    model_path: str | None = None,
    api_key: str | None = None,
    min_fire_rate: float = MIN_FIRE_RATE,
    max_chars: int = MAX_SKILL_CHARS,
    retries: int = 2,
    tokenizer: Any = None,
) -> Creator:
    """Build a creator: ``rule``, or ``llm`` backed by ``endpoint`` (OpenAI-compatible) or ``model_path`` (local HF).

    ``tokenizer``: the policy's tokenizer; the pre-test check rejects a skill with a word it encodes as unknown.

    Raises:
        ValueError: unknown ``kind``, or ``llm`` without an endpoint or a model path.
    """
    if kind == "rule":
        return RuleCreator(min_fire_rate=min_fire_rate, max_chars=max_chars, tokenizer=tokenizer)
    if kind != "llm":
        raise ValueError(f"creator kind {kind!r}; use 'rule' or 'llm'")
    if endpoint:
        generate = openai_generate(endpoint, model, api_key=api_key)
    elif model_path:
        generate = hf_generate(model_path)
    else:
        raise ValueError("the llm creator needs an endpoint (OpenAI-compatible URL) or a local model_path")
    return LLMCreator(generate, min_fire_rate=min_fire_rate, max_chars=max_chars, retries=retries, tokenizer=tokenizer)


class ReSkill:
    """The ReSkill controller: registry + tracker + creator + reservoir + lifecycle log.

    Args:
        creator: the skill creator (:func:`make_creator`).
        registry: the version registry (an empty library by default).
        tracker: the Thompson tracker (defaults: eb discount, 5 steps, 50 episodes).
        reservoir: the experience reservoir (200 episodes by default).
        lifecycle: the lifecycle log (in memory by default).
        seed: seed of the slot assignment draws.
        min_reservoir: episodes in the reservoir before the first creation attempt.
        create_every: steps between creation attempts while no test runs.
    """

    def __init__(
        self,
        creator: Creator,
        registry: VersionRegistry | None = None,
        tracker: ThompsonTracker | None = None,
        reservoir: ExperienceReservoir | None = None,
        lifecycle: LifecycleLog | None = None,
        seed: int = 0,
        min_reservoir: int = 50,
        create_every: int = 1,
    ):
        self.creator = creator
        self.registry = registry or VersionRegistry()
        self.tracker = tracker or ThompsonTracker()
        self.reservoir = reservoir or ExperienceReservoir()
        self.lifecycle = lifecycle or LifecycleLog()
        self.rng = np.random.default_rng(seed)
        self.min_reservoir, self.create_every = min_reservoir, create_every
        self.last_attempt: int | None = None
        self.last_skip = ""
        self.rejected: dict[str, int] = {}  # assertion id -> step its skill was rejected
        self.last_unverified: list[dict[str, str]] = []  # the creator's pre-test rejections at the last attempt
        self.counts = {"tests": 0, "accepted": 0, "rejected": 0, "pruned": 0, "created": 0}
        self._arms: list[str] = []
        self._p_new = 0.0

    @classmethod
    def from_config(
        cls, config: Any, output_dir: str | os.PathLike | None = None, fresh: bool = True, tokenizer: Any = None
    ) -> ReSkill:
        """Build the controller from a :class:`~sage_agents.config.TrainConfig` (``reskill_*`` fields).

        ``output_dir`` receives ``reskill/lifecycle.jsonl`` (None: in memory only); ``fresh`` empties an existing
        log (a new run), otherwise it is kept for :meth:`load` to trim (resume). ``tokenizer``: the policy's, for
        the creator's vocabulary check (None: no such check).
        """
        library = SkillLibrary.load(config.reskill_skills_dir) if config.reskill_skills_dir else None
        creator = make_creator(
            config.reskill_creator,
            endpoint=config.reskill_creator_endpoint,
            model=config.reskill_creator_model,
            model_path=config.reskill_creator_model_path,
            api_key=os.environ.get("SAGE_CREATOR_API_KEY"),
            min_fire_rate=config.reskill_fire_rate,
            max_chars=config.reskill_max_chars,
            retries=config.reskill_creator_retries,
            tokenizer=tokenizer,
        )
        tracker = ThompsonTracker(
            config.reskill_discount,
            config.reskill_p_clamp,
            config.reskill_min_test_steps,
            config.reskill_min_test_episodes,
            min_within_step_z=config.reskill_min_within_step_z,
        )
        path = Path(output_dir) / "reskill" / "lifecycle.jsonl" if output_dir is not None else None
        lifecycle = LifecycleLog(path)
        if fresh:
            lifecycle.trim(0)
        return cls(
            creator,
            VersionRegistry(library, config.reskill_max_active),
            tracker,
            ExperienceReservoir(config.reskill_reservoir_size),
            lifecycle,
            seed=config.seed,
            min_reservoir=config.reskill_min_reservoir,
            create_every=config.reskill_create_every,
        )

    # ------------------------------------------------------------------ per step
    def assign(self, n: int) -> list[SkillLibrary]:
        """One library per rollout slot for this step (see the module docstring); remembers the arms."""
        if self.tracker.testing:
            self._p_new = self.tracker.p_new()
            new = self.tracker.assign(n, self.rng)
            self._arms = ["new" if x else "old" for x in new]
            old_lib, new_lib = self.registry.env_library("current"), self.registry.env_library("candidate")
            return [new_lib if x else old_lib for x in new]
        self._p_new, self._arms = 0.0, [""] * n
        return [self.registry.env_library("current")] * n

    def observe(self, rollouts: Sequence[Any], step: int) -> dict[str, float]:
        """Take the step's rollouts (in slot order), advance the test or the creation; return ``reskill/`` metrics."""
        arms = self._arms if len(self._arms) == len(rollouts) else [""] * len(rollouts)
        versions = [
            self.registry.candidate_id if arm == "new" else self.registry.current_id for arm in arms
        ]  # candidate_id is set whenever an arm is "new"
        episodes = episodes_from_rollouts(rollouts, step=step, arms=arms, versions=versions)
        self.reservoir.extend(episodes)
        metrics: dict[str, float] = {}
        if self.tracker.testing:
            for ep in episodes:
                if ep.arm:
                    self.tracker.record(ep.arm == "new", ep.success)
            stats = self.tracker.end_step()
            posterior = self.tracker.posterior()
            self.lifecycle.log("tested", step, version=self.registry.candidate_id, posterior=posterior, **stats)
            metrics.update(
                {
                    "reskill/p_new": self._p_new,
                    "reskill/new_share": sum(a == "new" for a in arms) / max(1, len(arms)),
                    "reskill/posterior_mean_new": posterior["new"]["mean"],
                    "reskill/posterior_mean_old": posterior["old"]["mean"],
                    "reskill/w_new": stats["w_new"],
                    "reskill/w_old": stats["w_old"],
                }
            )
            for arm in ("new", "old"):
                if stats[f"n_{arm}"]:
                    metrics[f"reskill/success_{arm}"] = stats[f"success_{arm}"]
            decision = self.tracker.decision()
            if decision != "continue":
                self._decide(decision, step)
        if not self.tracker.testing and len(self.reservoir) >= self.min_reservoir:
            if self.last_attempt is None or step - self.last_attempt >= self.create_every:
                self._create(step)
        metrics.update(
            {
                "reskill/testing": float(self.tracker.testing),
                "reskill/version": float(self.registry.current_id),
                "reskill/active_skills": float(len(self.registry.active_skills())),
                "reskill/reservoir_size": float(len(self.reservoir)),
                "reskill/tests_completed": float(self.counts["tests"]),
                "reskill/accepted": float(self.counts["accepted"]),
                "reskill/rejected": float(self.counts["rejected"]),
                "reskill/pruned": float(self.counts["pruned"]),
                "reskill/created": float(self.counts["created"]),
            }
        )
        if self.tracker.M is not None:
            metrics["reskill/M"] = float(self.tracker.M)
        return metrics

    def _create(self, step: int) -> None:
        self.last_attempt = step
        exclude = [a for a, s in self.rejected.items() if step - s < REJECT_COOLDOWN]
        bundle: Bundle | None = self.creator.create(self.reservoir.episodes, self.registry, step, exclude)
        for rejection in self.creator.rejections:
            if rejection not in self.last_unverified:  # the same reservoir gives the same rejections: log once
                self.lifecycle.log("unverified", step, creator=self.creator.name, **rejection)
        self.last_unverified = list(self.creator.rejections)
        if bundle is None:
            return self._skip(step, self.creator.last_error or "the creator proposed nothing")
        try:
            version = self.registry.propose(bundle, step)
        except SkillError as error:
            return self._skip(step, f"invalid bundle: {error}")
        self.last_skip = ""
        self.tracker.start(version.id, step)
        for op in bundle.operations:
            skill = op.skill
            self.lifecycle.log(
                "created",
                step,
                version=version.id,
                op=op.op,
                skill=op.name,
                trigger=skill.trigger if skill else None,
                pattern=skill.pattern if skill else None,
                text=skill.text if skill else None,
                reason=op.reason,
                creator=bundle.creator,
            )
            self.counts["created"] += op.op != "delete"

    def _skip(self, step: int, reason: str) -> None:
        if reason != self.last_skip:
            self.lifecycle.log("skipped", step, reason=reason)
        self.last_skip = reason

    def _decide(self, decision: str, step: int) -> None:
        summary = self.tracker.finish()
        posterior = {
            k: summary[k] for k in ("new", "old", "p_new", "steps", "episodes", "M", "within_step_z", "within_step_p")
        }
        accepted = decision == "accept"
        version = self.registry.accept(step) if accepted else self.registry.reject(step)
        self.counts["tests"] += 1
        self.counts["accepted" if accepted else "rejected"] += 1
        for op in version.bundle.operations:
            event = ("pruned" if op.op == "delete" else "accepted") if accepted else "rejected"
            self.counts["pruned"] += event == "pruned"
            self.lifecycle.log(event, step, version=version.id, op=op.op, skill=op.name, posterior=posterior)
            if not accepted and op.skill is not None and "assertion" in op.skill.provenance:
                try:  # keyed by family: the same behaviour mined with drifted counts is not re-proposed either
                    family = Assertion.from_dict(json.loads(op.skill.provenance["assertion"])).family
                except (ValueError, TypeError):
                    continue
                self.rejected[family] = step

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Every piece of state as JSON-serialisable values (the lifecycle log lives in its own file)."""
        return {
            "registry": self.registry.to_dict(),
            "tracker": self.tracker.state_dict(),
            "creator": self.creator.state_dict(),
            "reservoir": self.reservoir.to_dict(),
            "rng": self.rng.bit_generator.state,
            "min_reservoir": self.min_reservoir,
            "create_every": self.create_every,
            "last_attempt": self.last_attempt,
            "last_skip": self.last_skip,
            "last_unverified": list(self.last_unverified),
            "rejected": dict(self.rejected),
            "counts": dict(self.counts),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (the creator backend itself is kept)."""
        self.registry = VersionRegistry.from_dict(state["registry"])
        self.tracker = ThompsonTracker.from_state(state["tracker"])
        self.creator.load_state_dict(state["creator"])
        self.reservoir = ExperienceReservoir.from_dict(state["reservoir"])
        self.rng.bit_generator.state = state["rng"]
        self.min_reservoir, self.create_every = state["min_reservoir"], state["create_every"]
        self.last_attempt, self.last_skip = state["last_attempt"], state["last_skip"]
        self.last_unverified = list(state.get("last_unverified", []))  # absent from checkpoints written before it
        self.rejected, self.counts = dict(state["rejected"]), dict(state["counts"])

    def save(self, directory: str | os.PathLike, step: int | None = None) -> None:
        """Write ``reskill_state.json`` + the current library (SKILL.md folders) into ``directory``; redraw the plot.

        The plot (``lifecycle.png``) goes next to the lifecycle log.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / STATE_FILE).write_text(json.dumps(self.state_dict()))
        self.registry.current.library.save(directory / LIBRARY_DIR)
        if self.lifecycle.path is not None:
            try:
                plot_lifecycle(self.lifecycle.events, self.lifecycle.path.with_suffix(".png"), total_steps=step)
            except Exception as error:  # noqa: BLE001 - a plot must never stop training
                warnings.warn(f"could not draw the ReSkill lifecycle plot: {error}", stacklevel=2)

    def load(self, directory: str | os.PathLike, step: int) -> None:
        """Restore from a checkpoint folder written at ``step``; trim the lifecycle log to that step."""
        state_file = Path(directory) / STATE_FILE
        if state_file.exists():
            self.load_state_dict(json.loads(state_file.read_text()))
        self.lifecycle.trim(step)
