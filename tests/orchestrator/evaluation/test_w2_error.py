"""The Gaussian-fit W2's floor and standard error (``evaluation/w2_error.py``) against laws
known exactly: the floor follows its formula, and the bootstrap standard error is the
spread a figure really has over independent replicate sets."""

from __future__ import annotations

import numpy as np
import pytest

from starling.orchestrator.evaluation.metrics import GaussianTarget
from starling.orchestrator.evaluation.w2_error import (
    MIN_SETS,
    affordable_sets,
    bootstrap_se,
    w2_floor,
)


@pytest.mark.parametrize(("d", "sigma"), [(2, 0.26), (5, 1.0)])
@pytest.mark.parametrize("n", [20, 100, 1000])
def test_the_floor_is_the_formulas_expected_squared_w2(d, sigma, n):
    # E W2² ≈ σ² (d/n + d(d+1)/(4(n−1))) for n exact draws of N(μ, σ² I): the mean's error
    # plus the covariance's. Over 400 seeded sets the measured E W2² fell within 2.3 % of
    # it in all six cases; W2² has a relative sd of about 0.6 to 1, so its mean over 400
    # sets has a standard error of 3-5 %: 12 % is at least 2.4 of them.
    target = GaussianTarget(np.ones(d), sigma**2 * np.eye(d))
    floor = w2_floor(target, n, seed=1, draws=400)
    squared = floor["mean"] ** 2 + floor["sd"] ** 2 * (399 / 400)
    formula = sigma**2 * (d / n + d * (d + 1) / (4 * (n - 1)))
    assert squared == pytest.approx(formula, rel=0.12)
    assert floor["points"] == n and floor["draws"] == 400


def test_the_bootstrap_error_is_the_spread_over_independent_replicates():
    # A sampler's law off the target (mean moved by (0.2, −0.1), covariance 1.5 Σ, an
    # anisotropic Σ), C independent chains, window 1: over 200 replicate sets the W2
    # figure's sd and the mean of its bootstrap standard errors agreed to 5 % (C = 20) and
    # 8 % (C = 100). The sd of 200 values has a relative error of 5 %, the bootstrap's own
    # bias at these C is a few %: [0.85, 1.2] holds both with room.
    cov = np.array([[0.066, 0.03], [0.03, 0.07]])
    target = GaussianTarget(np.zeros(2), cov)
    rng = np.random.default_rng(0)
    for chains in (20, 100):
        values, errors = [], []
        for r in range(200):
            window = rng.multivariate_normal([0.2, -0.1], 1.5 * cov, size=(1, chains))
            values.append(float(target.w2(window)[0]))
            errors.append(bootstrap_se(target, window, seed=r))
        ratio = np.std(values, ddof=1) / np.mean(errors)
        assert 0.85 < ratio < 1.2, (chains, ratio)


def test_no_error_for_one_chain_or_a_set_that_left_the_floats():
    target = GaussianTarget(np.zeros(2), np.eye(2))
    assert bootstrap_se(target, np.zeros((5, 1, 2)), seed=0) is None
    broken = np.ones((1, 10, 2))
    broken[0, 3, 0] = np.nan
    assert bootstrap_se(target, broken, seed=0) is None


def test_large_sets_are_scored_fewer_times_never_fewer_than_the_minimum():
    """An error bar must not cost more than the sampling it describes: at d = 1000 each set
    takes about 0.15 s, and 50 resamples for each of six series were a minute."""
    assert affordable_sets(50, 100, 2) == 50  # the quickstart: every resample
    assert affordable_sets(50, 1000, 300) == 50
    assert affordable_sets(50, 1000, 1000) == MIN_SETS
    assert affordable_sets(5, 1000, 1000) == 5  # never more than asked
    middle = affordable_sets(50, 2000, 300)
    assert MIN_SETS < middle < 50


def _anisotropic_target(rng, d):
    """A full, anisotropic covariance (eigenvalues from 0.1 to about 4) and a mean far from
    the origin, so that centring must not cancel large numbers."""
    a = rng.standard_normal((d, d))
    return GaussianTarget(50.0 + rng.standard_normal(d), a @ a.T / d + 0.1 * np.eye(d))


@pytest.mark.parametrize(("d", "chains", "rounds"), [(60, 20, 1), (60, 12, 3), (400, 100, 1)])
def test_resamples_score_from_one_gram_what_their_points_score(d, chains, rounds):
    """With fewer points than dimensions, the bootstrap scores each resample from the
    window's one Gram matrix (``_resampled_w2``). Against scoring the resampled points:
    resamples that hold every chain once agree to rounding (1e-12). Resamples with
    repeated chains agree to 1e-7: scored from their points, a repeated point leaves a
    zero eigenvalue that comes out as ~1e-16 of the scale, and its square root (~1e-8 of
    it) is summed, once per repeat; the weighted Gram has no such eigenvalue."""
    from starling.orchestrator.evaluation.w2_error import _resampled_w2

    rng = np.random.default_rng(d + chains + rounds)
    target = _anisotropic_target(rng, d)
    by_chain = target.mean + 1.3 * rng.standard_normal((chains, rounds, d)) @ target.root.T
    assert target.projects(chains * rounds)
    permutations = np.array([rng.permutation(chains) for _ in range(4)])
    repeats = rng.integers(0, chains, size=(6, chains))
    for picks, tolerance in ((permutations, 1e-12), (repeats, 1e-7)):
        from_points = [float(target.w2(by_chain[p].reshape(1, -1, d))[0]) for p in picks]
        np.testing.assert_allclose(
            _resampled_w2(target, by_chain, picks), from_points, rtol=tolerance
        )


def test_w2_is_the_same_in_the_principal_axes():
    """The floor draws in the target's principal axes: one isometry applied to a set and to
    the target leaves the set's W2 as it was (to rounding)."""
    rng = np.random.default_rng(5)
    target = _anisotropic_target(rng, 30)
    aligned = target.in_principal_axes()
    _, vectors = np.linalg.eigh(target.cov)
    np.testing.assert_allclose(aligned.cov, vectors.T @ target.cov @ vectors, atol=1e-10, rtol=0)
    for count in (10, 200):  # fewer points than dimensions, and more
        points = target.mean + rng.standard_normal((3, count, 30)) * 0.7
        moved = (points - target.mean) @ vectors
        np.testing.assert_allclose(aligned.w2(moved), target.w2(points), rtol=1e-9)


@pytest.mark.parametrize("points", [20, 200])
def test_the_floor_from_the_principal_axes_is_the_floor_of_draws_through_the_factor(points):
    """The floor's sets are drawn in the principal axes. The same number of sets drawn the
    direct way (``mean + z Lᵀ``) and scored against the target itself must give the same
    mean W2: the sd is 2.5-3.5 % of the mean here, so each mean over 300 sets has a
    standard error of about 0.2 % and their difference one of about 0.25 %: 2 % is eight
    of them (over 3,000 sets each the two means were 0.2 and 0.6 of their error apart).
    The sds, each within about 4 % of its own (1/√(2 × 299)), are held to 25 %."""
    rng = np.random.default_rng(points)
    target = _anisotropic_target(rng, 40)
    floor = w2_floor(target, points, seed=3, draws=300)
    direct = target.w2(target.mean + rng.standard_normal((300, points, 40)) @ target.root.T)
    assert floor["mean"] == pytest.approx(float(direct.mean()), rel=0.02)
    assert floor["sd"] == pytest.approx(float(direct.std(ddof=1)), rel=0.25)
