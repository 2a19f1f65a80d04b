"""The W2 curve on a schedule of rounds (``evaluation.w2_schedule``,
:mod:`starling.orchestrator.evaluation.schedule`): which rounds are scored, and that a
scored round's W2 — and every final figure — is the very float every-round scoring gives
(compared with ``==``, no tolerance: the same sets go through the same arithmetic, one
matrix at a time, whichever other rounds share their block)."""

from __future__ import annotations

import numpy as np
import pytest

from starling.node.params import ConfigError
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.evaluation.evaluate import evaluate, ground_truth
from starling.orchestrator.evaluation.schedule import (
    AUTO_EVERY_FLOPS,
    resolve_schedule,
    scored_rounds,
)
from starling.orchestrator.planning.plan import plan_run
from starling.orchestrator.results.study_tables import read_curves
from starling.orchestrator.results.write import write_results


def _raw(dim: int, chains: int, rounds: int, evaluation: dict) -> dict:
    return {
        "name": "w2-schedule",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 1e-3},
        "model": {"name": "linear_regression", "params": {"dim": dim, "prior_var": 10.0}},
        "data": {"source": "synthetic", "size": 60, "seed": 3},
        "topology": {"kind": "ring", "nodes": 3},
        "rounds": rounds,
        "chains": chains,
        "evaluation": {"diagnostics": False, **evaluation},
    }


def _plan(dim: int, chains: int, rounds: int, **evaluation):
    return plan_run(parse_experiment(_raw(dim, chains, rounds, evaluation))).evaluation


def test_log_schedule_is_dense_early_and_keeps_the_final_window():
    got = scored_rounds(1000, 5, "log", 1)
    assert list(got[:-5]) == [0, 1, 3, 7, 15, 31, 62, 125, 250, 500]  # a round per doubling
    assert list(got[-5:]) == [995, 996, 997, 998, 999]
    finer = scored_rounds(1000, 1, "log", 3)
    assert np.all(np.diff(finer) > 0)
    assert 25 <= len(finer) <= 31  # ceil(3 log2 1000) + 1, less the first rounds rounded alike
    assert np.all(np.diff(np.diff(finer[1:])) >= 0)  # never denser later on
    # Short runs, where the schedule would score most rounds anyway: every round.
    assert list(scored_rounds(6, 2, "log", 1)) == list(range(6))
    assert list(scored_rounds(7, 1, "every", 2)) == list(range(7))
    assert scored_rounds(0, 1, "log", 4).size == 0


def test_auto_scores_every_round_only_while_a_set_is_cheap():
    assert resolve_schedule("auto", 100, 2) == "every"
    assert resolve_schedule("auto", 1000, 100) == "every"  # 1e7: the bound itself
    assert 1000 * 100 * 100 == AUTO_EVERY_FLOPS
    assert resolve_schedule("auto", 1000, 1000) == "log"
    assert resolve_schedule("every", 1000, 1000) == "every"
    assert resolve_schedule("log", 2, 2) == "log"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("w2_schedule", "sometimes", "evaluation.w2_schedule: expected one of auto, every, log"),
        ("w2_schedule", 3, "evaluation.w2_schedule: expected a string"),
        ("w2_per_doubling", 0, "evaluation.w2_per_doubling: must be at least 1"),
        ("w2_per_doubling", "many", "evaluation.w2_per_doubling"),
    ],
)
def test_a_bad_schedule_is_refused_in_one_line_naming_the_field(field, value, message):
    with pytest.raises(ConfigError) as caught:
        parse_experiment(_raw(3, 10, 20, {field: value}))
    text = str(caught.value)
    assert message in text and "\n" not in text


@pytest.mark.parametrize(("dim", "chains", "window"), [(70, 12, 3), (300, 40, 2), (4, 30, 1)])
def test_scored_rounds_equal_every_round_scoring(dim, chains, window):
    """Projected sets (chains < dim; from dim 129 by the blocked triangular product) and
    the d × d path; the average from the nodes'
    projections; a node diverged at a scored round; a node that stopped early (scored on
    its own schedule)."""
    rounds, points = 60, 1
    every = _plan(dim, chains, rounds, window=window, w2_schedule="every")
    logged = _plan(dim, chains, rounds, window=window, w2_schedule="log", w2_per_doubling=points)
    truth = ground_truth(every)
    assert truth is not None
    rng = np.random.default_rng([dim, chains, window])
    samples = {n: truth.mean + rng.standard_normal((rounds, chains, dim)) for n in ("0", "1")}
    samples["2"] = truth.mean + rng.standard_normal((33, chains, dim))  # stopped early
    scored = scored_rounds(rounds, window, "log", points)
    samples["1"][scored[3], 0, 0] = np.inf  # a scored round left the floats
    full, sparse = evaluate(every, samples), evaluate(logged, samples)
    assert full.curve_rounds is None
    assert sparse.metrics["w2"]["schedule"] == "log"
    assert full.metrics["w2"]["schedule"] == "every"
    assert sparse.metrics["w2"]["rounds_scored"] == len(sparse.curve_rounds)
    for name in ("0", "1", "average"):
        curve = sparse.curves[name]
        assert np.array_equal(curve[scored], full.curves[name][scored], equal_nan=True)
        assert np.isnan(np.delete(curve, scored)).all()
    assert np.isnan(sparse.curves["1"][scored[3]]) and np.isfinite(sparse.curves["0"]).sum() == len(
        scored
    )
    own = scored_rounds(33, window, "log", points)
    assert np.array_equal(sparse.curves["2"][own], full.curves["2"][own])
    assert np.isnan(np.delete(sparse.curves["2"], own)).all()
    assert np.array_equal(sparse.curve_rounds, np.union1d(scored, own))
    for key in ("average", "per_node", "node_mean"):
        assert sparse.metrics["w2"][key] == full.metrics["w2"][key]


def test_the_curve_file_holds_the_scored_rounds_and_reads_back_by_round(tmp_path):
    rounds, points = 50, 1
    plan = _plan(3, 8, rounds, w2_schedule="log", w2_per_doubling=points)
    truth = ground_truth(plan)
    assert truth is not None
    rng = np.random.default_rng(5)
    samples = {n: truth.mean + rng.standard_normal((rounds, 8, 3)) for n in ("0", "1", "2")}
    evaluation = evaluate(plan, samples)
    out = write_results(
        tmp_path / "out",
        plan.source,
        samples,
        {n: np.arange(rounds) for n in samples},
        evaluation,
    )
    lines = (out / "w2_curve.csv").read_text().splitlines()
    scored = scored_rounds(rounds, 1, "log", points)
    assert [int(line.split(",")[0]) for line in lines[1:]] == list(scored)
    read = read_curves(out / "w2_curve.csv")
    assert len(read["average"]) == rounds
    np.testing.assert_allclose(
        read["average"][scored], evaluation.curves["average"][scored], rtol=1e-5
    )
    assert np.isnan(np.delete(read["average"], scored)).all()
