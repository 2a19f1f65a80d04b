"""Predictive metrics against values worked out by hand, and the held-out split's contract:
the rows the orchestrator scores on are exactly the rows no node trains on."""

from __future__ import annotations

import numpy as np
import pytest

from starling.node.data.shards import load_shard
from starling.node.data.split import held_out, training_rows
from starling.node.models import build_model
from starling.node.models.classification import log_loss, roc_auc
from starling.node.params import ConfigError
from starling.node.protocol import convert
from starling.node.protocol.starling.v1 import control_pb2
from starling.node.spec import ModelSpec
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.evaluation.heldout import held_out_data
from starling.orchestrator.evaluation.predictive import curve_rounds, score_samples
from starling.orchestrator.planning.node_specs import node_specs
from starling.orchestrator.planning.plan import plan_run


def test_auc_of_a_fixed_score_vector_is_the_hand_count():
    # Positives score 0.9, 0.4, 0.4; negatives 0.5, 0.4, 0.1. Of the 9 (positive, negative)
    # pairs the positive is above in: 0.9 beats all 3; each 0.4 beats 0.1 and ties 0.4
    # (½ each): 1.5 + 1.5. Total 6 of 9.
    scores = np.array([0.9, 0.4, 0.4, 0.5, 0.4, 0.1])
    labels = np.array([1, 1, 1, 0, 0, 0])
    assert roc_auc(scores, labels) == pytest.approx(6 / 9, abs=1e-15)
    assert roc_auc(-scores, labels) == pytest.approx(3 / 9, abs=1e-15)


def test_log_loss_of_known_probabilities():
    proba = np.array([[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]])
    labels = np.array([1, 1, 0])
    expected = -(np.log(0.8) + np.log(0.4) + np.log(0.5)) / 3
    assert float(log_loss(proba, labels)) == pytest.approx(expected, rel=1e-14)


def test_predictive_and_per_sample_scores_differ_as_defined():
    # One feature, no intercept: p(y=1 | z, x) = σ(x z). Sample +5 is right on every row, -5
    # wrong on every row: per-sample accuracy averages 1 and 0; the predictive average is
    # σ(5z)/2 + σ(-5z)/2 = ½ on every row, a tie argmax takes class 0.
    model = build_model(ModelSpec("logistic_regression", {"features": 1}))
    X = np.array([[1.0], [2.0], [-1.0], [-3.0]])
    labels = np.array([1, 1, 0, 0])
    scores = score_samples(model, np.array([[5.0], [-5.0]]), X, labels)
    assert scores["sample_accuracy"] == pytest.approx(0.5)
    assert scores["sample_accuracy_std"] == pytest.approx(0.5)
    assert scores["sample_auc"] == pytest.approx(0.5)  # AUC 1 and AUC 0
    assert scores["predictive_log_loss"] == pytest.approx(np.log(2.0), rel=1e-12)
    assert scores["predictive_accuracy"] == pytest.approx(0.5)  # argmax ties -> class 0
    one = score_samples(model, np.array([[5.0]]), X, labels)
    assert one["predictive_accuracy"] == one["sample_accuracy"] == 1.0
    assert one["predictive_auc"] == 1.0


def test_curve_rounds_are_bounded_evenly_spread_and_end_at_the_last():
    assert curve_rounds(5, 100).tolist() == [0, 1, 2, 3, 4]
    picked = curve_rounds(1000, 10)
    assert len(picked) == 10 and picked[0] == 0 and picked[-1] == 999


def test_held_out_is_a_pure_function_of_rows_fraction_and_seed():
    a = held_out(1000, 0.2, 7)
    assert a.sum() == 200
    assert np.array_equal(a, held_out(1000, 0.2, 7))
    assert not np.array_equal(a, held_out(1000, 0.2, 8))
    assert np.array_equal(training_rows(1000, 0.2, 7), np.flatnonzero(~a))
    assert held_out(10, 0.0, 1).sum() == 0


def _file_experiment(path, partition, split=0.25, nodes=3):
    return parse_experiment(
        {
            "algorithm": "d-sgld",
            "model": {"name": "logistic_regression", "params": {"features": 2}},
            "data": {"source": "file", "path": str(path), "partition": partition, "seed": 9},
            "topology": {"kind": "ring", "nodes": nodes},
            "rounds": 2,
            "evaluation": {"test": {"split": split, "seed": 4}},
        }
    )


@pytest.mark.parametrize("partition", ["interleaved", "random"])
def test_split_test_rows_are_in_no_shard_and_every_other_row_is_in_one(tmp_path, partition):
    rows = 41
    table = np.column_stack([np.arange(rows), np.arange(rows) * 10.0, np.arange(rows) % 2])
    path = tmp_path / "d.csv"
    np.savetxt(path, table, delimiter=",", fmt="%g")
    experiment = _file_experiment(path, partition)
    model = build_model(experiment.model)
    specs = node_specs(experiment)
    shards = [load_shard(s.data, model).X[:, 0] for s in specs]
    test, described = held_out_data(plan_run(experiment).evaluation, model)
    held = set(test.X[:, 0].tolist())
    assert described == {"split": 0.25, "seed": 4, "rows": 10}
    trained = [set(s.tolist()) for s in shards]
    assert all(not (held & t) for t in trained)
    assert set().union(*trained) | held == set(range(rows))
    assert sum(len(t) for t in trained) == rows - len(held)
    # The split travels to a networked node in its DataSpec, unchanged.
    for spec in specs:
        wire = convert.spec_to_config(spec).SerializeToString()
        assert convert.config_to_spec(control_pb2.NodeConfig.FromString(wire)) == spec
        assert spec.data.test_fraction == 0.25 and spec.data.test_seed == 4


def test_a_synthetic_split_is_a_fresh_draw_of_the_stated_size():
    experiment = parse_experiment(
        {
            "algorithm": "d-sgld",
            "model": {"name": "logistic_regression"},
            "data": {"source": "synthetic", "size": 30, "seed": 2},
            "topology": {"kind": "ring", "nodes": 4},
            "rounds": 2,
            "evaluation": {"test": {"split": 0.2, "seed": 1}},
        }
    )
    model = build_model(experiment.model)
    test, described = held_out_data(plan_run(experiment).evaluation, model)
    assert described["rows"] == 30 == len(test)  # 0.2 / 0.8 × 4 × 30
    shards = [load_shard(s.data, model).X for s in node_specs(experiment)]
    assert not any(np.isin(test.X[:, 0], s[:, 0]).any() for s in shards)
    assert all(s.data.test_fraction == 0.0 for s in node_specs(experiment))


@pytest.mark.parametrize(
    ("evaluation", "model", "message"),
    [
        ({"test": {"split": 0.2}}, "linear_regression", "evaluation.test: model"),
        ({"test": {"split": 0.2, "path": "x.csv"}}, "logistic_regression", "exactly one"),
        ({"test": {}}, "logistic_regression", "exactly one"),
        ({"test": {"split": 1.0}}, "logistic_regression", "evaluation.test.split"),
        ({"burn_in": 5}, "logistic_regression", "evaluation.burn_in"),
        ({"reference": {"method": "grid"}}, "logistic_regression", "no grid reference"),
        ({"reference": {"method": "hmc"}}, "logistic_regression", "unknown method 'hmc'"),
    ],
)
def test_bad_evaluation_sections_are_one_line_naming_the_field(evaluation, model, message):
    with pytest.raises(ConfigError, match=message) as error:
        parse_experiment(
            {
                "algorithm": "d-sgld",
                "model": {"name": model},
                "rounds": 5,
                "topology": {"kind": "ring", "nodes": 3},
                "evaluation": evaluation,
            }
        )
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("name", "content", "fmt", "message"),
    [
        ("missing.csv", None, "", r"evaluation\.test\.path: no such file"),
        ("folder.csv", "", "", r"evaluation\.test\.path: '.*folder\.csv' is a directory"),
        ("ragged.csv", "1,2,1\n3,4\n", "", r"evaluation\.test\.path: '.*ragged\.csv' line 2"),
        ("wide.csv", "1,2,3,1\n", "", r"evaluation\.test\.path: .* 3 feature columns"),
        ("test.csv", "1,2,1\n", "parquet", r"evaluation\.test\.format: unknown format"),
        ("mystery", "hello\n", "", r"evaluation\.test\.format: cannot tell the format"),
        ("nan.libsvm", "1 1:nan\n", "", r"evaluation\.test\.path: .*NaN"),
    ],
)
def test_a_bad_test_file_is_named_as_evaluation_test(tmp_path, name, content, fmt, message):
    """The test file was read by the training data's loader, whose errors said data.path:
    the user was sent to a training file that was fine."""
    path = tmp_path / name
    if content == "":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    experiment = parse_experiment(
        {
            "algorithm": "d-sgld",
            "model": {"name": "logistic_regression", "params": {"features": 2}},
            "data": {"source": "synthetic", "size": 10, "seed": 2},
            "topology": {"kind": "ring", "nodes": 3},
            "rounds": 2,
            "evaluation": {"test": {"path": str(path), "format": fmt}},
        }
    )
    with pytest.raises(ConfigError, match=f"^{message}") as error:
        held_out_data(plan_run(experiment).evaluation, build_model(experiment.model))
    assert "data.path" not in str(error.value) and "data.format" not in str(error.value)


def test_a_ten_class_mlp_scores_accuracy_and_log_loss_but_no_auc():
    model = build_model(ModelSpec("mlp", {"hidden": 4}))
    rng = np.random.default_rng(0)
    X = rng.random((30, 64))
    labels = np.arange(30) % 10
    scores = score_samples(model, rng.normal(size=(3, model.dim)), X, labels)
    assert "predictive_auc" not in scores and "sample_auc" not in scores
    assert 0.0 <= scores["predictive_accuracy"] <= 1.0
    # Uniform guessing scores ln 10 ≈ 2.30; the log-loss is a mean of -log p ≥ 0.
    assert scores["predictive_log_loss"] > 0.0
