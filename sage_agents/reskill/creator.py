"""The skill creator: diagnose -> recommend 1-3 operations -> author text + trigger -> verify.

ReSkill (arXiv 2606.01619) runs its skill creator outside the policy. Two backends share one interface,
``creator.create(episodes, registry, step, exclude) -> Bundle | None``:

- :class:`RuleCreator` works offline. It diagnoses with the assertion engine (pass-rate contrasts between
  successes and failures), recommends up to one prune (an assertion that no longer separates outcomes), one
  add (the most discriminative uncovered assertion) and one modify (a covered assertion that still separates
  outcomes), and authors the text from per-check templates.
- :class:`~sage_agents.reskill.llm.LLMCreator` (:mod:`sage_agents.reskill.llm`) asks any text generator
  ``generate(prompt) -> str``: a local Hugging Face model (``hf_generate``) or an OpenAI-compatible endpoint
  (``openai_generate``, ``POST /v1/chat/completions`` through ``urllib``). Each stage replies in JSON; a reply
  that does not parse or breaks a rule is sent back with the reason, up to ``retries`` times, after which the
  creator gives up and returns None (``creator.last_error`` says why).

Verification is shared (:func:`verify_skill`): the text is at most 500 characters, the skill is valid, and its
trigger fires in at least ``min_fire_rate`` (0.5) of the reservoir's episodes (:func:`fire_rate`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sage_agents.reskill.assertions import (
    Assertion,
    AssertionEngine,
    PassRates,
    action_key,
    key_pattern,
    pass_rates,
    pattern_words,
)
from sage_agents.reskill.registry import Bundle, Operation, VersionRegistry
from sage_agents.reskill.reservoir import Episode
from sage_envs import Skill
from sage_envs.error import SkillError

MAX_SKILL_CHARS = 500
MIN_FIRE_RATE = 0.5
FAILURE_ONLY = (Assertion("no_consecutive_repeat", {}, "never repeats the same action twice in a row"),)
"""Behaviours assumed good before any success exists: the rule creator's diagnosis of an all-failing reservoir."""


# ---------------------------------------------------------------------------------------------- VERIFY
def skill_text(when: str, action: str, example: str = "") -> str:
    """The guidance text in ReSkill's SKILL.md layout: ``## When to Use`` / ``## Action`` / ``## Examples``."""
    parts = [f"## When to Use\n{when.strip()}", f"## Action\n{action.strip()}"]
    if example.strip():
        parts.append(f"## Examples\n{example.strip()}")
    return "\n".join(parts)


def fire_rate(skill: Skill, episodes: Sequence[Episode]) -> float:
    """Share of ``episodes`` in which ``skill`` would have been shown at least once.

    ``general`` and ``beginning`` fire on every episode's first turn; ``action_pattern`` fires when an action
    other than the last matches (the skill is shown on the turn after the matching action).
    """
    if not episodes:
        return 0.0
    if skill.trigger in ("general", "beginning"):
        return 1.0
    fired = sum(any(skill.triggered(i + 1, a) for i, a in enumerate(ep.actions[:-1])) for ep in episodes)
    return fired / len(episodes)


def verify_skill(
    skill: Skill, episodes: Sequence[Episode], min_fire_rate: float = MIN_FIRE_RATE, max_chars: int = MAX_SKILL_CHARS
) -> str | None:
    """Return why ``skill`` fails verification (text length, trigger fire rate), or None when it passes."""
    if len(skill.text) > max_chars:
        return f"skill {skill.name!r}: text is {len(skill.text)} characters (limit {max_chars}); shorten it"
    rate = fire_rate(skill, episodes)
    if rate < min_fire_rate:
        return (
            f"skill {skill.name!r}: trigger pattern {skill.pattern!r} fires in {rate:.0%} of recent episodes "
            f"(need {min_fire_rate:.0%}); write a broader pattern or use the beginning/general trigger"
        )
    return None


def _slug(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    slug = re.sub(r"_+", "_", slug)[:limit].strip("_")
    return slug if slug and slug[0].isalpha() else f"s_{slug}".strip("_")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


# ---------------------------------------------------------------------------------------------- BASE
class Creator:
    """Interface of the skill creators: :meth:`create` returns a :class:`Bundle` to test, or None.

    Args:
        engine: the assertion engine (a fresh one by default).
        min_fire_rate: verification: least share of reservoir episodes a trigger must fire in.
        max_chars: verification: longest guidance text.
    """

    name = "base"

    def __init__(
        self,
        engine: AssertionEngine | None = None,
        min_fire_rate: float = MIN_FIRE_RATE,
        max_chars: int = MAX_SKILL_CHARS,
    ):
        self.engine = engine or AssertionEngine()
        self.min_fire_rate, self.max_chars = min_fire_rate, max_chars
        self.last_error = ""

    def create(
        self, episodes: Sequence[Episode], registry: VersionRegistry, step: int, exclude: Sequence[str] = ()
    ) -> Bundle | None:
        """Propose a bundle of 1-3 operations for the current library, or None (``last_error`` says why).

        Args:
            episodes: the reservoir's episodes.
            registry: the version registry (its current library is the one to change).
            step: the training step (provenance).
            exclude: :attr:`~sage_agents.reskill.assertions.Assertion.family` keys of assertions whose skills
                were recently rejected (not proposed again, whatever counts they are mined with now).
        """
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state (the assertion engine)."""
        return {"engine": self.engine.to_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output."""
        self.engine = AssertionEngine.from_dict(state["engine"])


# ---------------------------------------------------------------------------------------------- RULE BACKEND
def _example(episodes: Sequence[Episode], pattern: str) -> str:
    for ep in episodes:
        for action in ep.actions:
            if re.search(pattern, action[:200]):
                return _clip(action.splitlines()[0], 80)
    return ""


def _predecessor(episodes: Sequence[Episode], pattern: str) -> str | None:
    """Most common key of the action just before the first ``pattern`` match (ties alphabetical)."""
    keys = Counter()
    for ep in episodes:
        index = next((i for i, a in enumerate(ep.actions) if re.search(pattern, a[:200])), None)
        if index:
            keys[action_key(ep.actions[index - 1])] += 1
    ranked = sorted((k for k in keys if k), key=lambda k: (-keys[k], k))
    return ranked[0] if ranked else None


def rule_advice(rates: PassRates, episodes: Sequence[Episode]) -> dict[str, Any]:
    """Name, description, text pieces and candidate triggers for a skill addressing one assertion.

    Returns:
        ``{"name", "description", "when", "action", "example", "triggers": [(trigger, pattern), ...]}``; the
        triggers are tried in order until one verifies.
    """
    a, good = rates.assertion, rates.contrast >= 0
    p = a.params
    wins = [ep for ep in episodes if ep.success]
    losses = [ep for ep in episodes if not ep.success]
    stats = f"({rates.success_rate:.0%} of successes vs {rates.failure_rate:.0%} of failures pass)"
    if not rates.n_success:  # failure-only diagnosis
        stats = f"({1 - rates.failure_rate:.0%} of {rates.n_failure} failed episodes break this)"
    general, beginning = ("general", ""), ("beginning", "")

    def after(key: str | None) -> list[tuple[str, str]]:
        return [("action_pattern", key_pattern(key))] if key else []

    if a.check in ("action_exists", "action_not_exists"):
        word = pattern_words(p["pattern"])
        do = (a.check == "action_exists") == good
        example = _example(wins if do else losses, p["pattern"])
        if do:
            pre = _predecessor(wins, p["pattern"])
            return {
                "name": f"use_{_slug(word)}",
                "description": f"Successful episodes use '{word}'.",
                "when": f"After '{pre}', or whenever the task needs it." if pre else "When the task needs it.",
                "action": f"Remember to '{word}' when the task calls for it: successes do {stats}.",
                "example": example,
                "triggers": [*after(pre), beginning, general],
            }
        return {
            "name": f"avoid_{_slug(word)}",
            "description": f"Failed episodes use '{word}'.",
            "when": "Before choosing an action.",
            "action": f"Avoid '{word}' unless the task requires it; it goes with failure {stats}.",
            "example": f"Don't: {example}" if example else "",
            "triggers": [*after(_predecessor(losses, p["pattern"])), general],
        }
    if a.check == "action_before":
        first, second = pattern_words(p["first"]), pattern_words(p["second"])
        verb = "before" if good else "only after"
        return {
            "name": _slug(f"{first}_{verb}_{second}"),
            "description": f"Order: '{first}' {verb} '{second}'.",
            "when": f"Before you '{second}'.",
            "action": f"Do '{first}' {verb} '{second}' {stats}.",
            "example": _example(wins, p["first"]),
            "triggers": [*after(_predecessor(wins, p["second"])), beginning, general],
        }
    if a.check == "no_consecutive_repeat":
        return {
            "name": "no_repeats",
            "description": "Do not repeat the same action twice in a row.",
            "when": "After every action.",
            "action": "Never repeat the previous action: if it did not help, choose a different admissible command "
            + stats
            + ".",
            "example": "",
            "triggers": [general],
        }
    if a.check == "final_action":
        word = pattern_words(p["pattern"])
        if not good:  # failures end with it: say so, do not advise finishing with it
            example = _example(losses, p["pattern"])
            return {
                "name": f"not_done_after_{_slug(word)}",
                "description": f"Failed episodes end with '{word}'.",
                "when": "Before choosing an action.",
                "action": f"Ending on '{word}' goes with failure {stats}: the task is not done yet, so go on with "
                "the action the task needs.",
                "example": f"Not the end: {example}" if example else "",
                "triggers": [general],
            }
        return {
            "name": f"finish_with_{_slug(word)}",
            "description": f"Successful episodes end with '{word}'.",
            "when": "When you are ready to complete the task.",
            "action": f"Complete the task with a '{word}' action {stats}.",
            "example": _example(wins, p["pattern"]),
            "triggers": [*after(_predecessor(wins, p["pattern"])), general],
        }
    if a.check in ("max_steps", "min_steps"):
        n = p["n"]
        short = (a.check == "max_steps") == good
        return {
            "name": "be_efficient" if short else "be_thorough",
            "description": "Keep episodes short." if short else "Do not stop too early.",
            "when": "At the start of a task.",
            "action": (
                f"Plan the shortest route: successes take at most {n} actions {stats}."
                if short
                else f"Check every step of the task: successes take at least {n} actions {stats}."
            ),
            "example": "",
            "triggers": [beginning, general],
        }
    if a.check == "action_count":
        word, high = pattern_words(p["pattern"]), p.get("max")
        return {
            "name": f"limit_{_slug(word)}",
            "description": f"Do not overuse '{word}'.",
            "when": f"After a '{word}' action.",
            "action": f"Use '{word}' at most {high} times per task; successes stay within that {stats}."
            if good
            else f"Do not hold back on '{word}' {stats}.",
            "example": "",
            "triggers": [("action_pattern", p["pattern"]), general],
        }
    phrase = pattern_words(p["pattern"])
    return {
        "name": f"watch_{_slug(phrase)}",
        "description": f"Observations with '{phrase}'.",
        "when": f"When you see '{phrase}'.",
        "action": (
            f"'{phrase}' goes with success: steer towards states that show it {stats}."
            if good
            else f"'{phrase}' goes with failure: your last action did not work; choose another admissible command "
            f"{stats}."
        ),
        "example": "",
        "triggers": [general],
    }


class RuleCreator(Creator):
    """Offline creator from assertion pass-rate contrasts (see the module docstring).

    Args:
        engine: the assertion engine.
        min_fire_rate: verification fire-rate threshold.
        max_chars: verification length cap.
        prune_contrast: a rule skill whose assertion's ``|contrast|`` fell below this is pruned.
        modify_contrast: a covered assertion still above this gets its skill rewritten with a wider trigger.
    """

    name = "rule"

    def __init__(
        self,
        engine: AssertionEngine | None = None,
        min_fire_rate: float = MIN_FIRE_RATE,
        max_chars: int = MAX_SKILL_CHARS,
        prune_contrast: float = 0.05,
        modify_contrast: float = 0.3,
    ):
        super().__init__(engine, min_fire_rate, max_chars)
        self.prune_contrast, self.modify_contrast = prune_contrast, modify_contrast

    def author(
        self, rates: PassRates, episodes: Sequence[Episode], triggers: Sequence[tuple[str, str]] | None = None
    ) -> tuple[Skill | None, list[str]]:
        """Write a skill for one assertion, trying its triggers in order until one verifies.

        Returns:
            ``(skill or None, verification problems met on the way)``.
        """
        advice = rule_advice(rates, episodes)
        problems: list[str] = []
        text = skill_text(advice["when"], advice["action"], advice["example"])
        if len(text) > self.max_chars:
            text = skill_text(advice["when"], advice["action"])[: self.max_chars]
        for trigger, pattern in triggers if triggers is not None else advice["triggers"]:
            try:
                skill = Skill(
                    name=advice["name"],
                    kind="guidance",
                    description=advice["description"],
                    text=text,
                    trigger=trigger,
                    pattern=pattern,
                    provenance={"assertion": json.dumps(rates.assertion.to_dict(), sort_keys=True)[:1024]},
                )
            except SkillError as error:
                problems.append(str(error))
                continue
            problem = verify_skill(skill, episodes, self.min_fire_rate, self.max_chars)
            if problem is None:
                return skill, problems
            problems.append(problem)
        return None, problems

    def create(
        self, episodes: Sequence[Episode], registry: VersionRegistry, step: int, exclude: Sequence[str] = ()
    ) -> Bundle | None:
        """See :meth:`Creator.create`."""
        ranked = [r for r in self.engine.refresh(episodes) if abs(r.contrast) >= self.engine.min_contrast]
        if not ranked and sum(ep.success for ep in episodes) < self.engine.min_per_outcome:
            # no success to contrast with: fall back on behaviours assumed good, when most failures break them
            fallback = [pass_rates(a, episodes) for a in FAILURE_ONLY]
            ranked = [r for r in fallback if r.n_failure >= self.engine.min_per_outcome and r.failure_rate <= 0.5]
        active = registry.active_skills()
        covered: dict[str, Skill] = {}
        for skill in active:
            raw = skill.provenance.get("assertion")
            if raw:
                try:
                    covered[Assertion.from_dict(json.loads(raw)).family] = skill
                except (ValueError, TypeError):
                    pass
        ops: list[Operation] = []
        evidence: dict[str, Any] = {"assertions": [r.to_dict() for r in ranked]}
        # 1. prune: a rule skill whose assertion no longer separates successes from failures
        prunable = []
        for skill in covered.values():
            rates = pass_rates(Assertion.from_dict(json.loads(skill.provenance["assertion"])), episodes)
            if rates.n_success >= 2 and rates.n_failure >= 2 and abs(rates.contrast) < self.prune_contrast:
                prunable.append((abs(rates.contrast), skill.name, rates))
        for _, name, rates in sorted(prunable)[:1]:
            reason = f"its assertion no longer separates outcomes (contrast {rates.contrast:+.2f})"
            ops.append(Operation("delete", name, reason=reason))
        # 2. add: the most discriminative uncovered assertion that authors and verifies
        names = {s.name for s in registry.current.library}
        problems: list[str] = []
        for rates in ranked:
            if rates.assertion.family in covered or rates.assertion.family in exclude:
                continue
            skill, found = self.author(rates, episodes)
            problems += found
            if skill is None:
                continue
            base, n = skill.name, 2
            while skill.name in names:
                skill.name, n = f"{base[:60]}_{n}", n + 1
            live = len(active) - sum(op.op == "delete" for op in ops)
            if live >= registry.max_active:  # full: drop the weakest other skill in the same bundle
                weakest = self._weakest(covered, episodes, skip={op.name for op in ops}) or active[0].name
                ops.append(Operation("delete", weakest, reason="make room (lowest contrast)"))
            ops.append(
                Operation("add", skill.name, skill, reason=f"{rates.assertion.description} {rates.contrast:+.2f}")
            )
            break
        # 3. modify: a covered assertion that still separates outcomes gets a wider trigger
        if len(ops) < 3:
            for rates in ranked:
                skill = covered.get(rates.assertion.family)
                if skill is None or skill.trigger == "general" or abs(rates.contrast) < self.modify_contrast:
                    continue
                if rates.assertion.family in exclude:  # its rewrite was rejected recently
                    continue
                if any(op.name == skill.name for op in ops):
                    continue
                new, found = self.author(rates, episodes, triggers=[("general", "")])
                if new is not None:
                    new.name = skill.name
                    new.text = _clip("Important. " + new.text, self.max_chars)
                    reason = f"still separates outcomes ({rates.contrast:+.2f}) with trigger {skill.trigger}"
                    ops.append(Operation("modify", skill.name, new, reason=reason))
                    break
        if not ops:
            self.last_error = "no discriminative assertion to act on" + (f" ({problems[-1]})" if problems else "")
            return None
        self.last_error = ""
        diagnosis = "; ".join(f"{op.op} {op.name}: {op.reason}" for op in ops)
        return Bundle(ops[:3], creator=self.name, diagnosis=diagnosis, evidence=evidence)

    @staticmethod
    def _weakest(covered: dict[str, Skill], episodes: Sequence[Episode], skip: set[str]) -> str | None:
        scored = []
        for skill in covered.values():
            if skill.name not in skip:
                rates = pass_rates(Assertion.from_dict(json.loads(skill.provenance["assertion"])), episodes)
                scored.append((abs(rates.contrast), skill.name))
        return min(scored)[1] if scored else None
