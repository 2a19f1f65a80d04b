"""``starling simulate`` end to end with the evaluation beyond W2: held-out predictive
metrics of a classifier (and, below, transport distances and MCMC diagnostics)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import yaml

from starling.orchestrator.evaluation.predictive import FIELDS
from tests.conftest import ROOT, run_cli

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
    curve = np.genfromtxt(
        out / "predictive_curve.csv", delimiter=",", names=True, dtype=None, encoding="utf-8"
    )
    assert set(curve["node"].astype(str)) == {"average", "0", "1", "2", "3"}
    last = curve["round"].max()
    assert last == 199
    # The curve starts at the chains' N(0, I)-ish start and ends where the final figures are.
    first = curve[(curve["node"].astype(str) == "average") & (curve["round"] == 0)]
    end = curve[(curve["node"].astype(str) == "average") & (curve["round"] == last)]
    assert end["predictive_log_loss"][0] < first["predictive_log_loss"][0]
    summary = (out / "summary.txt").read_text()
    assert "held-out 100 rows" in summary and "AUC" in summary


MIXTURE = {
    "name": "mixture",
    "algorithm": "d-ula",
    "model": {"name": "gaussian_mixture"},
    "data": {"source": "synthetic", "size": 20, "seed": 1},
    "topology": {"kind": "ring", "nodes": 5},
    "rounds": 600,
    "chains": 4,
    "seed": 3,
    "evaluation": {"window": 300},
}


def test_simulate_reports_sinkhorn_sliced_w2_ess_rhat_and_exports_netcdf(tmp_path, monkeypatch):
    import arviz as az

    monkeypatch.setenv("STARLING_CACHE_DIR", str(tmp_path / "cache"))
    file = tmp_path / "mixture.yaml"
    file.write_text(yaml.safe_dump(MIXTURE))
    out = tmp_path / "out"
    result = run_cli("simulate", str(file), "--out", str(out))
    assert result.returncode == 0, result.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert "w2" not in metrics  # no closed form: the distances are the figures
    distances = metrics["distances"]
    assert distances["reference"]["method"] == "grid"
    assert distances["reference"]["size"] == 2000 and not distances["reference"]["cached"]
    assert len(list((tmp_path / "cache" / "reference").glob("*.npz"))) == 1
    floor = distances["reference_floor"]
    for name, d in [("average", distances["average"]), *distances["per_node"].items()]:
        # D-ULA samples the mixture posterior up to its step-size bias: within 0.5 of the
        # reference (measured against the same reference: the samples of one mode alone
        # score 1.1-1.35, N(0, I), the chains' start, 1.0), and no closer than the reference
        # is to itself, which no sampler can beat (minus subsampling noise).
        assert floor["sinkhorn"] - 0.05 < d["sinkhorn"] < floor["sinkhorn"] + 0.5, name
        assert 0 < d["sliced_w2"] < 0.5, name
        # Every final figure is a mean over 10 subsample pairs, with its standard error
        # (tests/orchestrator/evaluation/test_distance_error.py holds it to the spread).
        assert d["repeats"] == 10 and 0 < d["sinkhorn_se"] < 0.05 and 0 < d["sliced_w2_se"] < 0.05
    curve = np.genfromtxt(
        out / "distance_curve.csv", delimiter=",", names=True, dtype=None, encoding="utf-8"
    )
    average = curve[curve["node"].astype(str) == "average"]
    assert average["round"][-1] == 599 and average["sinkhorn"][-1] < average["sinkhorn"][0]
    diagnostics = metrics["diagnostics"]
    assert diagnostics["burn_in"] == 300 and set(diagnostics["per_node"]) == set("01234")
    for node in diagnostics["per_node"].values():
        assert len(node["ess_bulk"]) == len(node["rhat"]) == 2
        assert node["ess_bulk_min"] > 0 and node["rhat_max"] >= 0.99
    summary = (out / "summary.txt").read_text()
    assert "Sinkhorn" in summary and "R-hat" in summary and "Sinkhorn ± se" in summary

    exported = run_cli("export", str(out), "--format", "netcdf", "--out", str(tmp_path / "p.nc"))
    assert exported.returncode == 0, exported.stderr
    posterior = az.from_netcdf(str(tmp_path / "p.nc")).posterior
    assert posterior["x"].dims == ("chain", "draw", "node", "param")
    assert posterior["x"].shape == (4, 600, 5, 2)
    assert posterior.attrs["algorithm"] == "d-ula"
    bad = run_cli("export", str(out), "--format", "zarr")
    assert bad.returncode == 2 and "--format" in bad.stderr and bad.stderr.count("\n") == 1


def test_start_up_imports_neither_pot_nor_arviz():
    """The heavy evaluation libraries load when a figure needs them, not when a run starts:
    parsing, the node specs, the runner and the evaluation modules leave them out."""
    script = (
        "import sys\n"
        "from starling.orchestrator.cli.main import _parser\n"
        "from starling.orchestrator.config.experiment import load_experiment\n"
        "from starling.orchestrator.planning.node_specs import node_specs\n"
        "import starling.orchestrator.execution.runner\n"
        "import starling.orchestrator.execution.simulation\n"
        "import starling.orchestrator.evaluation.evaluate\n"
        "_parser()\n"
        "node_specs(load_experiment('examples/quickstart.yaml'))\n"
        "heavy = {'ot', 'arviz', 'xarray', 'h5netcdf'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    _in_a_fresh_interpreter(script)


def _in_a_fresh_interpreter(script: str) -> str:
    """Run ``script`` in a new Python (nothing imported yet) from the repository's root;
    its standard output, once it has succeeded."""
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_gaussian_runs_evaluation_imports_no_scipy():
    """Importing scipy's special functions took about 0.2 s, which every run's evaluation
    paid for a normal quantile table, an FFT length and one Student t quantile (the
    verdict's): the evaluation of a model with an exact posterior, its diagnostics and
    verdict included, now needs numpy and the standard library only."""
    script = (
        "import sys\n"
        "import numpy as np\n"
        "from starling.orchestrator.config.experiment import load_experiment\n"
        "from starling.orchestrator.planning.plan import plan_run\n"
        "from starling.orchestrator.evaluation.evaluate import evaluate\n"
        "plan = plan_run(load_experiment('examples/quickstart.yaml')).evaluation\n"
        "rng = np.random.default_rng(0)\n"
        "samples = {n: rng.standard_normal((plan.rounds, plan.chains, 2))\n"
        "           for n in plan.sampling_nodes}\n"
        "metrics = evaluate(plan, samples).metrics\n"
        "assert metrics['verdict']['run'] and metrics['diagnostics'], metrics.keys()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))\n"
    )
    assert _in_a_fresh_interpreter(script).strip() == "[]"


def test_a_file_split_holds_out_the_same_rows_over_grpc_as_in_process(tmp_path, starling_home):
    """``run`` (real node processes, the split travelling in each node's DataSpec) and
    ``simulate`` train on the same rows and score the same held-out rows: their samples
    are bit-identical, so are their predictive figures."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(120, 2)) * 3.0
    y = (rng.random(120) < 1.0 / (1.0 + np.exp(-(X @ np.array([1.5, -1.0]))))).astype(int)
    data = tmp_path / "rows.csv"
    np.savetxt(data, np.column_stack([X, y]), delimiter=",", fmt="%.6f")
    experiment = {
        "name": "split-over-grpc",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.002},
        "model": {"name": "logistic_regression", "params": {"features": 2}},
        "data": {"source": "file", "path": str(data), "partition": "random", "seed": 2},
        "topology": {"kind": "ring", "nodes": 3},
        "rounds": 40,
        "chains": 4,
        "seed": 5,
        "round_deadline": 10.0,
        "evaluation": {"window": 20, "test": {"split": 0.25, "seed": 3}, "diagnostics": False},
    }
    file = tmp_path / "split.yaml"
    file.write_text(yaml.safe_dump(experiment))
    figures = {}
    for mode in ("run", "simulate"):
        out = tmp_path / mode
        result = run_cli(mode, str(file), "--out", str(out), env_home=starling_home)
        assert result.returncode == 0, result.stderr
        figures[mode] = json.loads((out / "metrics.json").read_text())["predictive"]
        for node in "012":
            with np.load(out / "samples" / f"node-{node}.npz") as stored:
                figures[mode][f"samples-{node}"] = stored["samples"].tobytes()
    assert figures["run"]["test"] == {"split": 0.25, "seed": 3, "rows": 30}
    assert figures["run"] == figures["simulate"]
