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
