"""The linear-regression potential's fast paths equal the textbook formulas.

The gradient switches from the cached Gram matrix to the data rows when there are fewer
points than half the dimensions, and the prox solves in the Gram matrix's eigenbasis; both
must give what the direct formulas give, to rounding (relative 1e-9 is thousands of ulps of
headroom for these well-conditioned systems, and far below any sampler tolerance).
"""

from __future__ import annotations

import numpy as np
import pytest

from starling.node.models.base import Dataset
from starling.node.models.linear_regression import LinearRegression


def _direct_grad(model, data, share, x):
    residual = x @ data.X.T - data.y[None, :]
    return residual @ data.X / model.noise_std**2 + share / model.prior_var * x


def _direct_prox(model, data, share, v, step):
    system = data.X.T @ data.X / model.noise_std**2 + (share / model.prior_var + 1 / step) * np.eye(
        model.dim
    )
    rhs = data.X.T @ data.y / model.noise_std**2 + v / step
    return np.linalg.solve(system, rhs.T).T


@pytest.mark.parametrize(("points", "dim"), [(40, 3), (5, 30), (30, 30), (3, 200)])
@pytest.mark.parametrize("share", [0.0, 0.25])
def test_grad_and_prox_equal_the_direct_formulas(points, dim, share):
    rng = np.random.default_rng(points * 1000 + dim)
    model = LinearRegression(dim=dim, noise_std=1.5, prior_var=4.0)
    data = Dataset(X=rng.standard_normal((points, dim)), y=rng.standard_normal(points))
    potential = model.local_potential(data, prior_share=share)
    x = rng.standard_normal((7, dim))
    expected = _direct_grad(model, data, share, x)
    np.testing.assert_allclose(potential.grad(x), expected, rtol=1e-9, atol=1e-9)
    for step in (1e-3, 0.1, 1.0):
        want = _direct_prox(model, data, share, x, step)
        got = potential.prox(x, step, warm_start=x)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    hessian_top = np.linalg.eigvalsh(data.X.T @ data.X)[-1] / model.noise_std**2
    assert potential.lipschitz() == pytest.approx(hessian_top + share / model.prior_var)
