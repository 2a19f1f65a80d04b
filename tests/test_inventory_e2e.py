"""``starling run --inventory``: nodes started by hand (``starling node serve``, real
processes on loopback) driven by the inventory backend, then reused by a second run.

With their own data (``--shard k --data-seed 5 --data-size 20``) and ``data: {source:
node}``, the nodes hold exactly the shards ``data: {source: synthetic, seed: 5, size: 20}``
gives, so the run's samples must equal ``starling simulate`` of that experiment byte for
byte (synchronous sampler), and its W2 figures with them.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from starling.orchestrator.core.errors import BackendError
from starling.orchestrator.execution.backends.inventory import InventoryBackend
from tests.conftest import run_cli
from tests.node.test_runtime_harness import Cluster

pytestmark = pytest.mark.e2e

NODES = ("a", "b", "c")


def _experiment(tmp_path, data: dict) -> dict:
    return {
        "name": "by-hand",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.01},
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "data": data,
        "nodes": [{"id": n} for n in NODES],
        "topology": {"kind": "ring"},
        "rounds": 30,
        "chains": 4,
        "seed": 2,
        "round_deadline": 5.0,
    }


def _write(path, content) -> str:
    path.write_text(yaml.safe_dump(content))
    return str(path)


def test_run_drives_nodes_started_by_hand_and_leaves_them_reusable(tmp_path, starling_home):
    with Cluster(tmp_path) as cluster:
        procs = {
            node: cluster.launch(
                node,
                extra=["--id", node, "--shard", str(k), "--data-seed", "5", "--data-size", "20"],
            )
            for k, node in enumerate(NODES)
        }
        inventory = {"nodes": {n: cluster.ready(p).address for n, p in procs.items()}}
        inventory_file = _write(tmp_path / "nodes.yaml", inventory)
        experiment = _write(tmp_path / "exp.yaml", _experiment(tmp_path, {"source": "node"}))
        twin = _write(
            tmp_path / "twin.yaml",
            _experiment(tmp_path, {"source": "synthetic", "seed": 5, "size": 20}),
        )

        runs = []
        for attempt in ("first", "second"):  # the nodes outlive a run and serve the next
            out = tmp_path / attempt
            done = run_cli(
                "run",
                experiment,
                "--inventory",
                inventory_file,
                "--out",
                str(out),
                env_home=starling_home,
                timeout=300,
            )
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            runs.append(out)
        assert all(p.process.poll() is None for p in procs.values()), "a node was stopped"

    sim = tmp_path / "sim"
    done = run_cli("simulate", twin, "--out", str(sim), env_home=starling_home)
    assert done.returncode == 0, done.stderr
    expected = json.loads((sim / "metrics.json").read_text())
    for out in runs:
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["backend"] == "inventory"
        assert metrics["w2"] == expected["w2"]
        for node in NODES:
            with (
                np.load(out / "samples" / f"node-{node}.npz") as got,
                np.load(sim / "samples" / f"node-{node}.npz") as want,
            ):
                assert np.array_equal(got["samples"], want["samples"]), node
        assert yaml.safe_load((out / "experiment.yaml").read_text())["backend"]["kind"] == (
            "inventory"
        )


def test_a_missing_node_is_named_after_the_timeout(tmp_path, starling_home):
    with Cluster(tmp_path) as cluster:
        up = cluster.ready(cluster.launch("a", extra=["--shard", "0"]))
        with cluster_free_port() as nowhere, cluster_free_port() as elsewhere:
            inventory = {
                "nodes": {"a": up.address, "b": elsewhere, "c": nowhere},
                "ready_timeout": 2,
            }
        inventory_file = _write(tmp_path / "nodes.yaml", inventory)
        experiment = _write(tmp_path / "exp.yaml", _experiment(tmp_path, {"source": "node"}))
        done = run_cli(
            "run",
            experiment,
            "--inventory",
            inventory_file,
            "--out",
            str(tmp_path / "out"),
            env_home=starling_home,
            timeout=120,
        )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("starling: inventory: no healthy node after 2 s: b at ")
    assert f"c at {nowhere} (unavailable: connection refused" in lines[0]
    assert "a at" not in lines[0]


def test_an_experiment_node_missing_from_the_inventory_is_named(tmp_path, starling_home):
    inventory_file = _write(tmp_path / "nodes.yaml", {"nodes": {"a": "127.0.0.1:1"}})
    experiment = _write(tmp_path / "exp.yaml", _experiment(tmp_path, {"source": "node"}))
    done = run_cli(
        "run",
        experiment,
        "--inventory",
        inventory_file,
        "--out",
        str(tmp_path / "out"),
        env_home=starling_home,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "starling: inventory: node 'b' of the experiment has no address (the inventory lists a)"
    )


@pytest.mark.parametrize("address", ["127.0.0.1:99999", "127.0.0.1:0", ":50051", "host"])
def test_an_address_no_node_can_have_is_refused_at_once(tmp_path, starling_home, address):
    nodes = {"a": address, "b": "127.0.0.1:1", "c": "127.0.0.1:2"}
    inventory_file = _write(tmp_path / "nodes.yaml", {"nodes": nodes})
    experiment = _write(tmp_path / "exp.yaml", _experiment(tmp_path, {"source": "node"}))
    done = run_cli(
        "run",
        experiment,
        "--inventory",
        inventory_file,
        "--out",
        str(tmp_path / "out"),
        env_home=starling_home,
        timeout=30,
    )
    assert done.returncode == 2, done.stderr
    # "expected HOST:PORT" or "expected a port from 1 to 65535 after the last ':'".
    assert "backend.nodes.a: expected " in done.stderr and repr(address) in done.stderr


def test_an_address_listed_for_two_nodes_is_refused_at_once(tmp_path, starling_home):
    """Before, a node started without --id (the docker image's default config has none)
    was configured as a, then taken over as b, and left running b's broken run, with a
    line about a node that 'cannot start while running'."""
    nodes = {"a": "127.0.0.1:50999", "b": "127.0.0.1:50998", "c": "127.0.0.1:50999"}
    inventory_file = _write(tmp_path / "nodes.yaml", {"nodes": nodes, "ready_timeout": 2})
    experiment = _write(tmp_path / "exp.yaml", _experiment(tmp_path, {"source": "node"}))
    done = run_cli(
        "run",
        experiment,
        "--inventory",
        inventory_file,
        "--out",
        str(tmp_path / "out"),
        env_home=starling_home,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "starling: backend.nodes: a and c are both at 127.0.0.1:50999; each node needs an "
        "address of its own"
    )


def test_remote_nodes_cannot_be_killed_or_restarted():
    backend = InventoryBackend({"a": "10.1.2.3:50051"})
    with pytest.raises(BackendError, match=r"^node a at 10.1.2.3:50051 runs outside Starling"):
        backend.kill("a")
    with pytest.raises(BackendError, match="cannot be restarted from here"):
        backend.restart("a")
    assert backend.alive("a") is None


def cluster_free_port():
    """A loopback address nobody listens on (the port is released before use)."""
    import contextlib
    import socket

    @contextlib.contextmanager
    def free():
        with socket.socket() as spare:
            spare.bind(("127.0.0.1", 0))
            address = f"127.0.0.1:{spare.getsockname()[1]}"
        yield address

    return free()


def test_live_commands_on_inventory_nodes(tmp_path, starling_home):
    """Live link commands work on nodes the run did not start; a live kill cannot reach
    them and says so in one line, and the run goes on."""
    from tests.test_live_cli_e2e import LiveRun

    with Cluster(tmp_path) as cluster:
        procs = {
            node: cluster.launch(node, extra=["--id", node, "--shard", str(k)])
            for k, node in enumerate(NODES)
        }
        inventory = {n: cluster.ready(p).address for n, p in procs.items()}
        raw = {
            **_experiment(tmp_path, {"source": "node"}),
            "name": "live-inventory",
            "rounds": 400,
            "link_delay": "20ms",
            "backend": {"kind": "inventory", "nodes": inventory},
        }
        with LiveRun(tmp_path, starling_home, raw) as run:
            run.wait_started(min_round=2)
            killed = run_cli("nodes", "kill", "a", env_home=starling_home, timeout=120)
            assert killed.returncode == 2
            assert killed.stderr.strip().splitlines() == [
                f"starling: nodes kill a: node a at {inventory['a']} runs outside Starling "
                "(inventory backend): it cannot be killed from here"
            ]
            # The refused kill leaves a as it was: not held before its next round, running on
            # (it was once left holding there for good, and the run stalled).
            at = run.status()["nodes"]["a"]["round"]
            run.wait_for(
                lambda s: not s["nodes"]["a"]["holding"] and s["nodes"]["a"]["round"] > at + 3,
                "a running on after the refused kill",
            )
            run.cli("links", "cut", "a", "b")
            run.wait_for(lambda s: s["links"]["a->b"]["withheld"] > 0, "a->b withheld")
            assert run.interrupt() == 130
        assert procs["a"].process.poll() is None, "the inventory node was stopped"
        metrics = run.metrics()
        assert [e["action"] for e in metrics["faults"]["live_links"]] == ["cut"]
        assert not any(e["event"] == "killed" for e in metrics["faults"]["nodes"])
