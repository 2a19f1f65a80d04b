"""The statistical helpers in tests/stats.py, checked on cases with known answers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.stats import (
    assert_mean_cov_close,
    ess,
    random_affine_stationary,
    stationary_gaussian,
)


def _ar1(rng, phi, T, chains):
    x = np.zeros((T, chains))
    x[0] = rng.standard_normal(chains) / np.sqrt(1 - phi**2)
    for t in range(1, T):
        x[t] = phi * x[t - 1] + rng.standard_normal(chains)
    return x


def test_ess_of_an_ar1_chain_matches_theory():
    # For AR(1) with coefficient φ the integrated autocorrelation time is (1+φ)/(1−φ).
    rng = np.random.default_rng(0)
    phi, T, chains = 0.9, 20000, 4
    value = float(ess(_ar1(rng, phi, T, chains))[0])
    assert value == pytest.approx(T * chains * (1 - phi) / (1 + phi), rel=0.15)


def test_mean_cov_check_accepts_the_truth_and_rejects_a_shift():
    rng = np.random.default_rng(1)
    cov = np.array([[1.0, 0.3], [0.3, 0.5]])
    draws = rng.multivariate_normal([1.0, -1.0], cov, size=(400, 100))
    assert_mean_cov_close(draws, [1.0, -1.0], cov, z=4.5)
    assert_mean_cov_close(draws, [1.0, -1.0], cov, z=4.5, method="ess")
    with pytest.raises(AssertionError, match="beyond 4.5 MCSE"):
        assert_mean_cov_close(draws, [1.05, -1.0], cov, z=4.5)  # MCSE = 1/√40000: 10 MCSE
    with pytest.raises(AssertionError, match="beyond 4.5 MCSE"):
        assert_mean_cov_close(draws, [1.0, -1.0], cov * 1.06, z=4.5)  # ≈ 8 MCSE on the variances


def test_stationary_gaussian_of_a_scalar_ar1():
    phi, c, g = 0.8, 0.4, 0.5
    mean, cov = stationary_gaussian(np.array([[phi]]), np.array([c]), np.array([[g]]))
    assert mean[0] == pytest.approx(c / (1 - phi))
    assert cov[0, 0] == pytest.approx(g**2 / (1 - phi**2))
    with pytest.raises(ValueError, match="spectral radius"):
        stationary_gaussian(np.array([[1.0]]), np.array([0.0]), np.array([[1.0]]))


def test_random_affine_moments_match_enumeration_of_every_batch():
    rng = np.random.default_rng(2)
    n, batch, dim = 5, 2, 2
    M0 = 0.6 * np.eye(dim)
    Mk = 0.05 * rng.standard_normal((n, dim, dim))
    c0 = np.array([0.1, -0.2])
    ck = 0.3 * rng.standard_normal((n, dim))
    G = np.array([[0.5, 0.0], [0.2, 0.3]])
    mean, cov, rate = random_affine_stationary(M0, Mk, c0, ck, batch, G)
    # Brute force: iterate the exact moment recursion averaging over all C(n, b) batches.
    subsets = list(itertools.combinations(range(n), batch))
    m, S = np.zeros(dim), np.zeros((dim, dim))
    for _ in range(400):
        new_m, new_S = np.zeros(dim), np.zeros((dim, dim))
        for subset in subsets:
            M = M0 + Mk[list(subset)].sum(axis=0)
            c = c0 + ck[list(subset)].sum(axis=0)
            new_m += M @ m + c
            new_S += M @ S @ M.T + np.outer(M @ m, c) + np.outer(c, M @ m) + np.outer(c, c)
        m = new_m / len(subsets)
        S = new_S / len(subsets) + G @ G.T
    np.testing.assert_allclose(mean, m, rtol=1e-10)
    np.testing.assert_allclose(cov, S - np.outer(m, m), rtol=1e-10)
    assert 0 < rate < 1
