"""[003]'s HPD relative error (orchestrator/hpd.py) against exact values."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2

from starling.node.data import shard_rng
from starling.node.models.conjugate_gaussian import ConjugateGaussian
from starling.node.models.linear_regression import LinearRegression
from starling.orchestrator.hpd import hpd_section, true_level


def _setup(model, shards=3, size=40):
    data = [model.synthesize(shard_rng(5, k), size) for k in range(shards)]
    return data, model.exact_posterior(data)


@pytest.mark.parametrize("model", [LinearRegression(), ConjugateGaussian(dim=2)])
def test_the_true_level_holds_one_minus_alpha_of_the_posterior(model):
    """η_α from the χ² formula holds 1 − α of exact posterior draws: 200,000 draws give a
    binomial standard error of 0.0007 on the coverage; the tolerance is 4 of them."""
    data, posterior = _setup(model)
    rng = np.random.default_rng(0)
    draws = rng.multivariate_normal(posterior.mean, posterior.cov, size=200_000)
    pooled = model.local_potential(
        type(data[0])(X=np.concatenate([d.X for d in data]), y=np.concatenate([d.y for d in data])),
        prior_share=1.0,
    )
    eta = true_level(model, data, posterior, 0.1)
    coverage = float(np.mean(pooled.value(draws) <= eta))
    assert coverage == pytest.approx(0.9, abs=4 * np.sqrt(0.9 * 0.1 / 200_000))


def test_relative_error_is_small_for_exact_draws_and_grows_with_a_bias():
    model = LinearRegression()
    data, posterior = _setup(model)
    rng = np.random.default_rng(1)
    exact = rng.multivariate_normal(posterior.mean, posterior.cov, size=(50, 400))
    shifted = exact + 3.0 * np.sqrt(np.diag(posterior.cov))  # three posterior stds off
    section = hpd_section(model, data, posterior, {"0": exact, "1": shifted}, 50, 0.1)
    eta = section["eta_true"]
    # The sample quantile of U over 20,000 exact draws is within ~0.1 of η (χ²_2 quantile
    # noise ½·0.06); relative to η that is below 0.1 / η.
    assert section["per_node"]["0"] < 0.1 / abs(eta)
    assert section["per_node"]["1"] > 20 * section["per_node"]["0"]
    # The excess form is the same error over the region's height ½ χ²_2(0.9) = 2.303.
    height = 0.5 * chi2.ppf(0.9, 2)
    for node in ("0", "1"):
        assert section["excess"]["per_node"][node] == pytest.approx(
            section["per_node"][node] * abs(eta) / height, rel=1e-9
        )
    assert section["excess"]["per_node"]["0"] < 0.1  # 20,000 exact draws: a few percent
    assert section["node_mean"] == pytest.approx(
        np.mean([section["per_node"]["0"], section["per_node"]["1"]])
    )
    assert eta == pytest.approx(true_level(model, data, posterior, 0.1)) and eta > 0.5 * chi2.ppf(
        0.9, 2
    )
