"""Crash recovery: ``starling run`` killed with SIGKILL mid-run, then ``starling collect``.

The orchestrator is a real ``starling run`` on real node processes; it is killed outright,
so it writes nothing more. ``collect`` must then rebuild ``samples/*.npz`` and
``metrics.json`` (status partial) holding every sample the nodes stored, and nothing else:
per node, rounds 0, 1, ... contiguous up to the last one its store holds, with the stored
values bit for bit. What a node stored is read here with the node's own store class, which
the orchestrator never imports (it gets the samples over gRPC).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from starling.node.runtime.archive import run_directory
from starling.node.runtime.store import SampleStore
from starling.orchestrator.planning.plan import plan_run
from tests.conftest import run_cli
from tests.test_live_cli_e2e import WAIT, LiveRun, _ring

pytestmark = pytest.mark.e2e


def _stored(out, start: dict) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Node -> (rounds, values) as its store on disk holds them."""
    stored = {}
    for node, entry in start["nodes"].items():
        experiment, node_id = entry["stored_run"]
        folder = run_directory(out / entry["state_dir"], experiment, node_id)
        path = folder / "samples.bin"
        assert path.is_file(), f"node {node} stored nothing in {folder}"
        store = SampleStore(path)
        try:
            records = [(r, v) for _, r, v in store.read(0, len(store))]
        finally:
            store.close()
        stored[node] = (
            np.asarray([r for r, _ in records]),
            np.stack([v for _, v in records]) if records else np.empty((0,)),
        )
    return stored


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as handle:  # a zombie is gone too
        return handle.read().rsplit(")", 1)[1].split()[0] == "Z"


def test_collect_recovers_every_stored_sample_after_the_orchestrator_is_killed(
    tmp_path, starling_home
):
    raw = _ring(
        "crash",
        rounds=100_000,
        chains=3,
        round_deadline=1.0,
        faults=[{"link": [1, 2], "rounds": [50_000, 50_010]}],
    )
    with LiveRun(tmp_path, starling_home, raw) as run:
        run.wait_started(min_round=5)
        run.cli("links", "set", "0", "1", "--drop", "0.25")  # a live change, in the journal
        # `starling status | head -3`: the reader goes away; status says nothing and exits 0.
        read_end, write_end = os.pipe()
        os.close(read_end)
        piped = subprocess.run(  # the same command line as run_cli, its stdout a dead pipe
            [sys.executable, "-m", "starling.orchestrator.cli", "status"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "STARLING_HOME": str(starling_home)},
            timeout=WAIT,
        )
        os.close(write_end)
        assert piped.returncode == 0 and piped.stderr == "", piped.stderr
        start = json.loads((run.out / "start.json").read_text())
        run.process.send_signal(signal.SIGKILL)
        run.process.wait(timeout=30)
        deadline = time.monotonic() + WAIT
        while not all(_gone(entry["pid"]) for entry in start["nodes"].values()):
            assert time.monotonic() < deadline, "the nodes outlived their orchestrator"
            time.sleep(0.2)
        assert not (run.out / "metrics.json").exists()
        manifest = json.loads((run.out / "manifest.json").read_text())
        assert manifest["status"] == "running"
        stored = _stored(run.out, start)

    done = run_cli("collect", str(run.out), env_home=starling_home, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    metrics = json.loads((run.out / "metrics.json").read_text())
    assert metrics["status"] == "partial" and metrics["recovered"] is True
    # The account still tells what the run went through: its schedule (from the experiment)
    # and the live link changes (from the run's journal).
    assert metrics["faults"]["scheduled_links"], metrics["faults"]
    assert any("drop 0.25" in line for line in metrics["account"]), metrics["account"]
    summary = (run.out / "summary.txt").read_text().splitlines()
    assert next(line for line in summary if line.startswith("status: ")) == "status: partial"
    assert set(stored) == set(start["nodes"]) == {"0", "1", "2", "3"}
    for node, (rounds, values) in stored.items():
        assert len(rounds) >= 5, f"node {node} stored only {len(rounds)} samples"
        np.testing.assert_array_equal(rounds, np.arange(len(rounds)))
        with np.load(run.out / "samples" / f"node-{node}.npz") as got:
            np.testing.assert_array_equal(got["rounds"], np.arange(len(rounds)))
            np.testing.assert_array_equal(got["samples"], values)
        assert metrics["samples_per_node"][node] == len(rounds)
    manifest = json.loads((run.out / "manifest.json").read_text())
    assert manifest["status"] == "partial"
    assert "metrics.json" in manifest["files"] and "samples/node-0.npz" in manifest["files"]
    # A second collect has nothing to do and says so in one line.
    again = run_cli("collect", str(run.out), env_home=starling_home)
    assert again.returncode == 2 and "ended (partial)" in again.stderr, again.stderr


def test_collect_scores_a_run_on_the_nodes_own_data_as_the_run_would(tmp_path, starling_home):
    """``data: {source: node}`` (the compose testbed's experiment): the run's only ground
    truth is the recipe each node answers its configuration with. After the orchestrator is
    killed, ``collect`` must score the stored samples against the same posterior the run
    would have: exactly the W2 of the same samples under the twin experiment whose synthetic
    data is the nodes' (before, it wrote no W2 and no posterior at all)."""
    from starling.orchestrator.config.experiment import parse_experiment
    from starling.orchestrator.evaluation.evaluate import evaluate
    from tests.node.test_runtime_harness import Cluster

    nodes = ("a", "b", "c")
    with Cluster(tmp_path) as cluster:
        procs = {
            node: cluster.launch(
                node,
                extra=["--id", node, "--shard", str(k), "--data-seed", "3", "--data-size", "50"],
            )
            for k, node in enumerate(nodes)
        }
        inventory = {n: cluster.ready(p).address for n, p in procs.items()}
        raw = _ring(
            "own-data",
            topology={"kind": "ring"},
            nodes=[{"id": n} for n in nodes],
            data={"source": "node"},
            rounds=100_000,
            chains=3,
            round_deadline=1.0,
            backend={"kind": "inventory", "nodes": inventory},
        )
        with LiveRun(tmp_path, starling_home, raw) as run:
            run.wait_started(min_round=5)
            run.process.send_signal(signal.SIGKILL)
            run.process.wait(timeout=30)
            # Nodes of an inventory sample on: their rounds are stopped as the docs say
            # (docs/guides/results.md).
            run.cli("stop", "--run", str(run.out))
        done = run_cli("collect", str(run.out), env_home=starling_home, timeout=600)
        assert done.returncode == 0, done.stderr
        assert all(p.process.poll() is None for p in procs.values()), "a node was stopped"

    metrics = json.loads((run.out / "metrics.json").read_text())
    assert metrics["status"] == "partial" and metrics["recovered"] is True
    samples = {}
    for node in nodes:
        with np.load(run.out / "samples" / f"node-{node}.npz") as got:
            samples[node] = got["samples"]
        assert len(samples[node]) >= 5, node
    twin = parse_experiment(
        {
            **raw,
            "data": {"source": "synthetic", "size": 50, "seed": 3},
            "backend": {"kind": "local"},
        }
    )
    expected = evaluate(plan_run(twin).evaluation, samples).metrics
    assert "w2" in metrics, sorted(metrics)
    for key in ("mean", "std"):
        assert metrics["posterior"][key] == pytest.approx(expected["posterior"][key], abs=1e-12)
    for node in nodes:
        assert metrics["w2"]["per_node"][node] == pytest.approx(
            expected["w2"]["per_node"][node], abs=1e-12
        ), node


ROUNDS = 2000
"""Enough that the run is still going when ``starling status`` first looks, on a busy machine."""


def test_a_node_killed_for_good_mid_run_is_left_to_collect_and_loses_nothing(
    tmp_path, starling_home
):
    """A node of an inventory killed mid-run and not back by the end (``docker kill`` of a
    compose node): the run ends partial with what was collected before the kill, and what
    the node stored after its last collection is only in its store. The manifest names it
    (``not_collected``), so once it serves again ``starling collect`` writes every sample
    it stored; before, collect refused a run that had ended, and those samples were lost."""
    from starling.orchestrator.results.start_record import START
    from tests.node.test_runtime_harness import Cluster
    from tests.test_live_cli_e2e import inventory_ring

    with Cluster(tmp_path) as cluster:
        procs, inventory, raw = inventory_ring(
            cluster,
            "killed-for-good",
            rounds=ROUNDS,
            chains=3,
            round_deadline=1.0,
            limits={"down_grace": 2},
        )
        with LiveRun(tmp_path, starling_home, raw) as run:
            run.wait_started(min_round=5)
            procs["c"].process.send_signal(signal.SIGKILL)
            procs["c"].process.wait(timeout=30)
            run.process.wait(timeout=WAIT)
        manifest = json.loads((run.out / "manifest.json").read_text())
        assert manifest["status"] == "partial", manifest["status"]
        assert manifest.get("not_collected") == ["c"], manifest
        first = json.loads((run.out / "metrics.json").read_text())["samples_per_node"]
        assert first["a"] == first["b"] == ROUNDS, first

        # The node serves again, on its store and its address: collect gets all it stored.
        again = cluster.ready(
            cluster.launch(
                "c", listen=inventory["c"], state_dir=procs["c"].state_dir, extra=["--id", "c"]
            )
        )
        done = run_cli("collect", str(run.out), env_home=starling_home, timeout=600)
        assert done.returncode == 0, done.stderr
        assert again.process.poll() is None
    start = json.loads((run.out / START).read_text())
    start["nodes"]["c"]["state_dir"] = str(procs["c"].state_dir)  # _stored reads it from here
    rounds, values = _stored(run.out, {"nodes": {"c": start["nodes"]["c"]}})["c"]
    assert len(rounds) >= first["c"] >= 5, (len(rounds), first["c"])
    metrics = json.loads((run.out / "metrics.json").read_text())
    assert metrics["samples_per_node"] == {"a": ROUNDS, "b": ROUNDS, "c": len(rounds)}, metrics
    with np.load(run.out / "samples" / "node-c.npz") as got:
        np.testing.assert_array_equal(got["rounds"], np.arange(len(rounds)))
        np.testing.assert_array_equal(got["samples"], values)
