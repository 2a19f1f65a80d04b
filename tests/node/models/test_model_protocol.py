"""Every registered model meets the protocol samplers and evaluation rely on.

Checks run on every model: finite-difference gradients, Hessians where provided, unbiased
mini-batch gradients, the default (numerical) prox's optimality, the curvature bound, and
the declared shapes. Model-specific facts live in the per-model test files.
"""

from __future__ import annotations

import numpy as np
import pytest

from starling.node.models import MODELS, build_model
from starling.node.models.base import LocalPotential
from starling.node.models.prox import subproblem_residual
from starling.node.params import ConfigError
from starling.node.spec import ModelSpec

# Small instances so that finite differences over every coordinate stay fast.
SMALL = {
    "linear_regression": {"dim": 3},
    "logistic_regression": {"features": 3, "intercept": True},
    "gaussian_mixture": {},
    "conjugate_gaussian": {},
    "mlp": {"features": 3, "hidden": 4, "classes": 3},
}


def _potential(name: str, size: int = 40, share: float = 0.25, batch: int = 0, seed: int = 0):
    model = MODELS[name](**SMALL[name])
    data = model.synthesize(np.random.default_rng(seed), size)
    return model, data, model.local_potential(data, share, batch)


def _fd_grad(potential, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    out = np.zeros_like(x)
    for j in range(x.shape[1]):
        e = np.zeros(x.shape[1])
        e[j] = eps
        out[:, j] = (potential.value(x + e) - potential.value(x - e)) / (2 * eps)
    return out


def test_registry_names_the_five_models():
    assert set(MODELS) == set(SMALL)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_defaults_build_and_have_the_declared_shapes(name):
    model = build_model(ModelSpec(name=name))
    assert isinstance(model.dim, int) and model.dim >= 1
    data = model.synthesize(np.random.default_rng(1), 7)
    assert data.X.shape == (7, model.num_features) and data.y.shape == (7,)
    potential = model.local_potential(data, 0.5, 0)
    assert isinstance(potential, LocalPotential)
    assert potential.dim == model.dim and potential.num_points == 7
    x = np.random.default_rng(2).standard_normal((4, model.dim)) * 0.1
    assert potential.value(x).shape == (4,)
    assert potential.grad(x).shape == (4, model.dim)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_gradient_matches_finite_differences(name):
    _, _, potential = _potential(name)
    x = np.random.default_rng(3).standard_normal((3, potential.dim)) * 0.7
    # Central differences with h = 1e-6 are accurate to ~1e-9 relative here (truncation
    # h²·f''' plus rounding eps·|f|/h); 1e-6 leaves a wide margin and still catches any
    # wrong term, which would be O(1).
    np.testing.assert_allclose(potential.grad(x), _fd_grad(potential, x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", [n for n in sorted(SMALL) if n != "mlp"])
def test_hessian_matches_finite_differences_of_the_gradient(name):
    _, _, potential = _potential(name)
    assert potential.has_hessian
    x = np.random.default_rng(4).standard_normal((2, potential.dim)) * 0.5
    eps = 1e-6
    columns = [
        (potential.grad(x + eps * e) - potential.grad(x - eps * e)) / (2 * eps)
        for e in np.eye(potential.dim)
    ]
    np.testing.assert_allclose(potential.hessian(x), np.stack(columns, axis=-1), atol=1e-5)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_minibatch_gradient_is_unbiased(name):
    _, _, full = _potential(name, size=30, batch=0)
    _, _, batched = _potential(name, size=30, batch=7)
    x = np.random.default_rng(5).standard_normal((1, full.dim)) * 0.5
    rng = np.random.default_rng(6)
    # 4000 chains at the same point = 4000 independent batch draws in one call.
    draws = batched.grad(np.repeat(x, 4000, axis=0), rng)
    mean, se = draws.mean(axis=0), draws.std(axis=0, ddof=1) / np.sqrt(len(draws))
    assert not np.allclose(draws[0], draws[1])  # really stochastic
    # Fixed seed; |mean − truth| < 5 standard errors per coordinate (a false alarm has
    # probability < 1e-5 per coordinate).
    assert np.all(np.abs(mean - full.grad(x)[0]) < 5 * se + 1e-12)
    # Without an rng the configured batch is ignored: the full gradient.
    np.testing.assert_allclose(batched.grad(x), full.grad(x))


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("step", [0.05, 1e12])
def test_default_prox_solves_the_subproblem(name, step):
    _, _, potential = _potential(name, share=0.25)
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal((5, potential.dim)) * 0.3
    # step 1e12 with v = −p·step is D-ADMMS's no-edge call: argmin f + pᵀx.
    v = x0 + rng.standard_normal(x0.shape) if step < 1 else -0.01 * step * x0
    x = LocalPotential.prox(potential, v, step, warm_start=x0)
    info = potential.last_prox
    assert info is not None and info.converged, info
    assert np.all(subproblem_residual(potential, x, v, step) <= potential.prox_tol)
    # Optimality is a property of x: the stationarity condition, evaluated independently.
    if potential.l1_weight == 0:
        g = potential.grad(x) + (x - v) / step
        assert np.all(
            np.linalg.norm(g, axis=1) <= 1e-8 * (1 + np.linalg.norm(x - v, axis=1) / step)
        )


@pytest.mark.parametrize("name", ["linear_regression", "conjugate_gaussian"])
def test_closed_form_prox_agrees_with_the_numerical_one(name):
    _, _, potential = _potential(name)
    rng = np.random.default_rng(8)
    v = rng.standard_normal((3, potential.dim))
    closed = potential.prox(v, 0.3, warm_start=np.zeros_like(v))
    numerical = LocalPotential.prox(potential, v, 0.3, warm_start=np.zeros_like(v))
    np.testing.assert_allclose(closed, numerical, atol=1e-9)


@pytest.mark.parametrize("name", [n for n in sorted(SMALL) if n != "mlp"])
def test_lipschitz_bounds_the_hessian(name):
    _, _, potential = _potential(name)
    bound = potential.lipschitz()
    x = np.random.default_rng(9).standard_normal((50, potential.dim)) * 2
    top = np.linalg.eigvalsh(potential.hessian(x))[:, -1]
    assert np.all(top <= bound * (1 + 1e-12))


@pytest.mark.parametrize(
    "name, params, field",
    [
        ("logistic_regression", {"prior": "cauchy"}, "prior"),
        ("logistic_regression", {"features": 0}, "features"),
        ("logistic_regression", {"true_x": [1.0, 2.0]}, "true_x"),
        ("gaussian_mixture", {"obs_var": -1.0}, "obs_var"),
        ("conjugate_gaussian", {"prior_cov": [[1.0, 2.0], [2.0, 1.0]]}, "prior_cov"),
        ("mlp", {"activation": "relu"}, "activation"),
        ("mlp", {"classes": 1}, "classes"),
        ("linear_regression", {"noise_std": 0.0}, "noise_std"),
    ],
)
def test_bad_parameters_name_the_field(name, params, field):
    with pytest.raises(ConfigError, match=rf"model\.params\.{field}"):
        build_model(ModelSpec(name=name, params=params))
