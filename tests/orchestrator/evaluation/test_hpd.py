"""[003]'s HPD relative error (orchestrator/evaluation/hpd.py) against exact values, and its level
η_α estimated from MALA reference samples where no exact posterior exists ([003] §5.2)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2

from starling.node.data.shards import shard_rng
from starling.node.models.base import Dataset
from starling.node.models.conjugate_gaussian import ConjugateGaussian
from starling.node.models.linear_regression import LinearRegression
from starling.node.params import ConfigError
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.evaluation.hpd import hpd_section, reference_level, true_level
from starling.orchestrator.evaluation.reference import mala


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
    section, _ = hpd_section(model, data, posterior, {"0": exact, "1": shifted}, 50, 0.1)
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


def test_the_curve_is_the_error_had_the_run_stopped_at_each_round():
    """``hpd_curve.csv``'s rows: at each scored round t, the error of the samples the run
    would have kept had it stopped at t, the same share of its rounds (here 50 of 80: at
    t = 47, rounds 18..47). Thirty rounds three posterior stds off, then exact draws: the
    curve starts high and ends low (measured excess 5.8 at round 16, 0.03 at round 79,
    fixed seed: the bias moves U's quantile by heights, the sampling noise of 8,000 exact
    draws by hundredths of one), and its last row is the section's figure."""
    model = LinearRegression()
    data, posterior = _setup(model)
    rng = np.random.default_rng(4)
    values = rng.multivariate_normal(posterior.mean, posterior.cov, size=(80, 100))
    values[:30] += 3.0 * np.sqrt(np.diag(posterior.cov))
    section, rows = hpd_section(model, data, posterior, {"0": values}, 50, 0.1, curve_points=6)
    assert [r["round"] for r in rows] == [0, 16, 32, 47, 63, 79]
    assert {r["node"] for r in rows} == {"0"}
    assert rows[-1]["relative_error"] == section["per_node"]["0"]
    assert rows[-1]["excess_error"] == section["excess"]["per_node"]["0"]
    potential, eta = _pooled_potential(model, data), section["eta_true"]
    at_47 = float(np.quantile(potential.value(values[18:48].reshape(-1, 2)), 0.9))
    assert rows[3]["relative_error"] == pytest.approx(abs(at_47 - eta) / abs(eta), rel=1e-9)
    assert rows[1]["excess_error"] > 50 * rows[-1]["excess_error"], rows


def _pooled_potential(model, data):
    pooled = Dataset(X=np.concatenate([d.X for d in data]), y=np.concatenate([d.y for d in data]))
    return model.local_potential(pooled, prior_share=1.0)


def test_the_mala_level_agrees_with_the_exact_one_within_its_standard_error():
    """On a Gaussian target (linear regression, d = 3) η_α is known exactly; the MALA
    reference's (16 chains, 2,000 kept iterations, 20,000 samples) must agree within 4 of
    its own batch-means standard errors (20 batches: the SE itself is good to ~16 %, so 4
    SEs are a > 99.9 % bound for a correct estimator). Its SE must be no smaller than 0.8 ×
    the standard error of i.i.d. draws (MCMC cannot beat independent samples by much; a
    batch-means SE below that would be too optimistic) and under 2 % of the region's
    height ½ χ²_3(0.9) = 3.13, i.e. precise enough to score samplers by ``excess``."""
    model = LinearRegression(dim=3)
    data, posterior = _setup(model)
    potential = _pooled_potential(model, data)
    samples = mala(potential, 3, 20_000, 2_000, np.random.default_rng(7))
    eta, se = reference_level(potential.value(samples), 0.1)
    exact = true_level(model, data, posterior, 0.1)
    assert abs(eta - exact) < 4 * se, (eta, exact, se)
    height = 0.5 * chi2.ppf(0.9, 3)
    density = chi2.pdf(2 * height, 3) * 2  # density of U − U(μ) = ½χ²_3 at its 0.9 quantile
    iid_se = np.sqrt(0.1 * 0.9 / 20_000) / density
    assert 0.8 * iid_se < se < 0.02 * height, (se, iid_se)


def test_without_an_exact_posterior_the_level_and_mode_come_from_the_reference():
    """Given reference draws instead of the posterior, hpd_section's η_α, mode and excess
    match the exact ones: 40,000 exact draws as the reference (so the level's error is the
    quantile's, SE ≈ 0.016 here), the MAP found by L-BFGS is the posterior mean to 1e-6 in
    ``U``, and samples that are the posterior score an excess under 0.1 as in the exact case."""
    model = LinearRegression()
    data, posterior = _setup(model)
    rng = np.random.default_rng(3)
    reference = rng.multivariate_normal(posterior.mean, posterior.cov, size=40_000)
    exact = rng.multivariate_normal(posterior.mean, posterior.cov, size=(50, 400))
    section, _ = hpd_section(
        model, data, None, {"0": exact}, 50, 0.1, (reference, {"method": "grid"})
    )
    truth, _ = hpd_section(model, data, posterior, {"0": exact}, 50, 0.1)
    assert section["eta_source"] == "grid" and truth["eta_source"] == "exact"
    assert section["mode_potential"] == pytest.approx(truth["mode_potential"], abs=1e-6)
    assert 0 < section["eta_se"] < 0.05
    assert abs(section["eta_true"] - truth["eta_true"]) < 4 * section["eta_se"]
    assert section["excess_se"] == pytest.approx(
        section["eta_se"] / (section["eta_true"] - section["mode_potential"])
    )
    assert section["excess"]["per_node"]["0"] < 0.1


def test_hpd_on_a_model_without_exact_posterior_needs_a_reference():
    raw = {
        "name": "hpd-logreg",
        "algorithm": "d-sgld",
        "model": {"name": "logistic_regression", "params": {"features": 3}},
        "data": {"source": "synthetic", "size": 20, "seed": 1},
        "topology": {"kind": "ring", "nodes": 4},
        "rounds": 10,
        "evaluation": {"hpd": 0.1},
    }
    with pytest.raises(ConfigError, match="evaluation.reference.method: mala"):
        parse_experiment(raw)
    raw["evaluation"] = {"hpd": 0.1, "reference": {"method": "mala"}}
    assert parse_experiment(raw).evaluation.hpd == 0.1
