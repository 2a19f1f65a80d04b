"""Every node that records samples is in ``samples_per_node``, with 0 when it recorded none
(a node that died before round 0 used to be left out, and its run called ``complete``);
roles that record none by design (a DG-LMC worker, an EC-SGHMC centre) are not listed."""

from __future__ import annotations

import numpy as np

from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.planning.plan import plan_run
from starling.orchestrator.results.account import Account
from starling.orchestrator.results.write import close_run, run_status

ROUNDS = 6


def _experiment(algorithm="d-sgld", hyperparameters=None, **fields):
    return parse_experiment(
        {
            "name": "zero",
            "algorithm": algorithm,
            "hyperparameters": hyperparameters or {"eta": 0.01},
            "model": {"name": "linear_regression", "params": {"dim": 2}},
            "data": {"source": "synthetic", "size": 10, "seed": 2},
            "topology": {"kind": "ring", "nodes": 4},
            "rounds": ROUNDS,
            "chains": 3,
            "seed": 1,
            **fields,
        }
    )


def _samples(nodes, rounds=ROUNDS):
    rng = np.random.default_rng(0)
    values = {n: rng.normal(size=(rounds, 3, 2)) for n in nodes}
    return values, {n: np.arange(rounds) for n in nodes}


def test_a_node_with_no_sample_is_listed_with_0_and_the_run_is_partial(tmp_path):
    experiment = _experiment()
    samples, rounds = _samples(["0", "2", "3"])  # node 1 died before round 0
    status = run_status(ROUNDS, samples, expected=experiment.sampling_nodes())
    assert status == "partial"
    metrics = close_run(
        plan_run(experiment).evaluation,
        tmp_path,
        samples,
        rounds,
        Account(lambda _line: None),
        {},
        "wall time 0 s",
        {"status": status},
        None,
    )
    assert metrics["samples_per_node"] == {"0": ROUNDS, "1": 0, "2": ROUNDS, "3": ROUNDS}
    assert list(metrics["w2"]["per_node"]) == ["0", "2", "3"]
    summary = (tmp_path / "summary.txt").read_text().splitlines()
    assert summary[0].startswith("verdict: "), summary  # the verdict leads, then the status
    assert next(line for line in summary if line.startswith("status: ")) == "status: partial"
    assert any(line.split() == ["1", "-", "0"] for line in summary), summary
    assert not (tmp_path / "samples" / "node-1.npz").exists()


def test_roles_that_record_no_samples_by_design_are_not_listed(tmp_path):
    experiment = _experiment(
        algorithm="dg-lmc",
        hyperparameters={"rho": 0.1, "gamma": 0.01},
        topology={"kind": "star", "nodes": 4},
    )
    assert experiment.sampling_nodes() == ("0",)  # the master; the workers record none
    samples, rounds = _samples(["0"])
    assert run_status(ROUNDS, samples, expected=experiment.sampling_nodes()) == "complete"
    metrics = close_run(
        plan_run(experiment).evaluation,
        tmp_path,
        samples,
        rounds,
        Account(lambda _line: None),
        {},
        "wall time 0 s",
        {"status": "complete"},
        None,
    )
    assert metrics["samples_per_node"] == {"0": ROUNDS}
