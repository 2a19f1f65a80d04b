"""Edge cases real runs hand the evaluation
(:func:`starling.orchestrator.evaluation.evaluate.evaluate`): runs that stopped before their
planned rounds, scored on exact draws of the conjugate model's posterior so that every
figure is known to be defined."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.evaluation import evaluate as evaluate_module
from starling.orchestrator.evaluation import w2_scores as w2_scores_module
from starling.orchestrator.evaluation.diagnostics import diagnostics_section
from starling.orchestrator.evaluation.distances import FIGURES
from starling.orchestrator.evaluation.evaluate import evaluate, ground_truth
from starling.orchestrator.evaluation.metrics import GaussianTarget
from starling.orchestrator.evaluation.verdict import CONVERGED
from starling.orchestrator.evaluation.w2_error import bootstrap_se, w2_floor
from starling.orchestrator.planning.plan import plan_run
from starling.orchestrator.results.summary import summary_table


def _plan(rounds: int, chains: int, nodes: int = 3, dim: int = 2, evaluation: dict | None = None):
    raw = {
        "name": "edges",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 1e-3},
        "model": {"name": "linear_regression", "params": {"dim": dim, "prior_var": 10.0}},
        "data": {"source": "synthetic", "size": 60, "seed": 3},
        "topology": {"kind": "ring", "nodes": nodes},
        "rounds": rounds,
        "chains": chains,
        **({"evaluation": evaluation} if evaluation else {}),
    }
    return plan_run(parse_experiment(raw)).evaluation


def _exact_draws(plan, rounds: int, chains: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Independent exact draws of the posterior for every node: a perfect sampler."""
    posterior = ground_truth(plan)
    assert posterior is not None
    rng = np.random.default_rng(seed)
    factor = np.linalg.cholesky(posterior.cov)
    d = posterior.mean.shape[0]
    return {
        node: posterior.mean + rng.standard_normal((rounds, chains, d)) @ factor.T
        for node in plan.sampling_nodes
    }


def test_an_interrupted_run_is_judged_on_the_rounds_every_node_recorded():
    # Every node stopped at round 300 of 1000 planned (Ctrl-C): the run is those 300 rounds.
    # Its burn-in is their first half, as the diagnostics' is, and the network average and
    # the consensus are defined on them. With 100 chains of exact draws (150 × 100 draws
    # after burn-in: bulk ESS near 15,000, R-hat within 1.01 of 1 on a 1.1 limit) the
    # verdict is converged whatever the seed.
    plan = _plan(rounds=1000, chains=100)
    samples = _exact_draws(plan, rounds=300, chains=100)
    metrics = evaluate(plan, samples).metrics
    verdict = metrics["verdict"]
    assert verdict["criteria"]["window"] == [150, 299]
    assert metrics["diagnostics"]["burn_in"] == 150
    assert verdict["run"] == CONVERGED, verdict["reasons"]
    assert metrics["w2"]["average"] is not None
    assert metrics["consensus_error"] is not None
    assert metrics["samples_per_node"] == {"0": 300, "1": 300, "2": 300}


def test_the_consensus_error_is_the_mean_squared_distance_from_the_nodes_average():
    """Against the definition computed the plain way (every node's window stacked): a node
    that recorded fewer rounds is left out of both, as is every round before the window."""
    plan = _plan(rounds=40, chains=7, nodes=4)
    samples = _exact_draws(plan, rounds=40, chains=7, seed=3)
    samples["0"] = samples["0"] * 3.0 + 1.0  # far from the others: a large spread
    samples["2"] = samples["2"][:30]  # short: not in the average, not in the consensus
    window = plan.evaluation.window
    kept = np.stack([samples[n][-window:] for n in ("0", "1", "3")])
    expected = np.mean(np.sum((kept - kept.mean(axis=0)) ** 2, axis=-1))
    metrics = evaluate(plan, samples).metrics
    assert metrics["averaged_nodes"] == ["0", "1", "3"]
    assert abs(metrics["consensus_error"] - expected) <= 1e-12 * expected


def _with_model(model: dict, data: dict, evaluation: dict, rounds: int, chains: int):
    raw = {
        "name": "edges",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 1e-3},
        "model": model,
        "data": data,
        "topology": {"kind": "ring", "nodes": 3},
        "rounds": rounds,
        "chains": chains,
        "evaluation": evaluation,
    }
    return plan_run(parse_experiment(raw)).evaluation


def test_samples_beyond_the_divergence_bound_give_no_predictive_figure():
    # Node 1's samples are finite but 1e200 (beyond 1e150: diverged, as an infinite one
    # is). Its held-out figures, and the network average's (which it dominates), are None
    # rather than an accuracy computed from logits of 1e200.
    plan = _with_model(
        {
            "name": "logistic_regression",
            "params": {"features": 3, "prior_var": 10.0, "feature_var": 20.0, "truth_seed": 10},
        },
        {"source": "synthetic", "size": 50, "seed": 2024},
        {"window": 2, "test": {"split": 0.5, "seed": 1}, "curve_points": 3},
        rounds=20,
        chains=10,
    )
    rng = np.random.default_rng(0)
    samples = {node: rng.standard_normal((20, 10, 3)) for node in plan.sampling_nodes}
    samples["1"] *= 1e200
    evaluation = evaluate(plan, samples)
    metrics = evaluation.metrics
    assert metrics["diverged"] == {"1": 0}
    assert metrics["predictive"]["per_node"]["1"] is None
    assert metrics["predictive"]["average"] is None
    assert metrics["predictive"]["per_node"]["0"] is not None
    nodes = {row["node"] for row in evaluation.tables["predictive_curve"]}
    assert nodes == {"0", "2"}


def test_samples_beyond_the_divergence_bound_give_no_distance_and_no_nan():
    # The mixture has no exact posterior: the transport distances are its figures. Node 1
    # leaves the bound at round 100 with finite values of 1e200, whose squared distances
    # overflow: its final figure and the average's are None, and no curve row is NaN.
    plan = _with_model(
        {"name": "gaussian_mixture"},
        {"source": "synthetic", "total": 100, "partition": "random", "seed": 2020},
        {"window": 30, "transport": {"repeats": 2, "points": 60, "curve_points": 4}},
        rounds=120,
        chains=20,
    )
    rng = np.random.default_rng(1)
    samples = {node: rng.standard_normal((120, 20, 2)) for node in plan.sampling_nodes}
    samples["1"][100:] *= 1e200
    evaluation = evaluate(plan, samples)
    distances = evaluation.metrics["distances"]
    assert evaluation.metrics["diverged"] == {"1": 100}
    assert distances["per_node"]["1"] is None and distances["average"] is None
    assert distances["per_node"]["0"] is not None
    figures = [row[key] for row in evaluation.tables["distance_curve"] for key in FIGURES]
    assert figures and all(np.isfinite(figures))


def test_a_run_too_short_to_judge_says_how_many_draws_it_had():
    # Two rounds: burn-in is round 0, so each chain has one draw to judge by, and the
    # reason says so (and what to change), rather than calling the draws not finite.
    plan = _plan(rounds=2, chains=20)
    metrics = evaluate(plan, _exact_draws(plan, rounds=2, chains=20)).metrics
    reason = metrics["verdict"]["per_node"]["0"]["reasons"][0]
    assert reason.startswith("1 draw per chain after burn-in (from round 1): too few to judge")
    assert "finite" not in reason


def test_a_node_that_diverges_keeps_its_hpd_curve_up_to_the_divergence():
    # Node 1's samples are NaN from round 30 of 40. Its final HPD error is None, as its W2
    # is; its curve, like its W2 curve, still has the rounds whose stretch of samples came
    # before the divergence, and no row whose stretch reaches past it.
    plan = _with_model(
        {"name": "linear_regression", "params": {"dim": 2, "prior_var": 10.0}},
        {"source": "synthetic", "size": 60, "seed": 3},
        {"hpd": 0.1, "window": 10, "curve_points": 8},
        rounds=40,
        chains=50,
    )
    samples = _exact_draws(plan, rounds=40, chains=50)
    samples["1"][30:] = np.nan
    evaluation = evaluate(plan, samples)
    assert evaluation.metrics["hpd"]["per_node"]["1"] is None
    rows = [r for r in evaluation.tables["hpd_curve"] if r["node"] == "1"]
    assert rows, "the diverged node's curve before round 30 is kept"
    for row in rows:
        kept = -(-(row["round"] + 1) * 10 // 40)  # the stretch each row pools (hpd._curve)
        assert row["round"] < 30 and row["round"] - kept + 1 >= 0
        assert np.isfinite(row["relative_error"]) and np.isfinite(row["excess_error"])
    healthy = {r["round"] for r in evaluation.tables["hpd_curve"] if r["node"] == "0"}
    assert {r["round"] for r in rows} == {t for t in healthy if t < 30}


def test_a_node_with_an_empty_sample_array_counts_as_one_with_no_samples():
    # A (0, chains, d) array (a node that died before round 0, handed on as an empty
    # stack) is evaluated as a node that recorded nothing, not a reshape error.
    plan = _plan(rounds=40, chains=20)
    samples = _exact_draws(plan, rounds=40, chains=20)
    without = evaluate(plan, {n: s for n, s in samples.items() if n != "1"}).metrics
    samples["1"] = samples["1"][:0]
    metrics = evaluate(plan, samples).metrics
    assert metrics["samples_per_node"]["1"] == 0
    assert metrics["w2"] == without["w2"]
    assert metrics["verdict"] == without["verdict"]


def test_an_average_over_some_nodes_names_them_in_the_metrics_and_the_summary():
    # Nodes 0 and 2 stopped a round before nodes 1 and 3 (a real run interrupted while its
    # nodes were a round apart): the network average and the consensus are over the nodes
    # that recorded every round, 1 and 3, and metrics.json and summary.txt say so.
    plan = _plan(rounds=100, chains=20, nodes=4)
    samples = _exact_draws(plan, rounds=60, chains=20)
    samples["0"], samples["2"] = samples["0"][:59], samples["2"][:59]
    metrics = evaluate(plan, samples).metrics
    assert metrics["averaged_nodes"] == ["1", "3"]
    text = summary_table(metrics)
    assert "(W2 of the network-average iterate of nodes 1, 3 only" in text
    assert "consensus error E|x_i - mean|^2 of nodes 1, 3 only" in text
    everyone = evaluate(plan, _exact_draws(plan, rounds=60, chains=20)).metrics
    assert "averaged_nodes" not in everyone
    assert " only" not in summary_table(everyone)


def test_nodes_stopped_together_are_evaluated_over_their_common_rounds():
    # An interrupted run: nodes 0..2 were stopped at once and ended a round apart (59, 60,
    # 61 rounds); node 3 had failed at round 20. The three are evaluated over their 59
    # common rounds, so all of them make the network average and the consensus; node 3
    # keeps its own 20. The counts of samples stay those recorded.
    plan = _plan(rounds=100, chains=20, nodes=4)
    samples = _exact_draws(plan, rounds=61, chains=20)
    samples["0"], samples["1"], samples["3"] = (
        samples["0"][:59],
        samples["1"][:60],
        samples["3"][:20],
    )
    metrics = evaluate(plan, samples, stopped_together=["0", "1", "2"]).metrics
    assert metrics["rounds_evaluated"] == 59
    assert metrics["averaged_nodes"] == ["0", "1", "2"]
    assert metrics["samples_per_node"] == {"0": 59, "1": 60, "2": 61, "3": 20}
    assert "evaluated over the first 59 rounds" in summary_table(metrics)
    cut = {n: (s[:59] if n != "3" else s) for n, s in samples.items()}
    assert metrics["w2"] == evaluate(plan, cut).metrics["w2"]
    assert metrics["consensus_error"] == evaluate(plan, cut).metrics["consensus_error"]
    # Without the interrupt's list the longest node alone made the average.
    assert evaluate(plan, samples).metrics["averaged_nodes"] == ["2"]
    # Nodes that ended on one round are left as they are.
    level = evaluate(plan, cut, stopped_together=["0", "1", "2"]).metrics
    assert "rounds_evaluated" not in level


def test_the_diagnostics_computed_beside_the_w2_figures_are_those_of_the_samples_alone():
    """ESS and R-hat run on a second thread while the W2 figures are scored: the figures are
    the floats :func:`diagnostics_section` gives on its own, and they are written after
    ``w2``, before the verdict that reads them."""
    plan = _plan(rounds=40, chains=20)
    samples = _exact_draws(plan, rounds=40, chains=20, seed=5)
    metrics = evaluate(plan, samples).metrics
    assert metrics["diagnostics"] == diagnostics_section(samples, plan.evaluation.burn_in)
    keys = list(metrics)
    assert keys.index("w2") < keys.index("diagnostics") < keys.index("verdict")


def test_an_error_in_the_diagnostics_reaches_the_caller(monkeypatch):
    def broken(*_args):
        raise RuntimeError("diagnostics broke")

    monkeypatch.setattr(evaluate_module, "diagnostics_section", broken)
    plan = _plan(rounds=20, chains=5)
    with pytest.raises(RuntimeError, match="diagnostics broke"):
        evaluate(plan, _exact_draws(plan, rounds=20, chains=5))


def _windowed_plan(nodes: int, window: int):
    return _plan(12, 4, nodes, dim=6, evaluation={"window": window, "diagnostics": False})


def test_the_w2_figures_are_the_same_floats_on_one_thread_or_several(monkeypatch):
    """Five nodes on two threads (a node started as soon as one is handed back, the floor
    and the standard errors beside the curve) give every W2 figure, standard error and
    floor that one thread gives, and those are the ones their functions give alone."""
    plan = _windowed_plan(nodes=5, window=3)
    samples = _exact_draws(plan, rounds=12, chains=4, seed=9)
    several = evaluate(plan, samples)
    monkeypatch.setattr(w2_scores_module, "WORKERS", 1)
    alone = evaluate(plan, samples)
    assert several.metrics["w2"] == alone.metrics["w2"]
    for name, curve in alone.curves.items():
        np.testing.assert_array_equal(several.curves[name], curve)
    w2 = several.metrics["w2"]
    posterior = ground_truth(plan)
    assert posterior is not None
    truth = GaussianTarget(posterior.mean, posterior.cov)
    assert w2["floor"] == w2_floor(truth, 4 * 3, plan.seed)
    assert w2["floor_round"] == w2_floor(truth, 4, plan.seed)
    for node, values in samples.items():
        assert w2["se"][node] == bootstrap_se(truth, values[-3:], plan.seed)
    average = sum(samples[node] for node in sorted(samples)) / len(samples)
    assert w2["average_se"] == pytest.approx(bootstrap_se(truth, average[-3:], plan.seed))


def test_a_node_whose_window_left_the_floats_has_no_standard_error():
    plan = _windowed_plan(nodes=3, window=2)
    samples = _exact_draws(plan, rounds=12, chains=4, seed=2)
    samples["1"][-1, 0, 0] = np.nan
    w2 = evaluate(plan, samples).metrics["w2"]
    assert w2["per_node"]["1"] is None and w2["se"]["1"] is None
    assert w2["average"] is None and w2["average_se"] is None
    assert w2["se"]["0"] is not None and w2["floor"] is not None


@pytest.mark.parametrize("part", ["ground_truth", "w2_floor", "bootstrap_se"])
def test_an_error_in_a_part_computed_beside_reaches_the_caller(monkeypatch, part):
    def broken(*_args):
        raise RuntimeError(f"{part} broke")

    monkeypatch.setattr(evaluate_module, part, broken)
    plan = _plan(rounds=20, chains=5)
    with pytest.raises(RuntimeError, match=f"{part} broke"):
        evaluate(plan, _exact_draws(plan, rounds=20, chains=5))


@pytest.mark.parametrize(
    ("beside", "interrupted_in"),
    [("diagnostics_section", "_score_w2"), ("w2_floor", "w2_scores")],
    ids=["diagnostics while W2 is scored", "floor while the curve is scored"],
)
def test_an_interrupt_does_not_wait_for_a_part_computed_beside(monkeypatch, beside, interrupted_in):
    """Ctrl-C reaches the caller while a part computed on the thread beside still runs: it
    holds the interrupt up no longer than the scoring itself would."""
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def slow(*_args):
        started.set()
        release.wait(timeout=60)
        finished.set()
        return 0.0

    def interrupted(*_args):
        assert started.wait(timeout=60)  # interrupted while the part beside runs
        raise KeyboardInterrupt

    monkeypatch.setattr(evaluate_module, beside, slow)
    monkeypatch.setattr(evaluate_module, interrupted_in, interrupted)
    plan = _plan(rounds=20, chains=5)
    try:
        with pytest.raises(KeyboardInterrupt):
            evaluate(plan, _exact_draws(plan, rounds=20, chains=5))
        assert not finished.is_set()
    finally:
        release.set()
    assert finished.wait(timeout=60)
