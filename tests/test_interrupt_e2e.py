"""Ctrl-C during ``starling run`` on real nodes: their rounds stop first, then every sample
they stored is collected (``orchestrator/halt.py``).

Before, the orchestrator collected while the nodes went on sampling, then stopped them: a
local run's ``samples/`` held tens of rounds fewer than its nodes' stores (which no command
recovers: ``collect`` refuses a run that ended), and the nodes of an inventory were not
stopped at all — they ran the abandoned experiment to its last round.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from starling.orchestrator.client import NodeClient
from tests.node.test_runtime_harness import Cluster
from tests.test_collect_e2e import _stored
from tests.test_live_cli_e2e import LiveRun, _ring

pytestmark = pytest.mark.e2e


def _interrupted(run: LiveRun) -> None:
    run.wait_started(min_round=5)
    assert run.interrupt() == 130, run.output()
    assert run.metrics()["status"] == "interrupted"


def test_an_interrupted_local_run_keeps_every_sample_its_nodes_stored(tmp_path, starling_home):
    raw = _ring("interrupted-local", rounds=100_000, chains=3, round_deadline=1.0)
    with LiveRun(tmp_path, starling_home, raw) as run:
        _interrupted(run)
    start = json.loads((run.out / "start.json").read_text())
    for node, (rounds, values) in _stored(run.out, start).items():
        with np.load(run.out / "samples" / f"node-{node}.npz") as got:
            assert len(got["rounds"]) == len(rounds), f"node {node}: stored samples left out"
            np.testing.assert_array_equal(got["rounds"], rounds)
            np.testing.assert_array_equal(got["samples"], values)


def test_an_interrupted_run_stops_the_rounds_of_inventory_nodes(tmp_path, starling_home):
    nodes = ("a", "b", "c")
    with Cluster(tmp_path) as cluster:
        procs = {n: cluster.launch(n, extra=["--id", n]) for n in nodes}
        inventory = {n: cluster.ready(p).address for n, p in procs.items()}
        raw = _ring("interrupted-inventory", rounds=100_000, chains=3, round_deadline=1.0,
                    topology={"kind": "ring"}, nodes=[{"id": n} for n in nodes],
                    backend={"kind": "inventory", "nodes": inventory})  # fmt: skip
        with LiveRun(tmp_path, starling_home, raw) as run:
            _interrupted(run)
        for node, address in inventory.items():
            assert procs[node].process.poll() is None, "the inventory node was stopped"
            with NodeClient(address) as client:
                status = client.status()
            assert status.state.value == "stopped", f"node {node} still {status.state}"
            with np.load(run.out / "samples" / f"node-{node}.npz") as got:
                assert len(got["rounds"]) == status.samples_stored
