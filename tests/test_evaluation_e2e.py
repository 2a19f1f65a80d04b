"""``starling simulate`` end to end with the evaluation beyond W2: held-out predictive
metrics of a classifier (and, below, transport distances and ArviZ diagnostics)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from orchestrator.predictive import FIELDS
from tests.conftest import run_cli

pytestmark = pytest.mark.e2e

LOGISTIC = {
    "name": "logistic-split",
    "algorithm": "d-sgld",
    "hyperparameters": {"eta": 0.002},
    "model": {"name": "logistic_regression", "params": {"features": 3, "truth_seed": 0}},
    "data": {"source": "synthetic", "size": 100, "seed": 3},
    "topology": {"kind": "ring", "nodes": 4},
    "rounds": 200,
    "chains": 8,
    "seed": 5,
    "evaluation": {"window": 50, "test": {"split": 0.2, "seed": 1}},
}


def test_simulate_reports_held_out_accuracy_auc_and_log_loss(tmp_path):
    file = tmp_path / "logistic.yaml"
    file.write_text(yaml.safe_dump(LOGISTIC))
    out = tmp_path / "out"
    result = run_cli("simulate", str(file), "--out", str(out))
    assert result.returncode == 0, result.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    predictive = metrics["predictive"]
    assert predictive["test"] == {"split": 0.2, "seed": 1, "rows": 100}  # 0.2/0.8 × 400
    assert set(predictive["per_node"]) == {"0", "1", "2", "3"}
    fields = set(FIELDS)
    every = [predictive["average"], predictive["node_mean"], *predictive["per_node"].values()]
    for scores in every:
        assert set(scores) == fields
        # Chance is the majority class's share, at most ~0.6 for these 100 rows (the true
        # x is a prior draw; z ~ N(0, 20 I) makes |xᵀz| large, so labels are nearly
        # deterministic: the Bayes accuracy is ~0.97). A posterior that learnt anything
        # scores far above chance; 0.85 leaves room for Monte-Carlo noise of 100 rows.
        assert scores["predictive_accuracy"] > 0.85
        assert scores["predictive_auc"] > 0.9
        assert 0 < scores["predictive_log_loss"] < 0.4  # ln 2 ≈ 0.69 is a coin
    curve = np.genfromtxt(out / "predictive_curve.csv", delimiter=",", names=True, dtype=None,
                          encoding="utf-8")  # fmt: skip
    assert set(curve["node"].astype(str)) == {"average", "0", "1", "2", "3"}
    last = curve["round"].max()
    assert last == 199
    # The curve starts at the chains' N(0, I)-ish start and ends where the final figures are.
    first = curve[(curve["node"].astype(str) == "average") & (curve["round"] == 0)]
    end = curve[(curve["node"].astype(str) == "average") & (curve["round"] == last)]
    assert end["predictive_log_loss"][0] < first["predictive_log_loss"][0]
    summary = (out / "summary.txt").read_text()
    assert "held-out 100 rows" in summary and "AUC" in summary
