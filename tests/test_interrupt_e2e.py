"""Ctrl-C during ``starling run`` on real nodes: their rounds stop first, then every sample
they stored is collected (``orchestrator/execution/halt.py``).

Before, the orchestrator collected while the nodes went on sampling, then stopped them: a
local run's ``samples/`` held tens of rounds fewer than its nodes' stores (which no command
recovers: ``collect`` refuses a run that ended), and the nodes of an inventory were not
stopped at all — they ran the abandoned experiment to its last round.
"""

from __future__ import annotations

import json
import os
import signal
import time

import numpy as np
import pytest

from starling.orchestrator.execution.access import Access
from starling.orchestrator.execution.client import NodeClient
from tests.conftest import run_cli
from tests.node.test_runtime_harness import Cluster
from tests.test_collect_e2e import _gone, _stored
from tests.test_live_cli_e2e import LiveRun, _ring, inventory_ring

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
    stored = _stored(run.out, start)
    for node, (rounds, values) in stored.items():
        with np.load(run.out / "samples" / f"node-{node}.npz") as got:
            assert len(got["rounds"]) == len(rounds), f"node {node}: stored samples left out"
            np.testing.assert_array_equal(got["rounds"], rounds)
            np.testing.assert_array_equal(got["samples"], values)
    # Stopped at once, the nodes end a round or so apart: all of them are evaluated, over
    # the rounds every one of them recorded.
    metrics = run.metrics()
    lengths = {len(rounds) for rounds, _ in stored.values()}
    assert "averaged_nodes" not in metrics
    assert metrics.get("rounds_evaluated") == (min(lengths) if len(lengths) > 1 else None)
    assert metrics["consensus_error"] is not None


def test_an_interrupted_run_stops_the_rounds_of_inventory_nodes(tmp_path, starling_home):
    with Cluster(tmp_path) as cluster:
        procs, inventory, raw = inventory_ring(
            cluster, "interrupted-inventory", rounds=100_000, chains=3, round_deadline=1.0
        )
        with LiveRun(tmp_path, starling_home, raw) as run:
            _interrupted(run)
        for node, address in inventory.items():
            assert procs[node].process.poll() is None, "the inventory node was stopped"
            with NodeClient(address) as client:
                status = client.status()
            assert status.state.value == "stopped", f"node {node} still {status.state}"
            with np.load(run.out / "samples" / f"node-{node}.npz") as got:
                assert len(got["rounds"]) == status.samples_stored


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_interrupted_while_evaluating_leaves_every_sample_to_collect(
    signum, tmp_path, starling_home
):
    """Ctrl-C or SIGTERM after the rounds, while the samples are evaluated: before, SIGTERM
    killed the orchestrator outright (exit -15, no word) and Ctrl-C marked the folder
    ``interrupted`` with no samples in it, which ``collect`` refused (``early_end.py``)."""
    raw = {**_ring("interrupted-evaluation", rounds=1500, chains=200, round_deadline=5.0)}
    with LiveRun(tmp_path, starling_home, raw) as run:
        # The run is listed in $STARLING_HOME while it runs, and unlisted when every sample
        # is collected and its nodes are stopped, right before the evaluation.
        listed = lambda: list(starling_home.rglob(f"{run.process.pid}.json"))  # noqa: E731
        for wanted in (True, False):
            while bool(listed()) != wanted:
                assert run.process.poll() is None, run.output()
                time.sleep(0.01)
        run.process.send_signal(signum)  # the samples are being evaluated now
        assert run.process.wait(timeout=60) == 130, run.output()
        assert not (run.out / "samples").exists(), "the signal came after the evaluation"
        last = (tmp_path / "run.stderr").read_text().strip().splitlines()[-1]
        assert last == (
            "starling: interrupted while the samples were being evaluated, before the results "
            "were written; "
            f"`starling collect {run.out}` recovers every sample the nodes stored"
        )
    assert json.loads((run.out / "manifest.json").read_text())["status"] == "running"
    start = json.loads((run.out / "start.json").read_text())
    done = run_cli("collect", str(run.out), env_home=starling_home, timeout=120)
    assert done.returncode == 0, done.stderr
    for node, (rounds, values) in _stored(run.out, start).items():
        np.testing.assert_array_equal(rounds, np.arange(1500))
        with np.load(run.out / "samples" / f"node-{node}.npz") as got:
            np.testing.assert_array_equal(got["rounds"], rounds)
            np.testing.assert_array_equal(got["samples"], values)


def test_starling_stop_stops_the_nodes_of_a_run_whose_orchestrator_died(tmp_path, starling_home):
    """SIGKILL leaves no orchestrator to stop an inventory's nodes: they sample the abandoned
    run to its end and refuse the next one until then, and no command stopped them.
    ``starling stop --run FOLDER`` stops every node's rounds; each keeps serving and
    ``starling collect`` then has every sample they stored."""
    with Cluster(tmp_path) as cluster:
        procs, inventory, raw = inventory_ring(
            cluster, "killed-inventory", rounds=100_000, chains=3, round_deadline=1.0
        )
        with LiveRun(tmp_path, starling_home, raw) as run:
            run.wait_started(min_round=5)
            run.process.send_signal(signal.SIGKILL)
            run.process.wait(timeout=10)
        done = run_cli("stop", "--run", str(run.out), env_home=starling_home, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.count("rounds stopped") == 3, done.stdout
        stored = {}
        for node, address in inventory.items():
            assert procs[node].process.poll() is None, "the node must keep serving"
            with NodeClient(address) as client:
                status = client.status()
            assert status.state.value == "stopped", node
            stored[node] = status.samples_stored
        collected = run_cli("collect", str(run.out), env_home=starling_home, timeout=120)
        assert collected.returncode in (0, 4), collected.stdout + collected.stderr
        for node, count in stored.items():  # every round the node stored, none after
            with np.load(run.out / "samples" / f"node-{node}.npz") as got:
                np.testing.assert_array_equal(got["rounds"], np.arange(count))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_interrupted_while_the_nodes_shut_down_is_named_so(signum, tmp_path, starling_home):
    """Ctrl-C or SIGTERM after every sample was collected, while the local nodes are shut
    down at the end: before, the account and the folder said the run was interrupted "while
    the nodes were starting" (``orchestrator/core/phases.py``). The phase is named, and the
    results written hold every sample the nodes stored.

    To keep a node shutting down long enough to be interrupted there, this test holds a
    sample stream open on node 0 without reading it: the node's server then waits out its
    shutdown grace (1 s) for that call before it exits."""
    import grpc

    from starling.node.protocol.starling.v1 import control_pb2, control_pb2_grpc

    rounds = 1500
    raw = {**_ring("interrupted-shutdown", rounds=rounds, chains=200, round_deadline=5.0)}
    with LiveRun(tmp_path, starling_home, raw) as run:
        while not (run.out / "run.json").exists():
            assert run.process.poll() is None, run.output()
            time.sleep(0.05)
        address = json.loads((run.out / "run.json").read_text())["addresses"]["0"]
        with NodeClient(address, timeout=10) as client:
            while client.status().round < rounds // 2:  # megabytes stored, more than a window
                assert run.process.poll() is None, run.output()
                time.sleep(0.1)
        with grpc.insecure_channel(address) as channel:
            held = control_pb2_grpc.ControlStub(channel).StreamSamples(
                control_pb2.SamplesRequest(offset=0)
            )  # never read: its sender waits for the window
            logs = list((run.out / "nodes" / "logs").glob("node-*.log"))
            while not any("shutting down" in p.read_text(errors="replace") for p in logs):
                assert run.process.poll() is None, run.output()
                time.sleep(0.01)
            run.process.send_signal(signum)  # the orchestrator waits for its nodes to exit
            assert run.process.wait(timeout=120) == 130, run.output()
            held.cancel()
        stderr = (tmp_path / "run.stderr").read_text()
        assert "Traceback" not in stderr, stderr[-3000:]
        last = stderr.strip().splitlines()[-1]
        assert last == (
            "starling: interrupted by the user while the nodes were being shut down; "
            "what was collected is written; exit 130"
        ), last
    metrics = json.loads((run.out / "metrics.json").read_text())
    assert metrics["status"] == "interrupted" and metrics["interrupted_during"] == "shutting down"
    account = "\n".join(metrics["account"])
    assert "while the nodes were starting" not in account, account
    assert "interrupted by the user while the nodes were being shut down" in account, account
    assert json.loads((run.out / "manifest.json").read_text())["status"] == "interrupted"
    start = json.loads((run.out / "start.json").read_text())
    for node, entry in start["nodes"].items():
        assert _gone(entry["pid"]), f"node {node} outlived the run"
    for node, (stored_rounds, values) in _stored(run.out, start).items():
        np.testing.assert_array_equal(stored_rounds, np.arange(rounds))
        with np.load(run.out / "samples" / f"node-{node}.npz") as got:
            np.testing.assert_array_equal(got["rounds"], stored_rounds)
            np.testing.assert_array_equal(got["samples"], values)


def test_an_interrupt_with_frozen_nodes_ends_in_bounded_time_and_names_them(
    tmp_path, starling_home
):
    """Ctrl-C while two of three inventory nodes are frozen (SIGSTOP: their sockets accept,
    nothing answers). Before, the collection went through the nodes one after another, each
    with its sample stream (60 s deadline, re-opened while unreachable) and status call on
    top of the 15 s stop: each frozen node held the orchestrator about a minute after the
    Ctrl-C, one after the other, and no line said which node held it. Now every node is
    collected at once within one overall deadline; each frozen node is named in the last
    line, the other's samples are written, and ``collect`` (after SIGCONT) recovers every
    sample each node stored."""
    frozen = ("b", "c")
    with Cluster(tmp_path) as cluster:
        procs, inventory, raw = inventory_ring(
            cluster, "frozen-inventory", rounds=100_000, chains=3, round_deadline=1.0
        )
        with LiveRun(tmp_path, starling_home, raw) as run:
            run.wait_started(min_round=5)
            for node in frozen:
                os.kill(procs[node].process.pid, signal.SIGSTOP)
            try:
                signalled = time.monotonic()
                run.process.send_signal(signal.SIGINT)
                code = run.process.wait(timeout=400)
                took = time.monotonic() - signalled
            finally:
                for node in frozen:
                    os.kill(procs[node].process.pid, signal.SIGCONT)
            stderr = (tmp_path / "run.stderr").read_text()
        assert code == 130, run.output()
        assert "Traceback" not in stderr, stderr[-3000:]
        # A generous bound, far below the two minutes two frozen nodes cost before.
        assert took < 75, f"the orchestrator took {took:.0f} s to end after Ctrl-C"
        last = stderr.strip().splitlines()[-1]
        assert "not collected: nodes b, c did not answer within" in last, last
        assert f"`starling collect {run.out}` recovers what they stored" in last, last
        account = "\n".join(json.loads((run.out / "metrics.json").read_text())["account"])
        for node in frozen:
            assert f"not collected: node {node} did not answer within" in account, account
        with np.load(run.out / "samples" / "node-a.npz") as got:
            written = (got["rounds"].copy(), got["samples"].copy())

        # The Stop that the frozen nodes never answered: their rounds may go on after SIGCONT.
        # It names the run, as every Control call that acts on one must.
        run_id = json.loads((run.out / "run.json").read_text())["access"]["run_id"]
        for node in frozen:
            with NodeClient(inventory[node], access=Access(run_id=run_id)) as client:
                client.stop()
        collected = run_cli("collect", str(run.out), env_home=starling_home, timeout=120)
        assert collected.returncode in (0, 4), collected.stdout + collected.stderr
        for node, address in inventory.items():
            with NodeClient(address) as client:
                stored = client.status().samples_stored
            assert stored > 0, node
            with np.load(run.out / "samples" / f"node-{node}.npz") as got:
                np.testing.assert_array_equal(got["rounds"], np.arange(stored))
                if node == "a":  # what the run had written, bit for bit
                    np.testing.assert_array_equal(got["rounds"], written[0])
                    np.testing.assert_array_equal(got["samples"], written[1])
