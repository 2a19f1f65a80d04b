"""A node restarted idle on its state dir serves a stored run over gRPC without being
configured (``SamplesRequest.experiment``/``node_id``): how the orchestrator collects what
a node that is down for good stored, without ever opening the node's files."""

from __future__ import annotations

import signal

import numpy as np
import pytest

from starling.node.params import ConfigError
from starling.node.runtime.archive import run_directory
from starling.node.runtime.runtime import SAMPLES_FILE
from starling.orchestrator.execution.client import NodeUnavailable
from starling.orchestrator.planning.node_specs import node_specs
from tests.node.test_runtime_harness import Cluster, ring_experiment, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture
def cluster(tmp_path):
    with Cluster(tmp_path) as c:
        yield c


def test_a_killed_node_started_idle_streams_its_stored_run(cluster):
    rounds = 12
    procs = cluster.start_nodes(["0", "1", "2"])
    experiment = ring_experiment("stored-run", rounds=rounds, deadline=2.0)
    specs = {s.node_id: s for s in node_specs(experiment, {n: p.address for n, p in procs.items()})}
    clients = {n: p.client() for n, p in procs.items()}
    for node, client in clients.items():
        client.wait_ready()
        client.configure(specs[node])
    for client in clients.values():
        client.start()
    wait_until(lambda: all(c.status().state == "done" for c in clients.values()), 60, "done")
    stored = list(clients["1"].samples())
    assert [r for r, _ in stored] == list(range(rounds))

    victim = procs["1"]
    victim.signal(signal.SIGKILL)
    victim.process.wait(timeout=10)
    # A torn last record (killed inside a write) is not served (nor cut: see below).
    store_file = run_directory(victim.state_dir, "stored-run", "1") / SAMPLES_FILE
    with open(store_file, "ab") as raw:
        raw.write(b"SMPL\x01\x02")
    reborn = cluster.ready(cluster.launch("1", state_dir=victim.state_dir))
    client = reborn.client()
    client.wait_ready()
    assert client.status().state == "idle"
    assert list(client.samples()) == []  # not configured: no run of its own

    served = list(client.samples(stored_run=("stored-run", "1")))
    assert [r for r, _ in served] == list(range(rounds))
    for (r0, v0), (r1, v1) in zip(stored, served, strict=True):
        assert r0 == r1 and np.array_equal(v0, v1)
    tail = list(client.samples(offset=7, stored_run=("stored-run", "1")))
    assert [r for r, _ in tail] == list(range(7, rounds))
    assert client.status().state == "idle"  # serving the store configured nothing

    with pytest.raises(NodeUnavailable, match="NOT_FOUND.*'other'"):
        list(client.samples(stored_run=("other", "1")))
    with pytest.raises(NodeUnavailable, match="NOT_FOUND"):  # no file can have that name
        list(client.samples(stored_run=("x" * 300, "1")))
    # A store damaged beyond a torn end is data lost, said without the node's paths.
    damaged = run_directory(victim.state_dir, "damaged", "1")
    damaged.mkdir(parents=True)
    (damaged / SAMPLES_FILE).write_bytes(b"garbage" * 100)
    with pytest.raises(NodeUnavailable, match="DATA_LOSS.*'damaged'.*: damaged") as lost:
        list(client.samples(stored_run=("damaged", "1")))
    assert str(victim.state_dir) not in str(lost.value)
    with pytest.raises(ConfigError, match="follow"):
        list(client.samples(follow=True, stored_run=("stored-run", "1")))


def test_a_configured_node_asked_for_its_own_run_streams_it_as_usual(cluster):
    (proc,) = cluster.start_nodes(["0"]).values()
    experiment = ring_experiment(
        "own-run", rounds=5, deadline=1.0, topology={"kind": "none", "nodes": 1}
    )
    (spec,) = node_specs(experiment, {"0": proc.address})
    client = proc.client()
    client.wait_ready()
    client.configure(spec)
    client.start()
    wait_until(lambda: client.status().state == "done", 60, "done")
    mine = list(client.samples(stored_run=("own-run", "0")))
    assert [r for r, _ in mine] == list(range(5))
    assert [r for r, _ in mine] == [r for r, _ in client.samples()]


@pytest.mark.parametrize("cut", ["in the header", "in the payload"])
def test_a_stored_run_with_a_torn_last_record_is_served_whole_and_left_as_it_is(cluster, cut):
    """A node killed inside a write leaves its last record half written. Served as a stored
    run it once cut that record off the file (reading changed the store); now the file is
    left byte for byte, every whole record before the torn one is streamed, the torn one
    is not, and nothing fails — however often, from whatever offset, it is read."""
    rounds = 6
    (proc,) = cluster.start_nodes(["0"]).values()
    experiment = ring_experiment(
        "torn", rounds=rounds, deadline=1.0, topology={"kind": "none", "nodes": 1}
    )
    (spec,) = node_specs(experiment, {"0": proc.address})
    client = proc.client()
    client.wait_ready()
    client.configure(spec)
    client.start()
    wait_until(lambda: client.status().state == "done", 60, "done")
    whole = list(client.samples())
    assert [r for r, _ in whole] == list(range(rounds))
    proc.signal(signal.SIGKILL)
    proc.process.wait(timeout=10)

    store_file = run_directory(proc.state_dir, "torn", "0") / SAMPLES_FILE
    data = store_file.read_bytes()
    record = len(data) // rounds  # every record the same size: (chains, d) float64
    keep = len(data) - record + (10 if cut == "in the header" else record // 2)
    store_file.write_bytes(data[:keep])
    reborn = cluster.ready(cluster.launch("0", state_dir=proc.state_dir))
    client = reborn.client()
    client.wait_ready()
    for _ in range(2):
        served = list(client.samples(stored_run=("torn", "0")))
        assert [r for r, _ in served] == list(range(rounds - 1))
        for (r0, v0), (r1, v1) in zip(whole, served, strict=False):
            assert r0 == r1 and np.array_equal(v0, v1)
    assert [r for r, _ in client.samples(offset=3, stored_run=("torn", "0"))] == [3, 4]
    assert list(client.samples(offset=rounds - 1, stored_run=("torn", "0"))) == []
    assert store_file.read_bytes() == data[:keep]  # read, never written
    assert client.status().state == "idle"
