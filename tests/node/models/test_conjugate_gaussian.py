"""Conjugate Gaussian mean ([003] §5.1): the exact posterior against independent forms."""

from __future__ import annotations

import numpy as np

from starling.node.data.shards import shard_rng
from starling.node.models.conjugate_gaussian import ConjugateGaussian


def _shards(model, nodes=10, size=2000, seed=0):
    return [model.synthesize(shard_rng(seed, k), size) for k in range(nodes)]


def test_defaults_are_the_dglmc_toy_setting():
    model = ConjugateGaussian()
    assert model.dim == 2
    np.testing.assert_array_equal(model.sigma0(), [[1.0, 0.5], [0.5, 1.0]])
    np.testing.assert_array_equal(model.sigma1(), [[1.0, -0.5], [-0.5, 1.0]])
    # n = 20,000 over 10 workers: the noise covariance is recovered from the data to within
    # sampling error (entries have sd ≈ √(2/n) ≈ 0.01; 0.05 is five of those).
    Y = np.concatenate([s.X for s in _shards(model)])
    np.testing.assert_allclose(np.cov(Y, rowvar=False), model.sigma1(), atol=0.05)


def test_exact_posterior_matches_gaussian_conditioning():
    """Independent derivation: θ ~ N(0, Σ0) and ȳ | θ ~ N(θ, Σ1/n) are jointly Gaussian, so
    θ | ȳ has mean Σ0 (Σ0 + Σ1/n)⁻¹ ȳ and covariance Σ0 − Σ0 (Σ0 + Σ1/n)⁻¹ Σ0."""
    model = ConjugateGaussian(
        prior_cov=((2.0, 0.3), (0.3, 0.5)), noise_cov=((1.0, 0.2), (0.2, 3.0)), true_theta=(1, -2)
    )
    shards = _shards(model, nodes=3, size=50, seed=4)
    Y = np.concatenate([s.X for s in shards])
    n, S0, S1 = len(Y), model.sigma0(), model.sigma1()
    gain = S0 @ np.linalg.inv(S0 + S1 / n)
    post = model.exact_posterior(shards)
    np.testing.assert_allclose(post.mean, gain @ Y.mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(post.cov, S0 - gain @ S0, rtol=1e-10)


def test_local_potentials_sum_to_the_posterior():
    """Σ_i f_i with shares 1/N is −log π up to a constant: its gradient vanishes at the
    posterior mean and its Hessian is the posterior precision."""
    model = ConjugateGaussian()
    shards = _shards(model, nodes=4, size=100, seed=5)
    potentials = [model.local_potential(s, 0.25) for s in shards]
    post = model.exact_posterior(shards)
    grad = sum(p.grad(post.mean[None]) for p in potentials)
    np.testing.assert_allclose(grad, 0.0, atol=1e-9)
    hess = sum(p.hessian(post.mean[None])[0] for p in potentials)
    np.testing.assert_allclose(hess, np.linalg.inv(post.cov), rtol=1e-10)
    x = np.random.default_rng(6).standard_normal((3, 2))
    total = sum(p.value(x) for p in potentials)
    quad = 0.5 * np.einsum("cd,de,ce->c", x - post.mean, np.linalg.inv(post.cov), x - post.mean)
    np.testing.assert_allclose(total - quad, (total - quad)[0], rtol=1e-10)  # constant offset


def test_higher_dimensions_default_to_identity_noise():
    model = ConjugateGaussian(dim=4)
    model.validate()
    np.testing.assert_array_equal(model.sigma1(), np.eye(4))
    assert np.linalg.eigvalsh(model.sigma0())[0] > 0
