"""The Thompson-sampling math (each pure function against a closed form, a naive loop or Monte Carlo) and the tracker.

``python -m tests.sage_agents.reskill.test_thompson`` prints the accept / reject rates tables of docs/reskill.md.
"""

import itertools
import json
import math

import numpy as np
import pytest
from scipy.stats import betabinom

from sage_agents.reskill.thompson import (
    ThompsonTracker,
    accept_decision,
    assignment_probability,
    discount_weight,
    discounted_log_likelihood,
    discounted_update,
    estimate_M,
    prob_new_better,
    prob_new_better_exact,
    within_step_p,
    within_step_z,
)


# ---------------------------------------------------------------------------------------------- P(new)
@pytest.mark.parametrize(
    "a_new, b_new, a_old, b_old",
    [
        (1, 1, 1, 1),
        (3, 5, 2, 7),
        (10, 2, 8, 4),
        (1, 40, 1, 3),
        (200, 5, 190, 3),
        (50, 950, 40, 960),
        (1500, 500, 1520, 480),
        (2, 1e4, 1, 1e4),
        (7, 2.5, 3.3, 0.4),  # the closed form only needs an integer a_new
    ],
)
def test_prob_new_better_matches_the_closed_form(a_new, b_new, a_old, b_old):
    assert prob_new_better(a_new, b_new, a_old, b_old) == pytest.approx(
        prob_new_better_exact(a_new, b_new, a_old, b_old), abs=1e-7
    )


def test_closed_form_against_a_naive_double_loop():
    # P(X > Y) for Beta(2, 3) vs Beta(3, 2) by a midpoint double sum over a 2000 x 2000 grid
    x = (np.arange(2000) + 0.5) / 2000
    fx = x * (1 - x) ** 2 / (1 / 12)  # Beta(2, 3) density
    fy = x**2 * (1 - x) / (1 / 12)  # Beta(3, 2) density
    naive = sum(fx[i] * fy[:i].sum() + 0.5 * fx[i] * fy[i] for i in range(2000)) / 2000**2
    assert prob_new_better_exact(2, 3, 3, 2) == pytest.approx(naive, abs=1e-5)
    assert prob_new_better_exact(2, 3, 3, 2) == pytest.approx(17 / 70, abs=1e-12)  # exact rational value


@pytest.mark.parametrize(
    "params",
    [(0.3, 2.5, 0.7, 0.4), (12.7, 3.1, 9.9, 4.4), (0.05, 0.05, 2.5, 2.5), (4.2, 40.6, 1.7, 9.1), (0.5, 0.5, 0.5, 0.5)],
)
def test_prob_new_better_matches_monte_carlo_for_discounted_parameters(params):
    rng = np.random.default_rng(0)
    n = 400_000
    estimate = float(np.mean(rng.beta(params[0], params[1], n) > rng.beta(params[2], params[3], n)))
    assert prob_new_better(*params) == pytest.approx(estimate, abs=4 * math.sqrt(0.25 / n) + 1e-3)


def test_prob_new_better_is_symmetric_and_handles_tiny_parameters():
    assert prob_new_better(1e-6, 30, 1e-6, 30) == pytest.approx(0.5, abs=1e-6)
    assert prob_new_better(3.5, 1.5, 2.5, 2.5) + prob_new_better(2.5, 2.5, 3.5, 1.5) == pytest.approx(1.0, abs=1e-9)
    assert prob_new_better(0.001, 5, 0.5, 3) < 0.01  # new sits at 0


def test_assignment_probability_is_clamped():
    assert assignment_probability(1, 1, 1, 1) == pytest.approx(0.5)
    assert assignment_probability(100, 1, 1, 100) == 0.85
    assert assignment_probability(1, 100, 100, 1) == 0.15
    assert assignment_probability(100, 1, 1, 100, clamp=0.05) == 0.95


# ---------------------------------------------------------------------------------------------- DISCOUNT
def test_discounted_update_matches_a_loop_and_the_fixed_point():
    alpha, beta = 1.0, 1.0
    loop_alpha, loop_beta = 1.0, 1.0
    for m, n in [(3, 8), (0, 5), (8, 8), (2, 0), (4, 7)]:
        alpha, beta = discounted_update(alpha, beta, m, n, 10)
        w = 10 / (10 + n) if n else 1.0
        loop_alpha, loop_beta = w * loop_alpha + m, w * loop_beta + (n - m)
        assert (alpha, beta) == pytest.approx((loop_alpha, loop_beta))
    assert discounted_update(4.0, 6.0, 3, 8, None) == (7.0, 11.0)  # no discount
    assert discount_weight(10, 0) == 1.0 and discount_weight(30, 10) == 0.75
    total = 2.0
    for _ in range(200):  # the pseudo-count converges to M + n
        a, b = discounted_update(total / 2, total / 2, 4, 8, 25)
        total = a + b
    assert total == pytest.approx(33.0)


def test_scipy_betabinom_matches_the_lgamma_formula_on_vectors_of_a_and_b():
    def naive(k, n, a, b):
        lb = lambda x, y: math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)  # noqa: E731
        return math.log(math.comb(n, k)) + lb(k + a, n - k + b) - lb(a, b)

    a, b = np.array([0.3, 1.0, 7.5, 120.0]), np.array([2.0, 0.05, 7.5, 3.0])
    for k, n in [(0, 0), (0, 5), (3, 8), (8, 8)]:
        got = betabinom.logpmf(k, n, a, b)
        assert got == pytest.approx([naive(k, n, x, y) for x, y in zip(a, b, strict=True)], abs=1e-9)


def test_discounted_log_likelihood_matches_a_per_M_loop():
    steps = [(3, 8), (0, 0), (5, 6), (1, 9)]
    Ms = np.array([1.0, 7.0, 300.0])
    got = discounted_log_likelihood(steps, Ms)
    for M, value in zip(Ms, got, strict=True):
        a = b = 1.0
        ll = 0.0
        for m, n in steps:
            if not n:
                continue
            w = M / (M + n)
            a, b = w * a, w * b
            ll += math.log(math.comb(n, m)) + sum(math.log(a + j) for j in range(m))
            ll += sum(math.log(b + j) for j in range(n - m)) - sum(math.log(a + b + j) for j in range(n))
            a, b = a + m, b + n - m
        assert value == pytest.approx(ll)


def _generate_test(rng, M, steps, n=8):
    """Per-step counts drawn from the discounted model itself with concentration M (the predictive Beta of
    every step has alpha + beta -> M): the data the empirical-Bayes estimate should recover M from."""
    a = b = 1.0
    out = []
    for _ in range(steps):
        w = M / (M + n)
        a, b = w * a, w * b
        m = int(rng.binomial(n, rng.beta(a, b)))
        out.append((m, n))
        a, b = a + m, b + n - m
    return out


@pytest.mark.parametrize("true_M", [5, 20, 80])
def test_empirical_bayes_M_recovers_a_known_concentration(true_M):
    rng = np.random.default_rng(true_M)
    Ms = np.arange(1, 2001, dtype=float)
    ll = np.zeros_like(Ms)
    for _ in range(100):
        for _ in range(2):  # two arms per test
            ll += discounted_log_likelihood(_generate_test(rng, true_M, 20), Ms)
    estimate = estimate_M(ll, completed_tests=100)
    assert true_M / 1.6 <= estimate <= true_M * 1.6, estimate


def test_empirical_bayes_M_stationary_vs_drifting_and_needs_two_tests():
    rng = np.random.default_rng(0)
    Ms = np.arange(1, 2001, dtype=float)
    stationary, drifting = np.zeros_like(Ms), np.zeros_like(Ms)
    for _ in range(60):
        p = rng.uniform(0.2, 0.8)
        stationary += discounted_log_likelihood([(rng.binomial(8, p), 8) for _ in range(10)], Ms)
        rates = np.clip(np.cumsum(rng.normal(0, 0.25, 10)) + 0.5, 0.02, 0.98)  # a fast random walk
        drifting += discounted_log_likelihood([(rng.binomial(8, r), 8) for r in rates], Ms)
    assert estimate_M(stationary, 60) >= 500  # nothing changes: keep (almost) all the memory
    assert estimate_M(drifting, 60) <= 30  # rates move a lot between steps: forget fast
    assert estimate_M(stationary, 1) is None  # no discount before 2 completed tests


def test_accept_decision():
    assert accept_decision(4, 80, 0.9, 0.1) == "continue"  # too few steps
    assert accept_decision(5, 49, 0.9, 0.1) == "continue"  # too few episodes
    assert accept_decision(5, 50, 0.6, 0.5) == "accept"
    assert accept_decision(5, 50, 0.5, 0.5) == "reject"  # ties revert
    assert accept_decision(9, 90, 0.4, 0.5) == "reject"
    assert accept_decision(1, 1, 0.9, 0.1, min_steps=1, min_episodes=1) == "accept"


def test_within_step_z_is_the_cochran_mantel_haenszel_statistic():
    from scipy.stats import hypergeom

    rng = np.random.default_rng(3)
    for _ in range(20):
        history = [list(row) for row in zip(*(rng.integers(0, 9, size=5) for _ in range(4)), strict=True)]
        history = [[min(m, n), n, min(k, o), o] for m, n, k, o in history]  # successes <= episodes
        tables = [(m_new, n_new, m_new + m_old, n_new + n_old) for m_new, n_new, m_old, n_old in history]
        tables = [table for table in tables if table[3] > 1]  # one rollout (or none) tells nothing
        null = [hypergeom(total, wins, n_new) for _, n_new, wins, total in tables]  # the new arm's successes
        with np.errstate(divide="ignore", invalid="ignore"):  # scipy's moments divide by zero in its kurtosis
            gain = sum(m for m, *_ in tables) - sum(h.mean() for h in null)
            variance = sum(h.var() for h in null)
        assert within_step_z(history) == pytest.approx(gain / math.sqrt(variance) if variance else 0.0)


def test_within_step_z_sees_through_simpsons_paradox():
    # an easy step where Thompson sampling gave the new arm most rollouts, then a hard one where it gave the old
    # arm most: pooled, new 9/16 vs old 3/16; within each step both arms did equally well
    history = [[9, 12, 3, 4], [0, 4, 0, 12]]
    assert within_step_z(history) == 0.0
    assert accept_decision(2, 32, (1 + 9) / (2 + 16), (1 + 3) / (2 + 16), 2, 32) == "accept"  # the paper's rule
    assert accept_decision(2, 32, (1 + 9) / (2 + 16), (1 + 3) / (2 + 16), 2, 32, z=0.0, min_z=0.0) == "reject"
    assert within_step_z([[6, 8, 2, 8]]) > 1.5 and within_step_z([[2, 8, 6, 8]]) < -1.5
    assert within_step_z([[3, 8, 0, 0], [0, 0, 5, 8], [4, 4, 4, 4]]) == 0.0  # no step can tell


def test_within_step_p_is_the_exact_conditional_test():
    from scipy.stats import fisher_exact, norm

    # one step: Fisher's exact test, one-sided (new arm's success odds greater)
    for table in ([6, 8, 2, 8], [1, 5, 0, 3], [2, 8, 6, 8], [0, 4, 0, 12]):
        m_new, n_new, m_old, n_old = table
        fisher = fisher_exact([[m_new, n_new - m_new], [m_old, n_old - m_old]], alternative="greater").pvalue
        assert within_step_p([table]) == pytest.approx(fisher)

    # several steps: against enumerating every combination of per-step counts with the hypergeometric formula
    def brute_force(history):
        steps = []
        for m_new, n_new, m_old, n_old in history:
            total, wins = n_new + n_old, m_new + m_old
            pmf = {k: math.comb(wins, k) * math.comb(total - wins, n_new - k) / math.comb(total, n_new)
                   for k in range(max(0, wins - n_old), min(wins, n_new) + 1)}  # fmt: skip
            steps.append(pmf)
        observed = sum(h[0] for h in history)
        return sum(
            math.prod(pmf[k] for pmf, k in zip(steps, ks, strict=True))
            for ks in itertools.product(*(sorted(pmf) for pmf in steps))
            if sum(ks) >= observed
        )

    rng = np.random.default_rng(5)
    for _ in range(20):
        n_new, n_old = rng.integers(0, 7, size=3), rng.integers(0, 7, size=3)
        history = [
            [int(rng.integers(0, a + 1)), int(a), int(rng.integers(0, b + 1)), int(b)]
            for a, b in zip(n_new, n_old, strict=True)
        ]
        assert within_step_p(history) == pytest.approx(brute_force(history))
    assert within_step_p([[3, 8, 0, 0], [0, 0, 5, 8], [4, 4, 4, 4]]) == 1.0  # no step can tell
    assert within_step_p([[0, 0, 0, 0], [3, 4, 0, 4]]) == pytest.approx(1 / 14)  # a step without episodes

    # many successes: close to the normal approximation that within_step_z makes (a continuity correction apart)
    history = [[30, 60, 20, 60]] * 4
    assert within_step_p(history) == pytest.approx(norm.sf(within_step_z(history)), abs=0.01)


# ---------------------------------------------------------------------------------------------- TRACKER
def test_tracker_assigns_with_p_new_and_counts_per_arm():
    tracker = ThompsonTracker(min_steps=2, min_episodes=4)
    rng = np.random.default_rng(0)
    assert tracker.assign(5, rng) == [False] * 5 and tracker.p_new() == 0.0  # nothing under test
    tracker.start(version=3, step=10)
    draws = tracker.assign(20_000, rng)
    assert np.mean(draws) == pytest.approx(0.5, abs=0.02)  # Beta(1,1) vs Beta(1,1)
    for new, success in [(True, True)] * 6 + [(False, False)] * 6:
        tracker.record(new, success)
    stats = tracker.end_step()
    assert (stats["n_new"], stats["n_old"], stats["success_new"], stats["success_old"]) == (6, 6, 1.0, 0.0)
    assert tracker.posterior()["new"]["alpha"] == 7.0 and tracker.posterior()["old"]["beta"] == 7.0
    assert tracker.p_new() == 0.85  # clamped
    assert np.mean(tracker.assign(20_000, rng)) == pytest.approx(0.85, abs=0.01)
    assert tracker.decision() == "continue"  # one step of two
    tracker.end_step()
    assert tracker.decision() == "accept"
    summary = tracker.finish()
    assert summary["accepted"] and summary["version"] == 3 and not tracker.testing


def test_tracker_discount_modes():
    def run(discount, M=None):
        tracker = ThompsonTracker(discount=discount)
        tracker.M = M
        tracker.start(1, 0)
        for m, n in [(4, 8), (1, 8)]:
            for i in range(n):
                tracker.record(True, i < m)
            tracker.end_step()
        return tracker.posterior()["new"]

    assert (run("none")["alpha"], run("none")["beta"]) == (6.0, 12.0)
    assert (run("last_step")["alpha"], run("last_step")["beta"]) == (2.0, 8.0)
    eb = run("eb", M=8)  # w = 8 / 16 = 0.5 each step
    assert (eb["alpha"], eb["beta"]) == pytest.approx((0.5 * (0.5 + 4) + 1, 0.5 * (0.5 + 4) + 7))
    assert (run("eb")["alpha"], run("eb")["beta"]) == (6.0, 12.0)  # M unknown yet: no discount


def test_tracker_estimates_M_after_two_completed_tests():
    tracker = ThompsonTracker(min_steps=1, min_episodes=1)
    for version in range(3):
        tracker.start(version, version)
        for _ in range(3):
            for i in range(8):
                tracker.record(i % 2 == 0, i < 5)
            tracker.end_step()
        tracker.finish()
        assert (tracker.M is None) == (version == 0)


def test_tracker_state_round_trips_through_json_exactly():
    rng = np.random.default_rng(1)
    tracker = ThompsonTracker(min_steps=3, min_episodes=10)
    for version in range(3):  # two finished tests (M estimated) and one running
        tracker.start(version, version * 10)
        for _ in range(2 if version == 2 else 3):
            for new in tracker.assign(8, rng):
                tracker.record(new, rng.random() < (0.7 if new else 0.4))
            tracker.end_step()
        if version < 2:
            tracker.finish()
    restored = ThompsonTracker.from_state(json.loads(json.dumps(tracker.state_dict())))
    assert restored.state_dict() == tracker.state_dict()
    before_the_option = {k: v for k, v in tracker.state_dict().items() if k != "min_within_step_z"}
    assert ThompsonTracker.from_state(before_the_option).min_within_step_z is None  # the paper's rule
    strict = ThompsonTracker(min_within_step_z=0.84)
    assert ThompsonTracker.from_state(json.loads(json.dumps(strict.state_dict()))).min_within_step_z == 0.84
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    for _ in range(3):  # both continue identically
        a, b = tracker.assign(8, rng_a), restored.assign(8, rng_b)
        assert a == b
        for t in (tracker, restored):
            for new in a:
                t.record(new, new)
            t.end_step()
    assert restored.state_dict() == tracker.state_dict()
    assert tracker.decision() == restored.decision() == "accept"


def test_tracker_rejects_bad_arguments_and_double_start():
    with pytest.raises(ValueError, match="discount"):
        ThompsonTracker(discount="window")
    with pytest.raises(ValueError, match="clamp"):
        ThompsonTracker(clamp=0.5)
    tracker = ThompsonTracker()
    tracker.start(1, 0)
    with pytest.raises(RuntimeError, match="still under test"):
        tracker.start(2, 0)


# ---------------------------------------------------------------------------------------------- SIMULATION
def simulate(p_new, p_old, tests=200, slots=8, per_slot=2, discount="eb", seed=0, spread=0.0, min_z=None,
             min_steps=5, min_episodes=50):  # fmt: skip
    """Run ``tests`` version tests on a synthetic bandit: each step assigns ``slots`` rollout slots by Thompson
    sampling, each slot plays ``per_slot`` episodes (a group of 8 chains of 2 tasks) with success probability
    p_new or p_old, both shifted by ``+spread`` or ``-spread`` at each step (the step's chain is easy or hard,
    equally likely), until the test is ``min_steps`` steps and ``min_episodes`` episodes long. Returns (accept
    rate, mean test length in steps, mean share of slots given the new arm)."""
    rng = np.random.default_rng(seed)
    tracker = ThompsonTracker(
        discount=discount, min_within_step_z=min_z, min_steps=min_steps, min_episodes=min_episodes
    )
    accepted, lengths, shares = 0, [], []
    for version in range(tests):
        tracker.start(version, 0)
        while tracker.decision() == "continue":
            arms = tracker.assign(slots, rng)
            shares.append(np.mean(arms))
            shift = (spread if rng.random() < 0.5 else -spread) if spread else 0.0  # no draw: the same streams
            for new in arms:
                for _ in range(per_slot):
                    tracker.record(new, rng.random() < (p_new if new else p_old) + shift)
            tracker.end_step()
        accepted += tracker.decision() == "accept"
        lengths.append(tracker.finish()["steps"])
    return accepted / tests, float(np.mean(lengths)), float(np.mean(shares))


@pytest.mark.parametrize(
    "p_new, p_old, rate_of_correct_decisions",
    [(0.7, 0.3, 0.99), (0.6, 0.4, 0.9), (0.4, 0.6, 0.9), (0.3, 0.7, 0.99)],
)
def test_simulated_bandit_accepts_better_and_rejects_worse_versions(p_new, p_old, rate_of_correct_decisions):
    accept_rate, length, share = simulate(p_new, p_old)
    correct = accept_rate if p_new > p_old else 1 - accept_rate
    print(f"p_new={p_new} p_old={p_old}: accept rate {accept_rate:.3f} over 200 tests, {length:.1f} steps, "
          f"new share {share:.2f}")  # fmt: skip
    assert correct >= rate_of_correct_decisions
    assert (share > 0.5) == (p_new > p_old)  # Thompson sampling favours the better arm within the test


def test_steps_of_varying_difficulty_fool_the_posterior_rule_and_not_the_within_step_one():
    # each step's chain is easy or hard (success rates +-0.3): pooled counts credit the arm that Thompson sampling
    # favoured on the easy steps, so the paper's rule accepts a useless version about half the time and a worse
    # one often; requiring a within-step gain cuts both, and a clearly better version still passes
    paper, significant = (simulate(0.45, 0.45, tests=100, spread=0.3, min_z=z)[0] for z in (None, 0.84))
    assert paper >= 0.4 and significant <= 0.25
    paper, gain = (simulate(0.4, 0.6, tests=100, spread=0.3, min_z=z)[0] for z in (None, 0.0))
    assert paper >= 0.1 and gain <= 0.05
    assert simulate(0.7, 0.3, tests=50, spread=0.2, min_z=0.84)[0] >= 0.95


def test_simulated_bandit_with_equal_arms_is_a_coin_flip():
    accept_rate, _, share = simulate(0.5, 0.5)
    assert 0.35 <= accept_rate <= 0.65 and share == pytest.approx(0.5, abs=0.03)


if __name__ == "__main__":
    print("| discount | p_new | p_old | accept rate (200 tests) | steps per test | share of new slots |")
    print("|---|---|---|---|---|---|")
    for discount, (p_new, p_old) in itertools.product(
        ("eb", "none", "last_step"), [(0.7, 0.3), (0.6, 0.4), (0.55, 0.45), (0.5, 0.5), (0.45, 0.55), (0.4, 0.6)]
    ):
        rate, length, share = simulate(p_new, p_old, discount=discount)
        print(f"| {discount} | {p_new} | {p_old} | {rate:.3f} | {length:.1f} | {share:.2f} |")
    print("\nSteps of varying difficulty (spread 0.3), eb discount: accept rate (200 tests) by rule")
    print("| p_new | p_old | paper (posterior mean) | within-step z > 0 | within-step z > 0.84 |")
    print("|---|---|---|---|---|")
    for p_new, p_old in [(0.7, 0.3), (0.6, 0.4), (0.55, 0.45), (0.5, 0.5), (0.45, 0.55), (0.4, 0.6)]:
        rates = [simulate(p_new, p_old, spread=0.3, min_z=z)[0] for z in (None, 0.0, 0.84)]
        print(f"| {p_new} | {p_old} | " + " | ".join(f"{r:.3f}" for r in rates) + " |")
    print("\nThe demo-long regime (success rates near 0.2, spread 0.15, within-step z > 0.84): accept rate (200 tests)")
    print("by test length (demo: 4 steps of 16 episodes; 256 episodes: 16 steps)")
    print("| p_new | p_old | 64 episodes | 256 episodes |")
    print("|---|---|---|---|")
    for p_new, p_old in [(0.3, 0.2), (0.25, 0.2), (0.2, 0.2), (0.15, 0.2), (0.1, 0.2)]:
        rates = [simulate(p_new, p_old, spread=0.15, min_z=0.84, min_steps=4, min_episodes=n)[0] for n in (64, 256)]
        print(f"| {p_new} | {p_old} | " + " | ".join(f"{r:.3f}" for r in rates) + " |")
