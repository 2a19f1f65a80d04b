"""D-SGHMC, D-ULA and a centralised reference on real node processes equal the simulator.

The samplers are pure programs driven identically by the simulator and the gRPC runtime
(DESIGN principle 1); this runs each on real ``python -m starling.node serve`` processes and
compares the collected samples byte for byte with :func:`starling.node.engine.simulate`.
"""

from __future__ import annotations

import numpy as np
import pytest

from starling.node.engine import simulate
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.planning.node_specs import node_specs
from tests.node.test_runtime_harness import Cluster, start_run, wait_done


def _experiment(algorithm, hyper, topology, nodes):
    return parse_experiment(
        {
            "name": f"{algorithm}-wire",
            "algorithm": algorithm,
            "hyperparameters": hyper,
            "model": {"name": "linear_regression", "params": {"dim": 2}},
            "data": {"source": "synthetic", "size": 20, "seed": 5},
            "topology": {"kind": topology, "nodes": nodes},
            "rounds": 20,
            "chains": 3,
            "seed": 13,
            "round_deadline": 20.0,  # never reached: every message is used
        }
    )


def _collect(procs, specs):
    clients = start_run(procs, specs)
    wait_done(clients, 60)
    out = {}
    for node, client in clients.items():
        assert client.status().error == "", node
        out[node] = np.stack([value for _, value in client.samples()])
    return out


@pytest.fixture(scope="module")
def processes(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("nodes")) as cluster:
        yield cluster.start_nodes(["0", "1", "2"])


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("algorithm", "hyper", "topology", "nodes"),
    [
        ("d-sghmc", {}, "ring", 3),
        ("d-ula", {"a": 0.01, "b": 0.3, "delta1": 0.0, "delta2": 0.6, "k0": 0}, "ring", 3),
        ("mala", {"step": 0.05}, "none", 1),
    ],
)
def test_network_run_equals_simulation_bit_for_bit(processes, algorithm, hyper, topology, nodes):
    experiment = _experiment(algorithm, hyper, topology, nodes)
    addresses = {n: processes[n].address for n in experiment.node_ids}
    specs = node_specs(experiment, addresses)
    collected = _collect(processes, specs)
    expected = simulate(specs)
    for node in experiment.node_ids:
        assert collected[node].shape == expected[node].shape == (20, 3, 2)
        assert collected[node].tobytes() == expected[node].tobytes(), node
