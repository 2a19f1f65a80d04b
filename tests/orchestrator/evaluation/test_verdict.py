"""Every run's verdict: a drifting run and a diverging run are flagged, converged runs are
not, on more than one target, through the real command line (``starling simulate``, its
results folder, ``--strict``'s exit code, the JSON log); and the stationarity test's
error rates on chains whose law is known.

The real runs are small experiments on fixed seeds; what each shows was read off its
W2 curve and diagnostics (the drift of the D-ADMMS ring with one lossy one-way link is
issue 30's example), and each margin is stated where it is asserted.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from scipy.stats import t as student_t

from starling.orchestrator.cli.main import main
from starling.orchestrator.cli.run import EXIT_DIVERGED, EXIT_NOT_CONVERGED
from starling.orchestrator.core.output import use_format
from starling.orchestrator.evaluation.diagnostics import diagnostics_section
from starling.orchestrator.evaluation.verdict import (
    ALPHA,
    CONVERGED,
    DIVERGED,
    NOT_CONVERGED,
    distinct_chains,
    rhat_limit,
    stationarity,
    verdict_section,
)

LINEAR = {"name": "linear_regression", "params": {"dim": 2, "noise_std": 4.0, "prior_var": 10.0}}
ONE_WAY_LOSS = [{"link": ["0", "1"], "drop": 0.3, "both_ways": False}]


def _experiment(**fields) -> dict:
    base = {
        "algorithm": "d-admms",
        "hyperparameters": {"rho": 5.0},
        "model": LINEAR,
        "data": {"source": "synthetic", "size": 50, "seed": 1},
        "topology": {"kind": "ring", "nodes": 5},
        "rounds": 100,
        "chains": 100,
        "seed": 7,
    }
    return {**base, **fields}


def _simulate(tmp_path, name: str, *flags: str, **fields) -> tuple[int, dict, list[str]]:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, **_experiment(**fields)}))
    out = tmp_path / name
    code = main(["simulate", str(path), "--out", str(out), "--no-report", "--quiet", *flags])
    metrics = json.loads((out / "metrics.json").read_text())
    return code, metrics, (out / "summary.txt").read_text().splitlines()


def test_rhat_limit_is_vehtaris_for_four_chains_and_grows_with_many_short_ones():
    # sqrt(1 + 2C/400): four chains give sqrt(1.02) = 1.00995, so Vehtari et al.'s 1.01;
    # 20 chains sqrt(1.1); from 42 chains the 1.1 ceiling.
    assert rhat_limit(1) == rhat_limit(4) == 1.01
    assert rhat_limit(20) == pytest.approx(np.sqrt(1.1))
    assert rhat_limit(100) == rhat_limit(1000) == 1.1


def _ar1(rng, chains: int, draws: int, params: int, rho: float) -> np.ndarray:
    """Stationary AR(1) chains of unit variance (started from the stationary law)."""
    x = np.empty((chains, draws, params))
    x[:, 0] = rng.standard_normal((chains, params))
    noise = rng.standard_normal((chains, draws, params)) * np.sqrt(1 - rho**2)
    for t in range(1, draws):
        x[:, t] = rho * x[:, t - 1] + noise[:, t]
    return x


def _flagged(draws: np.ndarray) -> bool:
    """Whether one node of ``draws`` (C, n, p) drifts, as the verdict's rule judges it: a
    change that matters beyond the Bonferroni t over its 2p tests (verdict's docstring)."""
    found = stationarity(draws)
    critical = student_t.ppf(1.0 - ALPHA / (2.0 * found["tests"]), df=found["dof"])
    return found["t_mattering"] > critical


def test_stationary_chains_are_rarely_flagged_and_a_drift_of_a_half_sd_always_is():
    # 200 stationary sets (100 AR(1) chains, 100 draws, ρ = 0.8, 3 coordinates): the test
    # holds its family-wise level α = 1 % by construction (independent chains: an exact t
    # under normality), so the flags follow Binomial(200, ≤ 0.01); 8 or more has probability
    # 1e-3 even at α exactly. The same sets with a linear drift of 0.6 sd across the window
    # are all flagged: the halves' means differ by 0.3 sd, and a chain's half-mean has
    # variance τ/50 = 0.18 (τ = 1.8/0.2 = 9), so their change over 100 chains has standard
    # error 0.06: t ≈ 5 against a critical 3.4.
    rng = np.random.default_rng(30)
    flags = drifts = 0
    for _ in range(200):
        draws = _ar1(rng, 100, 100, 3, 0.8)
        flags += _flagged(draws)
        drifted = draws + np.linspace(0.0, 0.6, 100)[None, :, None]
        drifts += _flagged(drifted)
    assert flags < 8, flags
    assert drifts == 200, drifts
    assert ALPHA == 0.01


def test_one_chain_is_tested_by_batch_means():
    # One AR(1) chain of 2000 draws (ρ = 0.5): batch means of 100 draws are nearly
    # independent, so a stationary chain passes at ~α (10 seeds: at most one flag, whose
    # probability at α = 1 % is 4e-3), a drift of one sd across the window never does.
    rng = np.random.default_rng(31)
    results = [stationarity(_ar1(rng, 1, 2000, 2, 0.5)) for _ in range(10)]
    assert all(r["dof"] == 18 for r in results)
    assert sum(_flagged(_ar1(rng, 1, 2000, 2, 0.5)) for _ in range(10)) <= 1
    drift = _ar1(rng, 1, 2000, 2, 0.5) + np.linspace(0.0, 1.0, 2000)[None, :, None]
    assert _flagged(drift)


def test_the_quickstart_converges_and_strict_lets_it_pass(tmp_path):
    # [000]'s design, 100 chains of 100 rounds: R-hat 1.08 (limit 1.1 for 100 chains), bulk
    # ESS 760-940, halves within t = 2 of each other, W2 0.3-0.4 of the posterior's scale.
    code, metrics, summary = _simulate(tmp_path, "quick", "--strict")
    assert code == 0
    verdict = metrics["verdict"]
    assert verdict["run"] == CONVERGED, verdict
    assert all(v["verdict"] == CONVERGED for v in verdict["per_node"].values())
    assert summary[0] == "verdict: converged"
    assert list(metrics)[:2] == ["verdict", "status"]
    assert verdict["criteria"]["rhat_max"] == 1.1


def test_a_drifting_dadmms_ring_is_not_converged_and_strict_makes_it_fail(tmp_path):
    # Issue 30's example: 30 % loss on the one-way link 0 → 1. Each chain wanders (the
    # ensemble's sd grows from 0.56 to 0.71 over rounds 150..299): R-hat 2.8-3.0, ESS ~119,
    # W2 1.6 × the posterior's scale. Without --strict the run still exits 0.
    fields = {"rounds": 300, "faults": ONE_WAY_LOSS}
    code, metrics, summary = _simulate(tmp_path, "drift", **fields)
    assert code == 0
    verdict = metrics["verdict"]
    assert verdict["run"] == NOT_CONVERGED
    node = verdict["per_node"]["0"]
    assert node["rhat"] > 2.0 and node["w2_over_scale"] > 1.0, node
    assert any(r.startswith("R-hat") for r in node["reasons"])
    assert summary[0].startswith("verdict: not converged — node 0: R-hat")
    strict, _, _ = _simulate(tmp_path, "drift-strict", "--strict", **fields)
    assert strict == EXIT_NOT_CONVERGED


def test_a_drifting_logistic_regression_is_not_converged(tmp_path):
    # A second target, no exact posterior: D-ADMMS on a 3-feature logistic regression with
    # the same lossy link. R-hat 3.5, bulk ESS ~59 of 50 chains × 100 draws: flagged by the
    # chains alone.
    _, metrics, _ = _simulate(
        tmp_path,
        "drift-logistic",
        model={"name": "logistic_regression", "params": {"features": 3}},
        rounds=200,
        chains=50,
        faults=ONE_WAY_LOSS,
    )
    verdict = metrics["verdict"]
    assert verdict["run"] == NOT_CONVERGED
    assert "w2_over_scale_max" not in verdict["criteria"]  # no exact posterior to compare
    assert all(v["rhat"] > 2.0 for v in verdict["per_node"].values()), verdict


def test_dglmc_on_the_conjugate_gaussian_converges(tmp_path):
    # A second converged target: [003]'s conjugate Gaussian, 4 workers, 1000 rounds, 100
    # chains; R-hat 1.06, bulk ESS 1190, W2 0.15 of the scale.
    code, metrics, _ = _simulate(
        tmp_path,
        "dglmc",
        "--strict",
        algorithm="dg-lmc",
        hyperparameters={"local_steps": 10},
        model={"name": "conjugate_gaussian", "params": {"dim": 2}},
        data={"source": "synthetic", "size": 500, "seed": 5},
        topology={"kind": "star", "nodes": 5},
        rounds=1000,
        seed=3,
    )
    assert code == 0
    assert metrics["verdict"]["run"] == CONVERGED, metrics["verdict"]
    assert list(metrics["verdict"]["per_node"]) == ["0"]  # the master records θ


def test_push_sum_losing_mass_is_diverged_and_that_outranks_strict(tmp_path):
    # Plain push-sum on a directed ring loses the mass of every lost message (30 %): its
    # samples leave the posterior's scale around round 44.
    code, metrics, summary = _simulate(
        tmp_path,
        "push-sum",
        "--strict",
        algorithm="push-sum",
        hyperparameters={},
        topology={"kind": "directed_ring", "nodes": 5},
        rounds=300,
        chains=50,
        faults=[{"link": "all", "drop": 0.3}],
    )
    assert code == EXIT_DIVERGED
    assert metrics["verdict"]["run"] == DIVERGED
    assert all(v["verdict"] == DIVERGED for v in metrics["verdict"]["per_node"].values())
    assert summary[0].startswith("verdict: diverged — node 0: samples left")


def test_the_json_log_carries_the_verdict_as_a_field(tmp_path, capsys):
    try:
        _simulate(tmp_path, "json", "--log-format", "json")
    finally:
        use_format("text")
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    summary = [line for line in lines if line.get("event") == "summary"]
    assert len(summary) == 1 and summary[0]["verdict"] == CONVERGED
    assert summary[0]["message"].startswith("verdict: converged")
    assert all("verdict" not in line for line in lines if line.get("event") != "summary")


def test_the_reasons_lead_with_what_decides_the_run():
    # Node "a" stopped after 10 of 60 rounds (judged, listed, but not deciding), node "b"
    # did not mix (its chains sit at two far-apart levels), node "c" diverged: the run is
    # diverged, so its first reason (the summary's first line) is c's, then b's, and a's
    # comes last, marked as not deciding.
    rng = np.random.default_rng(5)
    healthy = rng.standard_normal((60, 20, 2))
    apart = rng.standard_normal((60, 20, 2)) + np.repeat([0.0, 8.0], 10)[None, :, None]
    samples = {"a": healthy[:10], "b": apart, "c": healthy.copy()}
    samples["c"][40:] = np.nan
    found = verdict_section(samples, diagnostics_section(samples, None), 60, None, {"c": 40})
    assert found["run"] == DIVERGED
    reasons = found["reasons"]
    assert reasons[0].startswith("node c: samples left"), reasons
    assert reasons[1].startswith("node b: R-hat"), reasons
    assert reasons[2].startswith("node a: ") and reasons[2].endswith("does not decide the run)")


def test_chains_that_copy_one_another_are_not_converged():
    # A sampler that seeds every chain alike: 50 copies of one chain of 2,000 independent
    # N(0, 1) draws. Its draws after burn-in hold at most 1,000 effective draws, but ESS
    # and R-hat count 50 chains (bulk ESS about 50,000, R-hat 1.000): only the copies give
    # it away. Half the chains copying the other half is flagged too; 50 independent chains
    # are not (their draws are continuous: no two are equal).
    rng = np.random.default_rng(11)
    one = rng.standard_normal((2000, 1, 2))
    independent = rng.standard_normal((2000, 50, 2))
    samples = {
        "copies": np.repeat(one, 50, axis=1),
        "half": np.concatenate([independent[:, :25], independent[:, :25]], axis=1),
        "fine": independent,
    }
    found = verdict_section(samples, diagnostics_section(samples, None), 2000, None, {})
    copies, half, fine = (found["per_node"][n] for n in ("copies", "half", "fine"))
    assert copies["verdict"] == NOT_CONVERGED
    assert copies["distinct_chains"] == 1
    assert any("all 50 chains are one chain's draws" in r for r in copies["reasons"])
    assert half["verdict"] == NOT_CONVERGED and half["distinct_chains"] == 25
    assert any("25 distinct chains of 50" in r for r in half["reasons"]), half["reasons"]
    assert "distinct_chains" not in fine
    assert not any("distinct" in r for r in fine["reasons"])


def test_distinct_chains_compares_chains_that_start_alike_in_full():
    # Chains that share a first draw are compared draw for draw: equal ones count once
    # (-0.0 equals 0.0), ones that part later count apart; chains alone in their group of
    # first draws count without a comparison.
    rng = np.random.default_rng(5)
    window = rng.standard_normal((6, 7, 3))
    window[:, 1] = window[:, 0]  # a copy of chain 0
    window[:, 2] = window[:, 0]
    window[4, 2, 1] += 1.0  # starts as chain 0 does, parts at draw 4
    window[:, 3] = 0.0
    window[:, 4] = -0.0  # equal to chain 3 under ==
    assert distinct_chains(window) == 5  # {0, 1}, {2}, {3, 4}, {5}, {6}
    assert distinct_chains(window[:, :1]) == 1
    assert distinct_chains(window[:0]) == 7
