"""In-group version sampling: Thompson sampling between two library versions with adaptive discounting.

ReSkill (arXiv 2606.01619) tests a new library version against the current one *inside* GRPO groups: every
rollout slot independently gets the new version with probability ``P(new) = P(theta_new > theta_old)`` under
the two Beta posteriors (Beta(1, 1) priors), clamped to ``[0.15, 0.85]`` so both arms keep being played. After
each training step the posteriors are discounted, ``alpha <- w * alpha + m``, ``beta <- w * beta + (n - m)``
with ``w = M / (M + n)`` (``n`` episodes and ``m`` successes of that arm this step), so that old evidence
fades as the policy changes. ``M`` is set by empirical Bayes: the value in 1..2000 that maximises the
marginal likelihood of the steps of the completed tests under this discounted model (none before 2 tests).
A test ends after at least 5 steps and 50 episodes: accept if the new posterior mean is higher, else revert
(optionally also requiring a gain within steps, :func:`within_step_z`; not in the paper).

The top of the file holds the math as pure functions (each tested against a naive loop, a closed form or a
Monte Carlo estimate in tests/sage_agents/reskill/test_thompson.py); :class:`ThompsonTracker` below is the
state machine the trainer drives. Every number it keeps is JSON-serialisable so that a checkpoint resumes it
exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import betabinom, hypergeom

P_CLAMP = 0.15
"""P(new) is clamped to [P_CLAMP, 1 - P_CLAMP] (arXiv 2606.01619, in-group version sampling)."""
M_MAX = 2000
"""Empirical-Bayes grid: M in 1..M_MAX (arXiv 2606.01619)."""
MIN_TESTS_FOR_M = 2
"""No discount (M = infinity) until this many tests have completed (arXiv 2606.01619)."""
DISCOUNTS = ("eb", "none", "last_step")
DECISIONS = ("continue", "accept", "reject")


# ---------------------------------------------------------------------------------------------- POSTERIORS
def beta_mean(alpha: float, beta: float) -> float:
    """Posterior mean ``alpha / (alpha + beta)`` of a Beta(alpha, beta) success rate."""
    return alpha / (alpha + beta)


def prob_new_better_exact(a_new: int, b_new: float, a_old: float, b_old: float) -> float:
    """``P(theta_new > theta_old)`` in closed form (arXiv 2606.01619's P(new)); ``a_new`` must be a positive integer.

    With X ~ Beta(a_new, b_new), Y ~ Beta(a_old, b_old) independent (the standard Bayesian A/B identity)::

        P(X > Y) = sum_{i=0}^{a_new-1} B(a_old + i, b_old + b_new) / ((b_new + i) B(1 + i, b_new) B(a_old, b_old))

    Used for undiscounted posteriors (integer counts + Beta(1, 1) prior) and as the reference of the
    numerical method in the tests.
    """
    if int(a_new) != a_new or a_new < 1:
        raise ValueError(f"a_new={a_new!r}: the closed form needs a positive integer; use prob_new_better")
    lbeta = _log_beta
    total = 0.0
    for i in range(int(a_new)):
        total += math.exp(
            lbeta(a_old + i, b_old + b_new) - math.log(b_new + i) - lbeta(1 + i, b_new) - lbeta(a_old, b_old)
        )
    return min(1.0, max(0.0, total))


def prob_new_better(a_new: float, b_new: float, a_old: float, b_old: float) -> float:
    """``P(theta_new > theta_old)`` for any positive (discounted, non-integer) Beta parameters (arXiv 2606.01619).

    Numerical method (deterministic): ``P = integral f_new(x) F_old(x) dx`` by the trapezoid rule after the
    tanh-sinh substitution ``x = (1 + tanh(pi/2 * sinh t)) / 2``. In ``t`` both densities become smooth and
    decay double-exponentially, even when a parameter is below 1 (an unbounded density at 0 or 1) or large
    (a narrow peak): ``log x``, ``log(1 - x)`` and the Jacobian are evaluated in log space, the step is a
    sixteenth of the narrowest peak's width in ``t`` (at most 1/512) and the range grows until the smallest
    parameter's tail is covered. ``F_old`` is the cumulative trapezoid sum on the same grid and both densities
    are renormalised to 1 on the grid. Richardson extrapolation from steps h and 2h cancels the O(h^2) error:
    agrees with :func:`prob_new_better_exact` to ~1e-8 and with Monte Carlo within its error (tests).
    Parameters are floored at 1e-9.
    """
    params = [max(float(p), 1e-9) for p in (a_new, b_new, a_old, b_old)]
    smallest = min(params)
    # tail of Beta(a, .) near 0 in t: x^a ~ exp(-a * pi/2 * e^|t|); cover it to ~e^-40
    half_range = min(40.0, max(4.0, math.log(80.0 / (math.pi * smallest))))
    step = 1.0 / 512
    for a, b in ((params[0], params[1]), (params[2], params[3])):
        p = a / (a + b)
        sd_x = math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
        s = math.atanh(min(max(2 * p - 1, -1 + 1e-15), 1 - 1e-15))  # x = (1 + tanh s) / 2 at the mean
        t = math.asinh(2 * s / math.pi)
        dx_dt = math.pi * math.cosh(t) * max(p * (1 - p), 1e-300)
        step = min(step, sd_x / dx_dt / 16) if dx_dt > 0 and sd_x > 0 else step
    step = max(step, 2 * half_range / 1_000_000)  # bound the work: 1M points at most
    t = np.arange(-half_range, half_range + step / 2, step)  # (N,)
    s = 0.5 * math.pi * np.sinh(t)  # (N,)
    log_x, log_1mx = -np.logaddexp(0.0, -2 * s), -np.logaddexp(0.0, 2 * s)  # (N,) each
    log_jac = np.logaddexp(t, -t)  # log(2 cosh t); constants cancel in the normalisation
    log_new = params[0] * log_x + params[1] * log_1mx + log_jac  # (N,) log density of t, unnormalised
    log_old = params[2] * log_x + params[3] * log_1mx + log_jac  # (N,)
    fine = _grid_probability(log_new, log_old)
    coarse = _grid_probability(log_new[::2], log_old[::2])  # the same rule at step 2h
    return float(min(1.0, max(0.0, (4 * fine - coarse) / 3)))  # Richardson: the O(h^2) error cancels


def _grid_probability(log_new: np.ndarray, log_old: np.ndarray) -> float:
    """``sum_i g_new[i] * F_old[i]`` with both densities normalised on the grid and F_old the trapezoid CDF."""
    g_new, g_old = _normalised(log_new), _normalised(log_old)  # (N,) each, sum = 1
    cdf_old = np.cumsum(g_old) - 0.5 * g_old  # (N,)
    return float(np.dot(g_new, cdf_old))


def _normalised(log_density: np.ndarray) -> np.ndarray:
    """Exponentiate a log density on the grid and scale it to sum to 1."""
    d = np.exp(log_density - log_density.max())
    return d / d.sum()


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def assignment_probability(a_new: float, b_new: float, a_old: float, b_old: float, clamp: float = P_CLAMP) -> float:
    """P(new) of one rollout slot: ``P(theta_new > theta_old)`` clamped to [clamp, 1 - clamp] (arXiv 2606.01619)."""
    return min(1.0 - clamp, max(clamp, prob_new_better(a_new, b_new, a_old, b_old)))


# ---------------------------------------------------------------------------------------------- DISCOUNT
def discount_weight(M: float | None, n: int) -> float:
    """``w = M / (M + n)`` (arXiv 2606.01619); 1 (no discount) when ``M`` is None or the arm had no episode."""
    if M is None or n <= 0:
        return 1.0
    return M / (M + n)


def discounted_update(alpha: float, beta: float, m: int, n: int, M: float | None) -> tuple[float, float]:
    """One step of the adaptive discount: ``alpha <- w alpha + m``, ``beta <- w beta + (n - m)``, ``w = M/(M+n)``.

    arXiv 2606.01619 (adaptive discounting). At the fixed point ``alpha + beta = M + n``: the posterior keeps
    about ``M`` pseudo-episodes of memory before each step's ``n`` new ones.
    """
    w = discount_weight(M, n)
    return w * alpha + m, w * beta + (n - m)


def discounted_log_likelihood(steps: Sequence[Sequence[int]], Ms: np.ndarray) -> np.ndarray:
    """Log marginal likelihood of one arm's per-step counts under the discounted Beta model, for each M.

    The model behind ``alpha <- w alpha + m`` (arXiv 2606.01619): start from Beta(1, 1); before each step the
    posterior is flattened by ``w = M / (M + n)``, the step's ``m`` of ``n`` successes are Beta-Binomial under
    the flattened posterior, then counted in. The marginal likelihood is the product of these one-step
    predictive probabilities (the chain rule), so ``sum_t log BetaBinom(m_t | n_t, w_t alpha_t, w_t beta_t)``.

    Args:
        steps: ``[(m, n), ...]`` successes and episodes of the arm at each step of one test (n = 0 skipped).
        Ms: (G,) candidate values of M.

    Returns:
        (G,) log-likelihood of each M.
    """
    Ms = np.asarray(Ms, dtype=float)
    alpha, beta, ll = np.ones_like(Ms), np.ones_like(Ms), np.zeros_like(Ms)  # (G,) each
    for m, n in steps:
        if n <= 0:
            continue
        w = Ms / (Ms + n)  # (G,)
        alpha, beta = w * alpha, w * beta
        ll += betabinom.logpmf(int(m), int(n), alpha, beta)  # (G,)
        alpha, beta = alpha + m, beta + (n - m)
    return ll


def estimate_M(log_likelihood: Sequence[float] | np.ndarray, completed_tests: int) -> int | None:
    """Empirical-Bayes M from the summed log-likelihoods of the completed tests (arXiv 2606.01619).

    Returns the argmax over M = 1..len(log_likelihood) of the completed tests' log-likelihood (each test scored
    by :func:`discounted_log_likelihood` on both arms; ties go to the smaller M), or None (no discount) before
    ``MIN_TESTS_FOR_M`` completed tests.
    """
    if completed_tests < MIN_TESTS_FOR_M:
        return None
    return int(np.argmax(np.asarray(log_likelihood))) + 1


def within_step_z(history: Sequence[Sequence[int]]) -> float:
    """How far the new arm's successes lie above chance *within* each step, as a z-score (Cochran-Mantel-Haenszel).

    Why: a step plays one group of rollouts on one chain, and Thompson sampling gives more rollouts to the arm it
    favours, so pooled counts mix easy and hard steps in unequal shares (Simpson's paradox): in the demo-long run
    a version scored 17/50 against 2/14 pooled and 17 successes against 16.0 expected within its steps
    (docs/reskill.md, "Deciding within steps"). Under the null that the version changes nothing, a step's ``K``
    successes fall on its ``N`` rollouts at random, so the new arm's count is hypergeometric with mean
    ``n_new K / N`` and variance ``n_new n_old K (N - K) / (N^2 (N - 1))``; ``z = sum(m_new - mean) /
    sqrt(sum variance)`` over the steps, the CMH statistic of the 2x2 tables, one per step.

    Args:
        history: per step ``[m_new, n_new, m_old, n_old]`` (``ThompsonTracker``'s test history).

    Returns:
        z (> 0: more successes on the new arm than chance within steps); 0 when no step can tell (each step's
        rollouts all on one arm, or all won or all lost).
    """
    gain = variance = 0.0
    for m_new, n_new, m_old, n_old in history:
        total, wins = n_new + n_old, m_new + m_old
        if total < 2:
            continue
        gain += m_new - n_new * wins / total
        variance += n_new * n_old * wins * (total - wins) / (total**2 * (total - 1))
    return gain / math.sqrt(variance) if variance > 0 else 0.0


def within_step_p(history: Sequence[Sequence[int]]) -> float:
    """One-sided exact p-value of the new arm's successes within steps (the exact form of :func:`within_step_z`).

    Why: a test of a few dozen episodes at a low success rate holds a handful of successes, too few for the normal
    approximation behind ``z`` (the Mantel-Fleiss rule asks for 5 between the expected count and each of its
    bounds). Conditioning on every step's margins, as ``z`` does, the new arm's count in a step is hypergeometric
    under the null and the steps are independent, so the test's count is distributed as their convolution; the
    p-value is ``P(X >= observed)`` under it (the exact conditional test of the stratified 2x2 tables; for one step,
    Fisher's exact test).

    Args:
        history: per step ``[m_new, n_new, m_old, n_old]`` (``ThompsonTracker``'s test history).

    Returns:
        p in (0, 1]; 1 when no step can tell.
    """
    null = np.ones(1)  # P(the new arm's count above its lowest possible value = k), k = 0, 1, ...
    observed_above_lowest = 0
    for m_new, n_new, m_old, n_old in history:
        total, wins = n_new + n_old, m_new + m_old
        if total == 0:
            continue  # a step without episodes (scipy's hypergeometric of an empty urn is nan)
        lowest, highest = max(0, wins - n_old), min(wins, n_new)
        null = np.convolve(null, hypergeom.pmf(np.arange(lowest, highest + 1), total, wins, n_new))
        observed_above_lowest += m_new - lowest
    return float(min(1.0, null[observed_above_lowest:].sum()))


def accept_decision(
    steps: int,
    episodes: int,
    mean_new: float,
    mean_old: float,
    min_steps: int = 5,
    min_episodes: int = 50,
    z: float = 0.0,
    min_z: float | None = None,
) -> str:
    """The accept rule (arXiv 2606.01619): ``continue``, ``accept`` or ``reject``.

    ``continue`` until ``steps >= min_steps`` and ``episodes >= min_episodes``; then ``accept`` when the new
    posterior mean is strictly higher, else ``reject`` (revert to the snapshot). With ``min_z`` (not in the
    paper), accepting also needs the :func:`within_step_z` ``z`` of the test above ``min_z``.
    """
    if steps < min_steps or episodes < min_episodes:
        return "continue"
    return "accept" if accepts(mean_new, mean_old, z, min_z) else "reject"


def accepts(mean_new: float, mean_old: float, z: float = 0.0, min_z: float | None = None) -> bool:
    """Whether a test that has run long enough keeps its new version (:func:`accept_decision`'s rule)."""
    return mean_new > mean_old and (min_z is None or z > min_z)


# ---------------------------------------------------------------------------------------------- TRACKER
class ThompsonTracker:
    """The A/B test of one candidate version at a time, driven once per training step.

    Per step: :meth:`assign` draws new/old for each rollout slot, :meth:`record` takes each episode's outcome,
    :meth:`end_step` folds the step into the posteriors (with the discount), :meth:`decision` says whether to
    go on, and :meth:`finish` closes the test (and re-estimates M). ``state_dict``/``from_state`` round-trip
    every field through JSON.

    Args:
        discount: ``eb`` (w = M/(M+n), M by empirical Bayes), ``none`` (w = 1) or ``last_step`` (the posterior
            is the prior plus the arm's last step with episodes only).
        clamp: P(new) is clamped to ``[clamp, 1 - clamp]``.
        min_steps: steps before a decision.
        min_episodes: episodes (both arms) before a decision.
        m_max: the empirical-Bayes grid is M = 1..m_max.
        min_within_step_z: None (the paper's rule) or the :func:`within_step_z` a version must exceed to be
            accepted besides a higher posterior mean (0: any gain within steps; 0.84: one-sided p < 0.2).
    """

    def __init__(
        self,
        discount: str = "eb",
        clamp: float = P_CLAMP,
        min_steps: int = 5,
        min_episodes: int = 50,
        m_max: int = M_MAX,
        min_within_step_z: float | None = None,
    ):
        if discount not in DISCOUNTS:
            raise ValueError(f"discount={discount!r}; use one of {DISCOUNTS}")
        if not 0 <= clamp < 0.5:
            raise ValueError(f"clamp={clamp!r}; use a value in [0, 0.5), e.g. {P_CLAMP}")
        self.discount, self.clamp = discount, float(clamp)
        self.min_steps, self.min_episodes, self.m_max = int(min_steps), int(min_episodes), int(m_max)
        self.min_within_step_z = None if min_within_step_z is None else float(min_within_step_z)
        self.test: dict[str, Any] | None = None
        self.completed_tests = 0
        self.log_likelihood = [0.0] * self.m_max
        self.M: int | None = None

    # ------------------------------------------------------------------ one test
    @property
    def testing(self) -> bool:
        """True while a candidate version is under test."""
        return self.test is not None

    def start(self, version: int, step: int) -> None:
        """Open the test of ``version`` (Beta(1, 1) priors on both arms) at training step ``step``."""
        if self.test is not None:
            raise RuntimeError(f"version {self.test['version']} is still under test; finish() it first")
        self.test = {
            "version": int(version),
            "started_step": int(step),
            "alpha_new": 1.0,
            "beta_new": 1.0,
            "alpha_old": 1.0,
            "beta_old": 1.0,
            "steps": 0,
            "episodes": 0,
            "episodes_new": 0,
            "history": [],  # per step: [m_new, n_new, m_old, n_old]
            "pending": [0, 0, 0, 0],
        }

    def p_new(self) -> float:
        """P(new) for the next slot: clamped ``P(theta_new > theta_old)``; 0 when nothing is under test."""
        if self.test is None:
            return 0.0
        t = self.test
        return assignment_probability(t["alpha_new"], t["beta_new"], t["alpha_old"], t["beta_old"], self.clamp)

    def assign(self, n: int, rng: np.random.Generator) -> list[bool]:
        """Draw new (True) or old (False) for ``n`` slots, each independently with probability :meth:`p_new`."""
        if self.test is None:
            return [False] * n
        p = self.p_new()
        return [bool(u < p) for u in rng.random(n)]

    def record(self, new: bool, success: bool) -> None:
        """Count one episode of this step: its arm and whether it succeeded."""
        assert self.test is not None, "record() outside a test"
        pending = self.test["pending"]
        offset = 0 if new else 2
        pending[offset] += int(bool(success))
        pending[offset + 1] += 1

    def end_step(self) -> dict[str, float]:
        """Fold this step's counts into both posteriors with the configured discount; return the step's numbers."""
        assert self.test is not None, "end_step() outside a test"
        t = self.test
        m_new, n_new, m_old, n_old = t["pending"]
        weights = {}
        for arm, m, n in (("new", m_new, n_new), ("old", m_old, n_old)):
            a, b = t[f"alpha_{arm}"], t[f"beta_{arm}"]
            if self.discount == "last_step":
                w = 0.0 if n else 1.0
                a, b = (1.0 + m, 1.0 + (n - m)) if n else (a, b)
            else:
                M = self.M if self.discount == "eb" else None
                w = discount_weight(M, n)
                a, b = discounted_update(a, b, m, n, M)
            t[f"alpha_{arm}"], t[f"beta_{arm}"], weights[arm] = a, b, w
        t["history"].append([m_new, n_new, m_old, n_old])
        t["steps"] += 1
        t["episodes"] += n_new + n_old
        t["episodes_new"] += n_new
        t["pending"] = [0, 0, 0, 0]
        return {
            "w_new": weights["new"],
            "w_old": weights["old"],
            "success_new": m_new / n_new if n_new else float("nan"),
            "success_old": m_old / n_old if n_old else float("nan"),
            "n_new": float(n_new),
            "n_old": float(n_old),
        }

    def posterior(self) -> dict[str, Any]:
        """``{"new": {alpha, beta, mean}, "old": {...}, "p_new", "steps", "episodes", "M"}`` of the running test."""
        assert self.test is not None, "posterior() outside a test"
        t = self.test
        out: dict[str, Any] = {}
        for arm in ("new", "old"):
            a, b = t[f"alpha_{arm}"], t[f"beta_{arm}"]
            out[arm] = {"alpha": a, "beta": b, "mean": beta_mean(a, b)}
        out.update(p_new=self.p_new(), steps=t["steps"], episodes=t["episodes"], M=self.M)
        out["within_step_z"] = within_step_z(t["history"])
        out["within_step_p"] = within_step_p(t["history"])
        return out

    def decision(self) -> str:
        """``continue``, ``accept`` or ``reject`` (:func:`accept_decision` on the running test)."""
        assert self.test is not None, "decision() outside a test"
        t = self.test
        return accept_decision(
            t["steps"],
            t["episodes"],
            beta_mean(t["alpha_new"], t["beta_new"]),
            beta_mean(t["alpha_old"], t["beta_old"]),
            self.min_steps,
            self.min_episodes,
            within_step_z(t["history"]),
            self.min_within_step_z,
        )

    def finish(self) -> dict[str, Any]:
        """Close the running test: score its steps for empirical Bayes, re-estimate M, return its summary."""
        assert self.test is not None, "finish() outside a test"
        t = self.test
        summary = {**self.posterior(), "version": t["version"], "started_step": t["started_step"]}
        summary["accepted"] = accepts(  # the rule, whatever the test's length
            summary["new"]["mean"], summary["old"]["mean"], summary["within_step_z"], self.min_within_step_z
        )
        Ms = np.arange(1, self.m_max + 1, dtype=float)  # (G,)
        ll = np.asarray(self.log_likelihood)  # (G,)
        for arm in (0, 2):
            ll = ll + discounted_log_likelihood([(h[arm], h[arm + 1]) for h in t["history"]], Ms)
        self.log_likelihood = ll.tolist()
        self.completed_tests += 1
        self.M = estimate_M(self.log_likelihood, self.completed_tests)
        summary["M"] = self.M
        self.test = None
        return summary

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Every field as JSON-serialisable values."""
        return {
            "discount": self.discount,
            "clamp": self.clamp,
            "min_steps": self.min_steps,
            "min_episodes": self.min_episodes,
            "m_max": self.m_max,
            "min_within_step_z": self.min_within_step_z,
            "test": None if self.test is None else {**self.test, "history": [list(h) for h in self.test["history"]]},
            "completed_tests": self.completed_tests,
            "log_likelihood": list(self.log_likelihood),
            "M": self.M,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> ThompsonTracker:
        """Rebuild a tracker from :meth:`state_dict` output."""
        tracker = cls(
            state["discount"], state["clamp"], state["min_steps"], state["min_episodes"], state["m_max"],
            state.get("min_within_step_z"),  # None in checkpoints from before the option: the paper's rule
        )  # fmt: skip
        tracker.test = None if state["test"] is None else dict(state["test"])
        tracker.completed_tests = int(state["completed_tests"])
        tracker.log_likelihood = [float(x) for x in state["log_likelihood"]]
        tracker.M = state["M"]
        return tracker
