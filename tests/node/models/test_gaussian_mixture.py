"""Gaussian mixture with tied means (Welling & Teh 2011; [004] §5.1): the grid reference."""

from __future__ import annotations

import numpy as np
from scipy import integrate

from starling.node.data.shards import shard_rng
from starling.node.models.gaussian_mixture import GaussianMixture


def _shards(model, nodes=5, size=20, seed=0):
    return [model.synthesize(shard_rng(seed, k), size) for k in range(nodes)]


def test_synthetic_observations_follow_the_mixture():
    model = GaussianMixture()
    x = np.concatenate([s.X[:, 0] for s in _shards(model, nodes=4, size=20000)])
    # Mixture of N(0, 2) and N(1, 2): mean ½, variance 2 + ¼. Standard errors with n = 80000:
    # mean √(2.25/n) ≈ 0.005, variance ≈ 2.25·√(2/n) ≈ 0.011; tolerances are ~5 of those.
    assert abs(x.mean() - 0.5) < 0.03
    assert abs(x.var() - 2.25) < 0.06


def test_reference_posterior_is_normalised_and_matches_quadrature():
    model = GaussianMixture()
    shards = _shards(model)  # 100 points on 5 nodes, as in [004] §5.1
    grid = model.reference_posterior(shards, points=201)
    assert np.isclose(grid.masses.sum(), 1.0)
    # Independent normalising constant: adaptive quadrature of the unnormalised posterior
    # over the same window. The midpoint grid's error is O(h²) ≈ 1e-4 relative here.
    observations = np.concatenate([s.X[:, 0] for s in shards])
    (lo1, hi1), (lo2, hi2) = [
        (a[0] - (a[1] - a[0]) / 2, a[-1] + (a[1] - a[0]) / 2) for a in grid.axes
    ]
    peak = np.max(
        model.log_posterior(np.stack(np.meshgrid(*grid.axes), -1).reshape(-1, 2), observations)
    )

    def unnormalised(t2, t1):
        return np.exp(model.log_posterior(np.array([[t1, t2]]), observations)[0] - peak)

    total, _ = integrate.dblquad(unnormalised, lo1, hi1, lo2, hi2, epsabs=1e-10, epsrel=1e-8)
    point = np.array([[grid.axes[0][100], grid.axes[1][120]]])
    exact_density = np.exp(model.log_posterior(point, observations)[0] - peak) / total
    assert np.isclose(grid.density[100, 120], exact_density, rtol=1e-3)
    # The window holds essentially all the mass: the border cells carry almost none.
    border = np.concatenate(
        [grid.masses[0], grid.masses[-1], grid.masses[:, 0], grid.masses[:, -1]]
    )
    assert border.sum() < 1e-9


def test_posterior_is_bimodal_for_informative_data():
    """With 800 points ([002] §5.3) the two labellings give modes near (0, 1) and (1, −1)."""
    model = GaussianMixture()
    grid = model.reference_posterior(_shards(model, nodes=4, size=200, seed=3), points=241)
    t1, t2 = np.meshgrid(*grid.axes, indexing="ij")
    upper = grid.masses[t2 > 0].sum()
    assert 0.2 < upper < 0.8  # mass on both sides of θ2 = 0
    for region, target in ((t2 > 0, (0.0, 1.0)), (t2 < 0, (1.0, -1.0))):
        k = np.argmax(np.where(region, grid.density, -1))
        mode = np.array([t1.flat[k], t2.flat[k]])
        assert np.linalg.norm(mode - target) < 0.35, mode


def test_grid_sampling_reproduces_the_grid_moments():
    model = GaussianMixture()
    grid = model.reference_posterior(_shards(model), points=121)
    draws = grid.sample(np.random.default_rng(4), 40000)
    mean, cov = grid.mean(), grid.cov()
    # i.i.d. draws: standard error of the mean is √(diag cov / n); 5 of those. The jitter
    # inside cells adds width²/12 per coordinate to the variance, a ~1e-4 effect.
    se = np.sqrt(np.diag(cov) / len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 5 * se)
    np.testing.assert_allclose(np.cov(draws, rowvar=False), cov, atol=0.02)
    points, weights = grid.support(threshold=1e-12)
    assert np.isclose(weights.sum(), 1.0) and points.shape[1] == 2
