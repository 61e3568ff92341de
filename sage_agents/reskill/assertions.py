"""The assertion engine: rule-based checks on episodes and their pass rates among successes vs failures.

ReSkill (arXiv 2606.01619) diagnoses failures with up to 10 assertions drawn from 9 check types. Each check is
a cheap, deterministic test of one episode (no model call); its pass rates over the reservoir, split by
success and failure, say which behaviours go with success (``contrast = success_rate - failure_rate``).

| check | params | passes when |
|---|---|---|
| ``action_exists`` | ``pattern`` | some action matches |
| ``action_not_exists`` | ``pattern`` | no action matches |
| ``action_before`` | ``first``, ``second`` | both match somewhere and the first ``first`` match comes before the first
  ``second`` match |
| ``no_consecutive_repeat`` | ``prefix`` (optional) | no two consecutive equal actions (among actions starting with
  ``prefix``; others break a run) |
| ``final_action`` | ``pattern`` | the last action matches |
| ``min_steps`` | ``n`` | at least ``n`` actions |
| ``max_steps`` | ``n`` | at most ``n`` actions |
| ``action_count`` | ``pattern``, ``min`` (0), ``max`` (None = no bound) | the number of matching actions is in range |
| ``observation_contains`` | ``pattern``, ``after_action`` (optional) | some observation matches (only observations
  after the first action matching ``after_action``, when given) |

Patterns are Python regexes searched with ``re.search``. They may come from an LLM, so they must pass the
library's ``action_pattern`` safety rules (:func:`sage_envs.skills.library.pattern_problem`: bounded size, no
nested repeats) and are matched against the first 200 characters of an action and the first 1000 of an
observation.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sage_agents.reskill.reservoir import Episode
from sage_envs.skills.library import pattern_problem

CHECK_TYPES = (
    "action_exists",
    "action_not_exists",
    "action_before",
    "no_consecutive_repeat",
    "final_action",
    "min_steps",
    "max_steps",
    "action_count",
    "observation_contains",
)
PARAMS = {
    "action_exists": ({"pattern"}, set()),
    "action_not_exists": ({"pattern"}, set()),
    "action_before": ({"first", "second"}, set()),
    "no_consecutive_repeat": (set(), {"prefix"}),
    "final_action": ({"pattern"}, set()),
    "min_steps": ({"n"}, set()),
    "max_steps": ({"n"}, set()),
    "action_count": ({"pattern"}, {"min", "max"}),
    "observation_contains": ({"pattern"}, {"after_action"}),
}
"""check -> (required params, optional params)."""
REGEX_PARAMS = ("pattern", "first", "second", "after_action")
COUNT_PARAMS = ("n", "min", "max")
"""Params mined from counts in the data (left out of :attr:`Assertion.family`)."""
MAX_ACTION_CHARS = 200
MAX_OBSERVATION_CHARS = 1000
MAX_ASSERTIONS = 10


@dataclass
class Assertion:
    """One check with its parameters; construction validates both."""

    check: str
    """One of :data:`CHECK_TYPES`."""
    params: dict[str, Any] = field(default_factory=dict)
    """The check's parameters (see the module table)."""
    description: str = ""
    """What it tests, in words (for prompts and logs)."""

    def __post_init__(self) -> None:
        if self.check not in CHECK_TYPES:
            raise ValueError(f"unknown check {self.check!r}; use one of {', '.join(CHECK_TYPES)}")
        if not isinstance(self.params, dict):
            raise ValueError(f"params of {self.check} must be a dict, got {type(self.params).__name__}")
        required, optional = PARAMS[self.check]
        missing, unknown = required - set(self.params), set(self.params) - required - optional
        if missing or unknown:
            raise ValueError(
                f"{self.check} needs params {sorted(required)} (optional {sorted(optional)}); "
                f"missing {sorted(missing)}, unknown {sorted(unknown)}"
            )
        for name in REGEX_PARAMS:
            value = self.params.get(name)
            if value is None and name in optional:
                continue
            if name in self.params:
                if not isinstance(value, str) or not value:
                    raise ValueError(f"{self.check}.{name} must be a non-empty regex string, got {value!r}")
                problem = pattern_problem(value)
                if problem:
                    raise ValueError(f"{self.check}.{name}: {problem}")
        if "prefix" in self.params and not isinstance(self.params["prefix"], str):
            raise ValueError(f"no_consecutive_repeat.prefix must be a string, got {self.params['prefix']!r}")
        for name in ("n", "min", "max"):
            value = self.params.get(name)
            if name in self.params and not (value is None and name == "max"):
                if type(value) is not int or value < 0:
                    raise ValueError(f"{self.check}.{name} must be a non-negative int, got {value!r}")
        if not isinstance(self.description, str):
            raise ValueError("description must be a string")

    @property
    def id(self) -> str:
        """A stable identifier: ``check`` + the params as sorted JSON."""
        return f"{self.check}{json.dumps(self.params, sort_keys=True)}"

    @property
    def family(self) -> str:
        """The behaviour tested, without the counts mined from the data (``n``, ``min``, ``max``).

        ``max_steps {"n": 6}`` and ``max_steps {"n": 26}`` are one family: the counts drift as the reservoir
        changes, so the creator matches rejected and live skills by family, not by :attr:`id`.
        """
        params = {k: v for k, v in self.params.items() if k not in COUNT_PARAMS}
        return f"{self.check}{json.dumps(params, sort_keys=True)}"

    def evaluate(self, episode: Episode) -> bool:
        """Whether ``episode`` passes this check (see the module table)."""
        return _CHECKS[self.check](episode, self.params)

    def to_dict(self) -> dict[str, Any]:
        """``{"check", "params", "description"}``."""
        return {"check": self.check, "params": dict(self.params), "description": self.description}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Assertion:
        """Build (and validate) an assertion from :meth:`to_dict` output; ValueError on bad input."""
        if not isinstance(d, dict):
            raise ValueError(f"an assertion must be a JSON object, got {type(d).__name__}")
        unknown = set(d) - {"check", "params", "description"}
        if unknown:
            raise ValueError(f"unknown assertion keys {sorted(unknown)}; use check, params, description")
        return cls(d.get("check", ""), d.get("params", {}), d.get("description", ""))


# ---------------------------------------------------------------------------------------------- CHECKS
def _matches(pattern: str, text: str, limit: int = MAX_ACTION_CHARS) -> bool:
    return re.search(pattern, text[:limit]) is not None


def _first_index(actions: Sequence[str], pattern: str) -> int | None:
    return next((i for i, a in enumerate(actions) if _matches(pattern, a)), None)


def _action_before(ep: Episode, p: dict[str, Any]) -> bool:
    first, second = _first_index(ep.actions, p["first"]), _first_index(ep.actions, p["second"])
    return first is not None and second is not None and first < second


def _no_consecutive_repeat(ep: Episode, p: dict[str, Any]) -> bool:
    prefix, previous = p.get("prefix", ""), None
    for action in ep.actions:
        if prefix and not action.startswith(prefix):
            previous = None
            continue
        if action == previous:
            return False
        previous = action
    return True


def _action_count(ep: Episode, p: dict[str, Any]) -> bool:
    count = sum(_matches(p["pattern"], a) for a in ep.actions)
    high = p.get("max")
    return p.get("min", 0) <= count and (high is None or count <= high)


def _observation_contains(ep: Episode, p: dict[str, Any]) -> bool:
    after = p.get("after_action")
    start = 0
    if after:
        index = _first_index(ep.actions, after)
        if index is None:
            return False
        start = index  # observations[i] follows actions[i]: the matching action's own result counts
    return any(_matches(p["pattern"], o, MAX_OBSERVATION_CHARS) for o in ep.observations[start:])


_CHECKS = {
    "action_exists": lambda ep, p: any(_matches(p["pattern"], a) for a in ep.actions),
    "action_not_exists": lambda ep, p: not any(_matches(p["pattern"], a) for a in ep.actions),
    "action_before": _action_before,
    "no_consecutive_repeat": _no_consecutive_repeat,
    "final_action": lambda ep, p: bool(ep.actions) and _matches(p["pattern"], ep.actions[-1]),
    "min_steps": lambda ep, p: len(ep.actions) >= p["n"],
    "max_steps": lambda ep, p: len(ep.actions) <= p["n"],
    "action_count": _action_count,
    "observation_contains": _observation_contains,
}


# ---------------------------------------------------------------------------------------------- PASS RATES
@dataclass
class PassRates:
    """Pass rates of one assertion over a set of episodes, split by outcome."""

    assertion: Assertion
    """The assertion."""
    success_rate: float
    """Share of successful episodes that pass (0 when there are none)."""
    failure_rate: float
    """Share of failed episodes that pass (0 when there are none)."""
    n_success: int
    """Successful episodes evaluated."""
    n_failure: int
    """Failed episodes evaluated."""
    overall: float
    """Share of all episodes that pass."""

    @property
    def contrast(self) -> float:
        """``success_rate - failure_rate``: > 0 means passing goes with success; 0 without both outcomes."""
        if not self.n_success or not self.n_failure:
            return 0.0
        return self.success_rate - self.failure_rate

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary (assertion dict + rates + contrast)."""
        return {
            **self.assertion.to_dict(),
            "success_rate": self.success_rate,
            "failure_rate": self.failure_rate,
            "n_success": self.n_success,
            "n_failure": self.n_failure,
            "overall": self.overall,
            "contrast": self.contrast,
        }


def pass_rates(assertion: Assertion, episodes: Sequence[Episode]) -> PassRates:
    """Evaluate ``assertion`` on every episode and split the pass rate by success / failure."""
    results = [(ep.success, assertion.evaluate(ep)) for ep in episodes]
    wins = [passed for success, passed in results if success]
    losses = [passed for success, passed in results if not success]
    return PassRates(
        assertion,
        sum(wins) / len(wins) if wins else 0.0,
        sum(losses) / len(losses) if losses else 0.0,
        len(wins),
        len(losses),
        sum(p for _, p in results) / len(results) if results else 0.0,
    )


def restates_outcome(assertion: Assertion, episodes: Sequence[Episode]) -> bool:
    """Whether ``assertion`` only restates the outcome because every failure ran into the step limit.

    When all failed episodes have the same length, the longest in the reservoir (they were cut at the task's
    step limit; every failure does so when a task can only end by success or by running out of steps),
    ``max_steps`` with a smaller ``n`` passes exactly on the episodes that were not cut: its contrast is 1 by
    construction and says nothing about behaviour ("successes take at most 29 actions" with a limit of 30).
    """
    if assertion.check != "max_steps":
        return False
    failures = [len(ep.actions) for ep in episodes if not ep.success]
    if not failures:
        return False
    cap = max(len(ep.actions) for ep in episodes)
    return all(n == cap for n in failures) and assertion.params["n"] < cap


# ---------------------------------------------------------------------------------------------- MINING
def action_key(action: str) -> str:
    """The verb of an action: its first word, or two when the second is a particle (``go to``, ``pick up``)."""
    words = action.strip().lower().split()
    if not words:
        return ""
    if len(words) > 1 and words[1] in ("to", "up", "down", "on", "off", "in", "out"):
        return " ".join(words[:2])
    return words[0]


def key_pattern(key: str) -> str:
    r"""The regex of an action key: ``^heat\b``."""
    return "^" + re.escape(key) + r"\b"


def pattern_words(pattern: str) -> str:
    r"""Readable words of a key pattern (``^go\ to\b`` -> ``go to``); other regexes are returned as they are."""
    text = pattern.removeprefix("^").removesuffix(r"\b")
    plain = text.replace("\\ ", " ")
    return plain if re.fullmatch(r"[\w ,.:'!-]*", plain) else pattern


def _observation_head(observation: str) -> str:
    """First (up to) 3 words of the first sentence, e.g. ``Nothing happens`` or ``You arrive at``."""
    sentence = re.split(r"[.!?\n]", observation.strip(), maxsplit=1)[0]
    return " ".join(sentence.split()[:3])


def mine_assertions(episodes: Sequence[Episode], max_keys: int = 8) -> list[Assertion]:
    """Candidate assertions of every check type, built from the action verbs, lengths and observations seen.

    Deterministic: keys are ranked by the number of episodes using them (ties alphabetically). Each candidate
    is phrased so that, where the data allow, passing goes with success (e.g. ``action_not_exists`` for a verb
    that shows up mostly in failures).
    """
    if not episodes:
        return []
    successes = [ep for ep in episodes if ep.success]
    key_episodes = Counter(k for ep in episodes for k in {action_key(a) for a in ep.actions} if k)
    keys = [k for k, _ in sorted(key_episodes.items(), key=lambda kv: (-kv[1], kv[0]))][:max_keys]
    out: list[Assertion] = [Assertion("no_consecutive_repeat", {}, "never repeats the same action twice in a row")]
    for key in keys:
        pattern = key_pattern(key)
        exists = pass_rates(Assertion("action_exists", {"pattern": pattern}), episodes)
        if exists.contrast >= 0:
            out.append(Assertion("action_exists", {"pattern": pattern}, f"uses '{key}' at least once"))
        else:
            out.append(Assertion("action_not_exists", {"pattern": pattern}, f"never uses '{key}'"))
        if successes:
            most = max(sum(action_key(a) == key for a in ep.actions) for ep in successes)
            if most:
                out.append(
                    Assertion(
                        "action_count",
                        {"pattern": pattern, "min": 0, "max": most},
                        f"uses '{key}' at most {most} times",
                    )
                )
    for first in keys[:5]:
        for second in keys[:5]:
            if first != second:
                params = {"first": key_pattern(first), "second": key_pattern(second)}
                out.append(Assertion("action_before", params, f"uses '{first}' before '{second}'"))
    finals = Counter(action_key(ep.actions[-1]) for ep in episodes if ep.actions)
    for key, _ in sorted(finals.items(), key=lambda kv: (-kv[1], kv[0]))[:3]:
        if key:
            out.append(Assertion("final_action", {"pattern": key_pattern(key)}, f"ends with '{key}'"))
    if successes:
        shortest, longest = min(len(ep.actions) for ep in successes), max(len(ep.actions) for ep in successes)
        out.append(Assertion("min_steps", {"n": shortest}, f"takes at least {shortest} actions"))
        bound = Assertion("max_steps", {"n": longest}, f"takes at most {longest} actions")
        if not restates_outcome(bound, episodes):
            out.append(bound)
    heads = Counter(h for ep in episodes for h in {_observation_head(o) for o in ep.observations} if h)
    for head, _ in sorted(heads.items(), key=lambda kv: (-kv[1], kv[0]))[:6]:
        pattern = re.escape(head)
        if pattern_problem(pattern) is None:
            out.append(Assertion("observation_contains", {"pattern": pattern}, f"sees '{head}'"))
    return out


# ---------------------------------------------------------------------------------------------- ENGINE
class AssertionEngine:
    """Keeps up to ``max_assertions`` assertions: the most discriminative among the kept, mined and proposed ones.

    Args:
        max_assertions: how many to keep (ReSkill: 10).
        min_contrast: an assertion is kept only when ``|contrast| >= min_contrast``.
        min_per_outcome: contrasts need at least this many successes and failures.
    """

    def __init__(self, max_assertions: int = MAX_ASSERTIONS, min_contrast: float = 0.2, min_per_outcome: int = 2):
        self.max_assertions, self.min_contrast, self.min_per_outcome = max_assertions, min_contrast, min_per_outcome
        self.assertions: list[Assertion] = []

    def rates(self, episodes: Sequence[Episode]) -> list[PassRates]:
        """Pass rates of the kept assertions over ``episodes``, in kept order."""
        return [pass_rates(a, episodes) for a in self.assertions]

    def refresh(self, episodes: Sequence[Episode], proposed: Sequence[Assertion] = ()) -> list[PassRates]:
        """Re-rank kept + ``proposed`` + mined assertions on ``episodes``; keep the top ``max_assertions``.

        Returns:
            The kept assertions' pass rates, most discriminative (largest ``|contrast|``) first.
        """
        wins = sum(ep.success for ep in episodes)
        if min(wins, len(episodes) - wins) < self.min_per_outcome:
            return self.rates(episodes)  # no contrast to learn from: keep what we have
        pool: dict[str, Assertion] = {}
        for assertion in [*self.assertions, *proposed, *mine_assertions(episodes)]:
            pool.setdefault(assertion.id, assertion)
        scored = [
            (i, pass_rates(a, episodes)) for i, a in enumerate(pool.values()) if not restates_outcome(a, episodes)
        ]
        # most discriminative first; ties keep pool order (kept, then proposed, then mined): a stable set
        scored = sorted(
            (r for r in scored if abs(r[1].contrast) >= self.min_contrast), key=lambda r: (-abs(r[1].contrast), r[0])
        )
        kept = [r for _, r in scored[: self.max_assertions]]
        self.assertions = [r.assertion for r in kept]
        return kept

    def summary(self, episodes: Sequence[Episode]) -> str:
        """One line per kept assertion with its pass rates (for prompts)."""
        lines = []
        for i, r in enumerate(self.rates(episodes)):
            a = r.assertion
            lines.append(
                f"A{i}. {a.check} {json.dumps(a.params, sort_keys=True)} ({a.description}): pass rate "
                f"{r.success_rate:.2f} in {r.n_success} successes vs {r.failure_rate:.2f} in {r.n_failure} failures"
            )
        return "\n".join(lines) or "(no assertions yet)"

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {
            "max_assertions": self.max_assertions,
            "min_contrast": self.min_contrast,
            "min_per_outcome": self.min_per_outcome,
            "assertions": [a.to_dict() for a in self.assertions],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AssertionEngine:
        """Inverse of :meth:`to_dict`."""
        engine = cls(d["max_assertions"], d["min_contrast"], d["min_per_outcome"])
        engine.assertions = [Assertion.from_dict(a) for a in d["assertions"]]
        return engine
