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


def shown(skill: Skill, episode: Episode, turn: int) -> bool:
    """Whether ``skill`` is shown on ``turn`` (0-based) of ``episode``: its trigger fires after the turn before."""
    return skill.triggered(turn, episode.actions[turn - 1] if turn else None)


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


def diagnosed_turns(assertion: Assertion, episode: Episode, good: bool = True) -> list[int]:
    """The turns of a failed ``episode`` at which it breaks ``assertion``: where a skill should be shown.

    ``good`` says whether passing ``assertion`` goes with success (contrast >= 0). A turn is the 0-based index of
    the action chosen on it. Behaviour seen at one moment gives that moment: the turn of the forbidden or
    premature action, of the repeat, of the last action, of each action past a count or step bound, or the turn
    after an observation that goes with failure. A behaviour that is missing (an action never used, an
    observation never seen) could have been fixed on any turn, so every turn counts. An episode that does not
    break the assertion gives ``[]``.
    """
    a, p, acts = assertion, assertion.params, episode.actions
    if not acts or a.evaluate(episode) == good:
        return []
    every = list(range(len(acts)))

    def matching(pattern: str) -> list[int]:
        return [i for i, action in enumerate(acts) if re.search(pattern, action[:200])]

    check = a.check
    if check in ("action_exists", "action_not_exists"):
        forbidden = (check == "action_not_exists") == good  # the episode uses what it should not
        return matching(p["pattern"]) if forbidden else every
    if check == "action_before":
        if good:  # "second" came without "first" before it
            return matching(p["second"])[:1] or every
        return matching(p["first"])[:1] or every
    if check == "no_consecutive_repeat":
        prefix = p.get("prefix", "")
        return [i for i in range(1, len(acts)) if acts[i] == acts[i - 1] and acts[i].startswith(prefix)] or every
    if check == "final_action":
        return [len(acts) - 1]
    if check == "max_steps":
        return every[p["n"] :] if good else [len(acts) - 1]
    if check == "min_steps":
        return [len(acts) - 1] if good else every[p["n"] :]
    if check == "action_count":
        hits, high = matching(p["pattern"]), p.get("max")
        if good and high is not None and len(hits) > high:
            return hits[high:]
        return every
    # observation_contains: the turn after each matching observation (a failure sign) or every turn (missing)
    if good:
        return every
    return [i + 1 for i, obs in enumerate(episode.observations[:-1]) if re.search(p["pattern"], obs[:1000])]


def source_failures(rates: PassRates, episodes: Sequence[Episode]) -> list[tuple[Episode, list[int]]]:
    """The failed episodes that break the assertion of ``rates``, with the turns at which they break it.

    These are the failures a skill for the assertion is made from (turns: :func:`diagnosed_turns`).
    """
    good = rates.contrast >= 0
    pairs = [(ep, diagnosed_turns(rates.assertion, ep, good)) for ep in episodes if not ep.success]
    return [(ep, turns) for ep, turns in pairs if turns]


def unknown_words(text: str, tokenizer: Any) -> list[str]:
    """Words of ``text`` that ``tokenizer`` encodes as its unknown token (sorted, each once).

    A tokenizer without an unknown token (byte-level BPE) can encode any text: ``[]``. A fast tokenizer maps
    the unknown tokens back to their characters; another one is asked word by word.
    """
    unk = getattr(tokenizer, "unk_token_id", None)
    if tokenizer is None or unk is None:
        return []
    if getattr(tokenizer, "is_fast", False):
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        spans = [span for i, span in zip(encoded["input_ids"], encoded["offset_mapping"], strict=True) if i == unk]
        return sorted({text[start:end].strip() for start, end in spans})
    words = set(text.split())
    return sorted(w for w in words if unk in tokenizer(w, add_special_tokens=False)["input_ids"])


def verify_skill(
    skill: Skill,
    episodes: Sequence[Episode],
    min_fire_rate: float = MIN_FIRE_RATE,
    max_chars: int = MAX_SKILL_CHARS,
    *,
    sources: Sequence[tuple[Episode, Sequence[int] | None]] = (),
    tokenizer: Any = None,
) -> str | None:
    """Return why ``skill`` fails verification, or None when it passes.

    The checks, in order: the text is at most ``max_chars`` characters; it is within the policy's vocabulary
    (no word encodes as ``tokenizer``'s unknown token; skipped without a tokenizer); the skill is shown on at
    least one of the failures it was made from (``sources``: ``(episode, turns)`` pairs, ``turns`` the turns
    diagnosed there or None for any turn; skipped when empty); its trigger fires in at least ``min_fire_rate``
    of ``episodes`` (:func:`fire_rate`).
    """
    if len(skill.text) > max_chars:
        return f"skill {skill.name!r}: text is {len(skill.text)} characters (limit {max_chars}); shorten it"
    unknown = unknown_words(skill.text, tokenizer)
    if unknown:
        return (
            f"skill {skill.name!r}: the policy's tokenizer does not know {_clip(', '.join(map(repr, unknown)), 200)}; "
            "write the text with words from the task's observations and commands"
        )
    if sources and not any(
        any(shown(skill, ep, t) for t in (range(len(ep.actions)) if turns is None else turns)) for ep, turns in sources
    ):
        where = "at the turns diagnosed in " if any(turns is not None for _, turns in sources) else "in "
        return (
            f"skill {skill.name!r}: trigger {skill.trigger} {skill.pattern!r} is shown {where}none of the "
            f"{len(sources)} failed episodes it was made from; use a trigger that fires where they went wrong"
        )
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
        tokenizer: the policy's tokenizer: a skill with a word it encodes as unknown is rejected (None: no check).

    Every skill a creator proposes has passed :meth:`check` (the pre-test check); the skills it dropped since
    the last :meth:`create` call are in :attr:`rejections` (``{"skill", "reason"}``), which the controller logs.
    """

    name = "base"

    def __init__(
        self,
        engine: AssertionEngine | None = None,
        min_fire_rate: float = MIN_FIRE_RATE,
        max_chars: int = MAX_SKILL_CHARS,
        tokenizer: Any = None,
    ):
        self.engine = engine or AssertionEngine()
        self.min_fire_rate, self.max_chars, self.tokenizer = min_fire_rate, max_chars, tokenizer
        self.last_error = ""
        self.rejections: list[dict[str, str]] = []

    def check(
        self, skill: Skill, episodes: Sequence[Episode], sources: Sequence[tuple[Episode, Sequence[int] | None]]
    ) -> str | None:
        """Why a proposed skill fails the pre-test check, or None (:func:`verify_skill`, this creator's settings).

        ``sources``: the failed episodes it was made from, with their diagnosed turns (None: any turn).
        """
        return verify_skill(
            skill, episodes, self.min_fire_rate, self.max_chars, sources=sources, tokenizer=self.tokenizer
        )

    def reject(self, name: str, reason: str) -> None:
        """Record a proposed skill dropped by :meth:`check` (for the lifecycle log)."""
        self.rejections.append({"skill": name, "reason": reason})

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


def _top(keys: Counter) -> str | None:
    ranked = sorted((k for k in keys if k), key=lambda k: (-keys[k], k))
    return ranked[0] if ranked else None


def _predecessor(episodes: Sequence[Episode], pattern: str) -> str | None:
    """Most common key of the action just before the first ``pattern`` match (ties alphabetical)."""
    keys = Counter()
    for ep in episodes:
        index = next((i for i, a in enumerate(ep.actions) if re.search(pattern, a[:200])), None)
        if index:
            keys[action_key(ep.actions[index - 1])] += 1
    return _top(keys)


def _before_turns(sources: Sequence[tuple[Episode, list[int]]]) -> str | None:
    """Most common key of the action just before the diagnosed turns of ``sources`` (ties alphabetical).

    A trigger shown on those turns must match it.
    """
    return _top(Counter(action_key(ep.actions[t - 1]) for ep, turns in sources for t in turns if t))


def _next_step(episodes: Sequence[Episode], key: str | None, avoid: str | None = None) -> tuple[str | None, str]:
    """What successful ``episodes`` do right after an action of ``key`` (after their first action when None).

    Returns:
        The most common next key that differs from ``key`` and from ``avoid`` (the behaviour the skill is
        against), and a concrete action of it; ``(None, "")`` when there is none.
    """
    keys, examples = Counter(), {}
    for ep in episodes:
        for i, action in enumerate(ep.actions[:-1]):
            if key is None and i:
                break
            if key is None or action_key(action) == key:
                follow = action_key(ep.actions[i + 1])
                if follow and follow not in (key, avoid):
                    keys[follow] += 1
                    examples.setdefault(follow, _clip(ep.actions[i + 1].splitlines()[0], 80))
    top = _top(keys)
    return top, examples.get(top, "")


def _producer(episodes: Sequence[Episode], pattern: str) -> str | None:
    """Most common key of the actions whose observation matches ``pattern`` (ties alphabetical)."""
    keys = Counter(
        action_key(a) for ep in episodes for a, o in zip(ep.actions, ep.observations, strict=True)
        if re.search(pattern, o[:1000])
    )  # fmt: skip
    return _top(keys)


WHEN = {"beginning": "At the start of a task.", "general": "When the task needs it."}
"""The ``## When to Use`` line of a rule skill by trigger (an ``action_pattern`` one says "Right after you 'X'."),
in the words of the policy's SFT guidance (:func:`sage_agents.sft.guidance_skill`)."""


def when_line(trigger: str, pattern: str = "") -> str:
    """The ``## When to Use`` line of a guidance skill: :data:`WHEN`, or "Right after you 'go to'." for a pattern."""
    return WHEN.get(trigger) or f"Right after you '{pattern_words(pattern)}'."


def next_action(key: str, example: str, reason: str = "") -> str:
    """The ``## Action`` line of a guidance skill: what to do next, with a concrete command.

    ``Next, do 'heat', e.g. heat egg 1 with microwave 1.`` (with a ``reason``: ``... microwave 1: the microwave
    can heat the egg.``). The rule creator's skills and the guidance in the policy's SFT data
    (:func:`sage_agents.sft.guidance_skill`) share it, so that a model trained on that data reads what the creator
    writes. A rule skill's evidence (pass rates, the failure it addresses) goes to its description, for people.
    """
    return f"Next, do '{key}'" + (f", e.g. {example}" if example else "") + (f": {reason}." if reason else ".")


ADVICE = re.compile(r"Next, do '([^']+)'")
"""What :func:`next_action` writes, read back: the advised action key."""


def advised_key(text: str) -> str | None:
    """The action key a guidance text advises (``heat`` in ``Next, do 'heat', e.g. ...``), or None if it names none.

    The inverse of :func:`next_action`, for texts in its layout (the rule creator's skills, the SFT guidance).
    """
    found = ADVICE.search(text)
    return found.group(1) if found else None


def rule_advice(rates: PassRates, episodes: Sequence[Episode]) -> dict[str, Any]:
    """Name, description, text pieces and candidate triggers for a skill addressing one assertion.

    The advice is aimed at the situation the assertion diagnosed in the failed episodes
    (:func:`diagnosed_turns`): the first trigger tried fires after the action that most often comes just before
    it there, and the action text (:func:`next_action`) names the command to send then: what successes do, with
    a concrete example, never a rule in the abstract; a behaviour to avoid is advised as what to do instead.

    Each trigger carries the action text advised where it fires: a trigger that fires right after an action of
    key K names what successes do right after K (a skill is never shown after one action with advice worked
    out for another).

    Returns:
        ``{"name", "description", "action", "triggers": [(trigger, pattern, action), ...]}``; the triggers are
        tried in order until one verifies (:meth:`RuleCreator.author` writes the ``## When to Use`` line of
        each); ``action`` is the advice of a trigger given without its own (a ``general`` rewrite), None when
        the evidence names nothing to do; a trigger whose action is None is left out (no skill without one).
    """
    a, good = rates.assertion, rates.contrast >= 0
    p = a.params
    wins = [ep for ep in episodes if ep.success]
    losses = [ep for ep in episodes if not ep.success]
    sources = source_failures(rates, episodes)
    stats = f"({rates.success_rate:.0%} of successes vs {rates.failure_rate:.0%} of failures pass)"
    if not rates.n_success:  # failure-only diagnosis
        stats = f"({1 - rates.failure_rate:.0%} of {rates.n_failure} failed episodes break this)"
    general, beginning = ("general", ""), ("beginning", "")

    def after(key: str | None) -> list[tuple[str, str]]:
        return [("action_pattern", key_pattern(key))] if key else []

    def failing(pattern: str) -> str:  # a failure's action for the description, when there is one
        seen = _example(losses, pattern)
        return f" (e.g. {seen})" if seen else ""

    def advice(
        name: str, description: str, key: str | None, example: str, triggers: list, otherwise: str | None = None
    ) -> dict[str, Any]:
        action = next_action(key, example) if key else otherwise  # None: the evidence names nothing to do
        # a (trigger, pattern) pair takes the skill's action; a (trigger, pattern, action) triple brings its own
        options = [(t[0], t[1], t[2] if len(t) == 3 else action) for t in triggers]
        return {"name": name, "description": f"{description} {stats}", "action": action,
                "triggers": [option for option in options if option[2] is not None]}  # fmt: skip

    def told(key_and_example: tuple[str | None, str]) -> str | None:  # the action text of a (key, example) pair
        key, example = key_and_example
        return next_action(key, example) if key else None

    situation = _before_turns(sources)  # the key just before the diagnosed turns
    if a.check in ("action_exists", "action_not_exists"):
        word = pattern_words(p["pattern"])
        if (a.check == "action_exists") == good:
            pre = _predecessor(wins, p["pattern"])
            return advice(f"use_{_slug(word)}", f"Successful episodes use '{word}'.", word,
                          _example(wins, p["pattern"]), [*after(pre), beginning, general])  # fmt: skip
        instead, example = _next_step(wins, situation, avoid=word)
        return advice(f"avoid_{_slug(word)}", f"Failed episodes use '{word}'{failing(p['pattern'])}.", instead,
                      example, [*after(situation), general])  # fmt: skip
    if a.check == "action_before":
        first, second = pattern_words(p["first"]), pattern_words(p["second"])
        if good:
            triggers = [*after(situation), *after(_predecessor(wins, p["second"])), beginning, general]
            return advice(_slug(f"{first}_before_{second}"), f"Order: '{first}' before '{second}'.", first,
                          _example(wins, p["first"]), triggers)  # fmt: skip
        return advice(_slug(f"{first}_only_after_{second}"), f"Order: '{first}' only after '{second}'.", second,
                      _example(wins, p["second"]), [*after(situation), beginning, general])  # fmt: skip
    if a.check == "no_consecutive_repeat":
        instead, example = _next_step(wins, situation) if situation else (None, "")
        # without a success to copy (a failure-only diagnosis), the repeat itself is what to stop
        return advice(f"no_repeat_{_slug(situation)}" if situation else "no_repeats",
                      "Do not repeat the same action twice in a row.", instead, example, [*after(situation), general],
                      otherwise="Do not send the same command again: it has already been done.")  # fmt: skip
    if a.check == "final_action":
        word = pattern_words(p["pattern"])
        if not good:  # failures end with it: the task is not done there; advise what successes do next
            instead, example = _next_step(wins, situation, avoid=word)
            return advice(f"not_done_after_{_slug(word)}",
                          f"Failed episodes end with '{word}'{failing(p['pattern'])}.", instead,
                          example, [*after(situation), general])  # fmt: skip
        pre = _predecessor(wins, p["pattern"])
        return advice(f"finish_with_{_slug(word)}", f"Successful episodes end with '{word}'.", word,
                      _example(wins, p["pattern"]), [*after(pre), *after(situation), general])  # fmt: skip
    if a.check in ("max_steps", "min_steps"):
        short = (a.check == "max_steps") == good
        first, example = _next_step(wins, None) if short else (None, "")  # "be thorough" names no command
        return advice("be_efficient" if short else "be_thorough",
                      f"Successes take at {'most' if short else 'least'} {p['n']} actions.", first, example,
                      [beginning, general])  # fmt: skip
    if a.check == "action_count":
        word, high = pattern_words(p["pattern"]), p.get("max")
        if good:  # too many: where the failures sent one too many, what successes do there instead
            instead, example = _next_step(wins, word)
            there = [(*trigger, told(_next_step(wins, situation, avoid=word))) for trigger in after(situation)]
            return advice(f"limit_{_slug(word)}", f"Use '{word}' at most {high} times per task.", instead,
                          example, [*there, ("action_pattern", p["pattern"]), general])  # fmt: skip
        return advice(f"limit_{_slug(word)}", f"Do not hold back on '{word}'.", word, _example(wins, p["pattern"]),
                      [*after(situation), ("action_pattern", p["pattern"]), general])  # fmt: skip
    phrase = pattern_words(p["pattern"])
    if good:  # successes see it: name the action that makes it appear
        maker = _producer(wins, p["pattern"])
        pre = _predecessor(wins, key_pattern(maker)) if maker else None
        return advice(f"watch_{_slug(phrase)}", f"Observations with '{phrase}' go with success.", maker,
                      _example(wins, key_pattern(maker)) if maker else "",
                      [*after(pre), beginning, general])  # fmt: skip
    instead, example = _next_step(wins, situation)
    return advice(f"watch_{_slug(phrase)}", f"'{phrase}': the last command did not work.", instead, example,
                  [*after(situation), general])  # fmt: skip


class RuleCreator(Creator):
    """Offline creator from assertion pass-rate contrasts (see the module docstring).

    Args:
        engine: the assertion engine.
        min_fire_rate: verification fire-rate threshold.
        max_chars: verification length cap.
        prune_contrast: a rule skill whose assertion's ``|contrast|`` fell below this is pruned.
        modify_contrast: a covered assertion still above this gets its skill rewritten with a wider trigger.
        tokenizer: the policy's tokenizer (the pre-test check's vocabulary; None: no vocabulary check).
    """

    name = "rule"

    def __init__(
        self,
        engine: AssertionEngine | None = None,
        min_fire_rate: float = MIN_FIRE_RATE,
        max_chars: int = MAX_SKILL_CHARS,
        prune_contrast: float = 0.05,
        modify_contrast: float = 0.3,
        tokenizer: Any = None,
    ):
        super().__init__(engine, min_fire_rate, max_chars, tokenizer)
        self.prune_contrast, self.modify_contrast = prune_contrast, modify_contrast

    def author(
        self,
        rates: PassRates,
        episodes: Sequence[Episode],
        triggers: Sequence[tuple[str, str]] | None = None,
    ) -> tuple[Skill | None, list[str]]:
        """Write a skill for one assertion, trying its triggers in order until one passes :meth:`check`.

        A skill none of whose triggers passes is recorded in :attr:`rejections` with the last problem.

        Returns:
            ``(skill or None, verification problems met on the way)``.
        """
        advice = rule_advice(rates, episodes)
        if triggers is not None:  # given triggers take the skill's action
            options = [(t, p, advice["action"]) for t, p in triggers] if advice["action"] is not None else []
        else:
            options = advice["triggers"]
        if not options:
            problem = f"skill {advice['name']!r}: the episodes show no command to advise"
            self.reject(advice["name"], problem)
            return None, [problem]
        sources = source_failures(rates, episodes)
        problems: list[str] = []
        for trigger, pattern, action in options:
            # the text says when it is shown: right after the action its trigger matches
            text = _clip(skill_text(when_line(trigger, pattern), action), self.max_chars)
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
            problem = self.check(skill, episodes, sources)
            if problem is None:
                return skill, problems
            problems.append(problem)
        if problems:
            self.reject(advice["name"], problems[-1])
        return None, problems

    def create(
        self, episodes: Sequence[Episode], registry: VersionRegistry, step: int, exclude: Sequence[str] = ()
    ) -> Bundle | None:
        """See :meth:`Creator.create`."""
        self.rejections = []
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
