"""Starling's R-hat and ESS (:mod:`starling.orchestrator.evaluation.chain_stats`) against
ArviZ's, the reference implementation of Vehtari et al. (2021), on chains of every kind a
run produces: mixing, autocorrelated, drifting apart, stuck on a constant, with tied values
(a sampler whose chains repeat), a single chain, an odd number of draws, the fewest draws
the diagnostics take, and chains on both sides of where the autocovariances switch from
Gram matrices to an FFT. Both compute the same floating-point formulas, so they agree
to rounding: 1e-10 relative leaves room for the FFT's and the sums' order and nothing
else."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from starling.orchestrator.evaluation import chain_stats
from starling.orchestrator.evaluation.chain_stats import (
    GRAM_DRAWS,
    average_ranks,
    diagnose,
    ess_bulk,
    ess_tail,
    rhat,
)
from starling.orchestrator.report.export import import_arviz


def _autoregressive(rng, chains, n, params, phi):
    out = np.empty((chains, n, params))
    out[:, 0] = rng.standard_normal((chains, params))
    for t in range(1, n):
        innovation = np.sqrt(1 - phi**2) * rng.standard_normal((chains, params))
        out[:, t] = phi * out[:, t - 1] + innovation
    return out


def _cases():
    rng = np.random.default_rng(11)
    mixing = rng.standard_normal((4, 200, 3))
    sticky = _autoregressive(rng, 4, 300, 3, 0.95)
    apart = mixing + np.arange(4)[:, None, None] * 0.8  # chains centred apart
    drifting = mixing + np.linspace(0, 3, 200)[None, :, None]  # every chain trends
    constant = mixing.copy()
    constant[..., 1] = 2.5  # ADMM collapsed to a point on one coordinate
    tied = np.round(sticky, 1)  # repeated values
    one_chain = _autoregressive(rng, 1, 150, 2, 0.5)
    odd = _autoregressive(rng, 3, 101, 2, 0.3)
    fewest = rng.standard_normal((2, 4, 2))
    many_short = rng.standard_normal((100, 8, 2))  # the papers' design: chains ≫ draws
    # Split chains of at most GRAM_DRAWS draws have their autocovariances from Gram
    # matrices, longer ones by FFT: short sticky and constant chains, and both sides of the
    # boundary (400 draws split into 200, 402 into 201).
    short_sticky = _autoregressive(rng, 50, 40, 3, 0.9)
    short_constant = short_sticky.copy()
    short_constant[..., 0] = -1.0
    at_gram_limit = _autoregressive(rng, 6, 2 * GRAM_DRAWS, 2, 0.7)
    past_gram_limit = _autoregressive(rng, 6, 2 * GRAM_DRAWS + 2, 2, 0.7)
    return {
        "mixing": mixing,
        "sticky": sticky,
        "apart": apart,
        "drifting": drifting,
        "constant": constant,
        "tied": tied,
        "one_chain": one_chain,
        "odd": odd,
        "fewest": fewest,
        "many_short": many_short,
        "short_sticky": short_sticky,
        "short_constant": short_constant,
        "at_gram_limit": at_gram_limit,
        "past_gram_limit": past_gram_limit,
    }


CASES = _cases()


def _arviz(draws):
    az = import_arviz()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        dataset = az.convert_to_dataset(draws)
        bulk = np.asarray(az.ess(dataset, method="bulk")["x"].values, dtype=float)
        tail = np.asarray(az.ess(dataset, method="tail")["x"].values, dtype=float)
        hat = (
            np.asarray(az.rhat(dataset)["x"].values, dtype=float)
            if draws.shape[0] >= 2
            else np.full(draws.shape[-1], np.nan)
        )
    return bulk, tail, hat


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_same_figures_as_arviz(name):
    draws = CASES[name]
    bulk, tail, hat = _arviz(draws)
    np.testing.assert_allclose(ess_bulk(draws), bulk, rtol=1e-10, equal_nan=True)
    np.testing.assert_allclose(ess_tail(draws), tail, rtol=1e-10, equal_nan=True)
    np.testing.assert_allclose(rhat(draws), hat, rtol=1e-10, equal_nan=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_diagnose_gives_each_functions_figures(name):
    """The evaluation's one call, sharing the split chains' normal scores, is the three
    functions' floats exactly."""
    draws = CASES[name]
    found = diagnose(draws)
    for key, function in (("ess_bulk", ess_bulk), ("ess_tail", ess_tail), ("rhat", rhat)):
        np.testing.assert_array_equal(found[key], function(draws), err_msg=key)


def test_what_the_figures_say():
    """Not only ArviZ's numbers: chains that mix have R-hat near 1 and ESS near their count
    of draws; chains centred apart have an R-hat far above 1; a sticky chain a small ESS."""
    mixing, apart, sticky = CASES["mixing"], CASES["apart"], CASES["sticky"]
    assert np.all(rhat(mixing) < 1.05)
    assert np.all(rhat(apart) > 1.2)  # far past the 1.01 a converged run must meet
    # Independent draws: the ESS estimate of 800 draws is 800 give or take its noise.
    assert np.all((ess_bulk(mixing) > 500) & (ess_bulk(mixing) < 1300))
    # AR(1) with φ = 0.95: τ = (1 + φ)/(1 − φ) = 39, so about 1200/39 = 31 effective draws.
    assert np.all(ess_bulk(sticky) < 100)


@pytest.mark.parametrize("name", sorted(CASES))
def test_average_ranks_are_scipys(name):
    from scipy.stats import rankdata

    values = CASES[name].reshape(-1, CASES[name].shape[-1])
    np.testing.assert_array_equal(average_ranks(values), rankdata(values, axis=0))


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_sort_gives_numpys_median_and_quantiles(name):
    """The diagnostics read the median and the tail quantiles off the one sort of each
    coordinate (``_Columns``): the same floats as ``np.median`` and ``np.quantile``,
    whatever the count (odd, even, tiny) and with ties. A NaN makes the figure NaN, as in
    numpy."""
    from starling.orchestrator.evaluation.chain_stats import _Columns

    values = CASES[name].reshape(-1, CASES[name].shape[-1])
    for chosen in (values, values[:1], values[:2], values[:7]):
        columns = _Columns.of(chosen)
        np.testing.assert_array_equal(columns.median(), np.median(chosen, axis=0))
        for probability in (0.0, 0.05, 0.5, 0.95, 1.0, 1 / 3):
            np.testing.assert_array_equal(
                columns.quantile(probability), np.quantile(chosen, probability, axis=0)
            )
    holed = values.copy()
    holed[3, 0] = np.nan
    columns = _Columns.of(holed)
    assert np.isnan(columns.median()[0]) and np.isnan(columns.quantile(0.05)[0])
    np.testing.assert_array_equal(columns.median()[1:], np.median(holed[:, 1:], axis=0))


def test_normal_scores_are_the_normal_quantiles_of_the_ranks():
    """The normal scores come from a table of Φ⁻¹ at every half rank (the standard
    library's inverse normal CDF, no scipy): they are ``scipy.special.ndtri`` of the Blom
    fractions to 1e-14, tied ranks included."""
    from scipy import special
    from scipy.stats import rankdata

    from starling.orchestrator.evaluation.chain_stats import rank_normalised

    for name in ("mixing", "tied", "constant", "many_short"):
        draws = CASES[name]
        size = draws.shape[0] * draws.shape[1]
        ranks = rankdata(draws.reshape(size, -1), axis=0)
        expected = special.ndtri((ranks - 0.375) / (size + 0.25)).reshape(draws.shape)
        np.testing.assert_allclose(rank_normalised(draws), expected, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("draws_per_chain", [2, 5, 40, 73])
def test_the_gram_and_fft_autocovariances_are_the_definitions(monkeypatch, draws_per_chain):
    """Both ways of :func:`_mean_autocovariances`, the Gram matrices taken a few coordinates
    at a time (chunks of 4 and a remainder of 3 here), against the sums by lag written out
    plainly: equal to 1e-12 of the lag-0 autocovariance, rounding's room over at most 73
    products a chain and 7 chains."""
    rng = np.random.default_rng(draws_per_chain)
    chains, params = 7, 11
    draws = _autoregressive(rng, chains, draws_per_chain, params, 0.8)
    draws = draws * np.linspace(0.1, 30.0, params) + np.arange(params)  # scales and offsets
    centred = draws - draws.mean(axis=1, keepdims=True)
    n = draws_per_chain
    plain = np.array(
        [
            [np.sum(centred[:, : n - t, p] * centred[:, t:, p]) for p in range(params)]
            for t in range(n)
        ]
    ) / (n * chains)
    monkeypatch.setattr(chain_stats, "_GRAM_BYTES", 8 * n * n * 4)
    monkeypatch.setattr(chain_stats, "GRAM_DRAWS", n)
    by_gram = chain_stats._mean_autocovariances(draws)
    monkeypatch.setattr(chain_stats, "GRAM_DRAWS", n - 1)
    by_fft = chain_stats._mean_autocovariances(draws)
    tolerance = 1e-12 * plain[0]
    assert np.all(np.abs(by_gram - plain) <= tolerance)
    assert np.all(np.abs(by_fft - plain) <= tolerance)
