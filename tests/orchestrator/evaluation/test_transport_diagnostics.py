"""Transport distances (POT), ESS and R-hat, reference samples and the netcdf export
against known values; every tolerance says where it comes from."""

from __future__ import annotations

import numpy as np
import pytest

from starling.node.data.shards import shard_rng
from starling.node.models import build_model
from starling.node.models.base import Dataset
from starling.node.spec import ModelSpec
from starling.orchestrator.config.schema import ReferenceSection
from starling.orchestrator.evaluation.diagnostics import (
    MAX_PARAMS,
    chain_diagnostics,
    diagnostics_section,
)
from starling.orchestrator.evaluation.metrics import empirical_w2
from starling.orchestrator.evaluation.optimal_transport import sinkhorn_distance, sliced_w2
from starling.orchestrator.evaluation.reference import mala, reference_samples
from starling.orchestrator.report.export import to_inference_data, write_netcdf


def test_sinkhorn_between_identical_sets_is_small_and_vanishes_with_the_regularisation():
    # ⟨P_ε, M⟩ ≤ ε log n between a set and itself (transport.py's bound), → 0 as ε → 0.
    x = np.random.default_rng(0).normal(size=(100, 2))
    for reg in (0.1, 0.02):
        assert 0.0 <= sinkhorn_distance(x, x, reg) <= reg * np.log(100)
    assert sinkhorn_distance(x, x, 0.02) < 0.1 * sinkhorn_distance(x, x, 0.1)


def test_sinkhorn_of_a_translated_set_is_the_shift_up_to_eps_log_n():
    # W1(μ, μ + δ) = |δ| exactly (the translation coupling, and the 1-Lipschitz test
    # function x·δ/|δ|); the Sinkhorn distance lies in [W1, W1 + ε log n].
    x = np.random.default_rng(1).normal(size=(200, 2))
    delta = np.array([3.0, -4.0])
    value = sinkhorn_distance(x, x + delta, 0.1)
    assert 5.0 - 1e-9 <= value <= 5.0 + 0.1 * np.log(200)
    far = sinkhorn_distance(x, x + 100.0 * delta, 0.1)  # exp(−M/ε) would underflow: log domain
    assert 500.0 - 1e-6 <= far <= 500.0 + 0.1 * np.log(200)


def test_sliced_w2_between_shifted_sets_is_the_shift_projected():
    rng = np.random.default_rng(2)
    z = rng.normal(size=(300, 1))
    # In one dimension every projection is ±the axis: SW2 is the 1-D W2, exactly |δ|.
    assert sliced_w2(z, z + 3.0, 20, seed=0) == pytest.approx(3.0, abs=1e-9)
    # In d = 2 the projection of δ on a uniform direction θ has E(θ·δ)² = |δ|²/2, so SW2 of
    # a set and its translate is |δ|/√2 up to the Monte-Carlo error of the projections:
    # (θ·δ)²/|δ|² = cos²φ has variance 1/8, so over 500 projections SW2² has relative
    # standard deviation √(1/8/500)/(1/2) = 3.2 %, SW2 half that: 6 % on SW2 is ~4 sd.
    z = rng.normal(size=(300, 2))
    value = sliced_w2(z, z + np.array([3.0, 4.0]), 500, seed=1)
    assert value == pytest.approx(5.0 / np.sqrt(2.0), rel=0.06)
    # Two independent samples of N(0, I) and N(δ, I): the same plus the sampling noise of
    # the two sets (their means differ from δ by ~√(2/n) = 0.045 per coordinate at n = 1000,
    # ~1 % of the answer): 8 % in all.
    a, b = rng.normal(size=(1000, 2)), rng.normal(size=(1000, 2)) + np.array([3.0, 4.0])
    assert sliced_w2(a, b, 500, seed=2) == pytest.approx(5.0 / np.sqrt(2.0), rel=0.08)


def test_ess_of_iid_draws_is_their_number_and_rhat_is_one():
    # 4 chains × 1000 iid N(0, 1) draws: ESS ≈ 4000. Over 30 seeds ArviZ's estimates fell in
    # [0.82, 1.07]·n (bulk) and [0.86, 1.04]·n (tail), R-hat within 0.0025 of 1: the bounds
    # 0.75n..1.25n and |R-hat − 1| < 0.01 leave room beyond that spread.
    found = chain_diagnostics(np.random.default_rng(3).normal(size=(4, 1000, 3)))
    for key in ("ess_bulk", "ess_tail"):
        assert np.all((found[key] > 0.75 * 4000) & (found[key] < 1.25 * 4000)), found[key]
    assert np.all(np.abs(found["rhat"] - 1.0) < 0.01), found["rhat"]


def test_rhat_sees_chains_stuck_in_different_modes():
    rng = np.random.default_rng(4)
    draws = rng.normal(size=(4, 500, 1)) + np.array([0.0, 0.0, 5.0, 5.0])[:, None, None]
    assert chain_diagnostics(draws)["rhat"][0] > 1.5


def test_constant_chains_have_no_ess_or_rhat_and_no_warning():
    # ADMM's chains collapse to a point: zero variance, so ArviZ's ratios are 0/0. Reported
    # as None (pytest turns any warning into an error here).
    section = diagnostics_section({"a": np.ones((20, 4, 2))}, None)
    entry = section["per_node"]["a"]
    assert entry["rhat_max"] is None and entry["rhat"] == [None, None]


def test_one_chain_has_ess_but_no_rhat(caplog):
    found = chain_diagnostics(np.random.default_rng(8).normal(size=(1, 400, 2)))
    assert np.all(found["ess_bulk"] > 0.75 * 400) and np.isnan(found["rhat"]).all()
    assert not caplog.records  # ArviZ would log a shape warning for R-hat of one chain


def test_diagnostics_section_burns_in_half_and_samples_coordinates_of_big_models():
    rng = np.random.default_rng(5)
    small = {"a": rng.normal(size=(100, 4, 2)), "b": rng.normal(size=(100, 4, 2))}
    section = diagnostics_section(small, None)
    assert section["burn_in"] == 50 and section["params"] == "all"
    assert len(section["per_node"]["a"]["ess_bulk"]) == 2
    big = diagnostics_section({"a": rng.normal(size=(20, 3, 100))}, 10)
    assert len(big["params"]) == MAX_PARAMS and "ess_bulk" not in big["per_node"]["a"]
    assert diagnostics_section({"a": rng.normal(size=(6, 3, 2))}, None) is None  # 3 draws


def test_nodes_diagnosed_side_by_side_get_the_figures_each_gets_alone():
    """The section diagnoses nodes of one shape in one call; each node's figures must be
    those of its own draws alone (to rounding: 1e-12 relative leaves room for numpy summing
    a wider array in another order, and for nothing else), beside a node with fewer rounds
    (a failed node), a constant coordinate, tied values and a node that left the floats."""
    rng = np.random.default_rng(8)
    samples = {str(i): rng.normal(size=(40, 6, 3)).cumsum(axis=0) * (1 + i) for i in range(4)}
    samples["1"][:, :, 2] = 0.5
    samples["2"] = np.round(samples["2"], 1)
    samples["3"] = samples["3"][:30]
    broken = rng.normal(size=(40, 6, 3))
    broken[-1, 0, 0] = np.inf
    samples["4"] = broken
    section = diagnostics_section(samples, 10)
    assert section["per_node"]["4"] is None
    for node in "0123":
        alone = chain_diagnostics(np.transpose(samples[node][10:], (1, 0, 2)))
        for key, values in alone.items():
            listed = [np.nan if v is None else v for v in section["per_node"][node][key]]
            np.testing.assert_allclose(listed, values, rtol=1e-12, equal_nan=True)


def test_mala_reference_matches_an_exact_gaussian_posterior():
    # Linear regression has an exact posterior; 2000 MALA samples (16 chains, thinned)
    # fitted by a Gaussian: W2 to it measured 0.010-0.015 over three seeds, against
    # posterior standard deviations of 0.26. A wrong Metropolis ratio or proposal
    # density biases the law by more than 0.04 (~0.15 sd).
    model = build_model(ModelSpec("linear_regression", {"dim": 2, "noise_std": 4.0}))
    shards = [model.synthesize(shard_rng(1, k), 50) for k in range(5)]
    posterior = model.exact_posterior(shards)
    pooled = Dataset(
        X=np.concatenate([s.X for s in shards]), y=np.concatenate([s.y for s in shards])
    )
    draws = mala(model.local_potential(pooled, 1.0), 2, 2000, 4000, np.random.default_rng(0))
    assert empirical_w2(draws, posterior.mean, posterior.cov) < 0.04


def test_references_are_cached_by_content_hash(tmp_path):
    spec = ModelSpec("gaussian_mixture", {})
    model = build_model(spec)
    shards = [model.synthesize(shard_rng(1, k), 20) for k in range(5)]
    settings = ReferenceSection(size=500, seed=3)
    first, about = reference_samples(model, spec, shards, settings, where=str(tmp_path))
    again, about_again = reference_samples(model, spec, shards, settings, where=str(tmp_path))
    assert about["method"] == "grid" and not about["cached"] and about_again["cached"]
    assert np.array_equal(first, again) and first.shape == (500, 2)
    assert len(list((tmp_path / "reference").glob("*.npz"))) == 1
    other_data = [model.synthesize(shard_rng(2, k), 20) for k in range(5)]
    _, about_other = reference_samples(model, spec, other_data, settings, where=str(tmp_path))
    assert not about_other["cached"] and about_other["key"] != about["key"]
    assert reference_samples(model, spec, shards, ReferenceSection(method="none")) is None


def test_a_reference_cache_that_cannot_serve_leaves_the_reference_uncached(tmp_path):
    """The cache is a shortcut: a folder that cannot be written (here under a file, as
    STARLING_CACHE_DIR=/etc/hostname) raised NotADirectoryError after the rounds, and the
    run's samples were never written; a damaged entry raised BadZipFile. Both now give the
    reference, computed, with why it was not cached."""
    spec = ModelSpec("gaussian_mixture", {})
    model = build_model(spec)
    shards = [model.synthesize(shard_rng(1, k), 20) for k in range(3)]
    settings = ReferenceSection(size=200, seed=3)
    expected, _ = reference_samples(model, spec, shards, settings, where=str(tmp_path / "ok"))
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    samples, about = reference_samples(model, spec, shards, settings, where=str(a_file))
    assert np.array_equal(samples, expected) and not about["cached"]
    assert about["cache_error"] == f"{a_file}/reference: Not a directory"
    (entry,) = (tmp_path / "ok" / "reference").glob("*.npz")
    entry.write_bytes(b"PK\x03\x04 cut short")
    samples, about = reference_samples(model, spec, shards, settings, where=str(tmp_path / "ok"))
    assert np.array_equal(samples, expected) and not about["cached"]
    assert "cache_error" not in about
    _, about = reference_samples(model, spec, shards, settings, where=str(tmp_path / "ok"))
    assert about["cached"]  # the damaged entry was written anew


def test_export_has_chains_draws_params_and_node_as_a_coordinate(tmp_path):
    import arviz as az

    (tmp_path / "samples").mkdir()
    rng = np.random.default_rng(6)
    full, short = rng.normal(size=(7, 3, 2)), rng.normal(size=(5, 3, 2))
    np.savez(tmp_path / "samples" / "node-a.npz", samples=full, rounds=np.arange(7))
    np.savez(tmp_path / "samples" / "node-b.npz", samples=short, rounds=np.arange(5))
    data = to_inference_data(tmp_path)
    x = data.posterior["x"]
    assert x.dims == ("chain", "draw", "node", "param") and x.shape == (3, 7, 2, 2)
    assert list(data.posterior["node"].values) == ["a", "b"]
    assert np.array_equal(x.sel(node="a").values, np.transpose(full, (1, 0, 2)))
    assert np.isnan(x.sel(node="b").values[:, 5:]).all()  # a partial node, padded
    back = az.from_netcdf(str(write_netcdf(tmp_path)))
    assert np.array_equal(back.posterior["x"].values, x.values, equal_nan=True)


def test_a_study_opts_in_to_diagnostics():
    from starling.orchestrator.config.study import load_study

    raw = {
        "study": "s",
        "base": {"model": {"name": "linear_regression"}, "rounds": 4},
        "cells": [{"label": "ring", "topology": {"kind": "ring", "nodes": 3}}],
        "variants": [{"label": "sgld", "algorithm": "d-sgld"}],
    }
    assert not load_study(raw).runs[0][2].evaluation.diagnostics
    raw["base"]["evaluation"] = {"diagnostics": True}
    assert load_study(raw).runs[0][2].evaluation.diagnostics
