"""Crashes and dead peers, on real node processes: resume from a checkpoint, never hang."""

from __future__ import annotations

import os
import signal
import socket
import time

import numpy as np
import pytest

from starling.node.runtime.checkpoint import load_checkpoint
from starling.node.runtime.run import CHECKPOINT_FILE
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.core.errors import NodeUnavailable
from starling.orchestrator.planning.node_specs import node_specs
from tests.node.test_runtime_harness import Cluster, ring_experiment
from tests.waiting import holds_for, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture
def cluster(tmp_path):
    with Cluster(tmp_path) as c:
        yield c


def _nowhere() -> str:
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{spare.getsockname()[1]}"


def test_killed_node_resumes_from_checkpoint_without_gaps(cluster):
    procs = cluster.start_nodes(["0", "1", "2"])
    addresses = {n: p.address for n, p in procs.items()}
    rounds = 80
    specs = {
        s.node_id: s
        for s in node_specs(ring_experiment("crash", rounds=rounds, deadline=0.5), addresses)
    }
    clients = {n: p.client() for n, p in procs.items()}
    for node, client in clients.items():
        client.wait_ready()
        client.configure(specs[node])
        client.set_link("*", delay_ms=25)  # slow the rounds so the kill lands mid-run
    for client in clients.values():
        client.start()

    victim = procs["1"]
    wait_until(lambda: clients["1"].status().samples_stored >= 15, 30, "15 samples on node 1")
    before = list(clients["1"].samples())
    victim.signal(signal.SIGKILL)
    victim.process.wait(timeout=10)
    survivors_at = {n: clients[n].status().round for n in ("0", "2")}
    assert max(survivors_at.values()) < rounds - 5, "the kill came too late to be mid-run"
    # The survivors go on while node 1 is down: each missing message costs them one
    # deadline, never a hang (two rounds = 1 s of deadlines, well inside the 30 s allowed).
    wait_until(
        lambda: all(clients[n].status().round >= survivors_at[n] + 2 for n in ("0", "2")),
        30,
        "the survivors to pass two rounds without node 1",
    )

    # Same port, same state dir: peers' links reconnect to it by themselves.
    reborn = cluster.ready(cluster.launch("1", listen=victim.address, state_dir=victim.state_dir))
    client = reborn.client()
    client.wait_ready()
    client.configure(specs["1"])
    resumed = client.status()
    # Checkpoints are written every round after the sample is flushed: a SIGKILL can cost
    # at most the round between the two (and `before` was read just before the kill).
    assert resumed.state == "configured"
    assert resumed.round == resumed.samples_stored >= len(before) - 1
    client.set_link("*", delay_ms=25)
    client.start()
    clients["1"] = client

    wait_until(lambda: all(c.status().state == "done" for c in clients.values()), 60, "done")
    for node, c in clients.items():
        pairs = list(c.samples())
        assert [r for r, _ in pairs] == list(range(rounds)), node  # complete, no gaps
        assert c.status().error == ""
    after = list(clients["1"].samples())
    for (r0, v0), (r1, v1) in zip(before[: resumed.samples_stored], after, strict=False):
        assert r0 == r1 and np.array_equal(v0, v1)  # nothing stored before the crash changed


@pytest.mark.parametrize("fault", ["killed", "paused"])
def test_dead_peer_never_holds_a_round_past_its_deadline(cluster, fault):
    procs = cluster.start_nodes(["0", "1", "2"])
    addresses = {n: p.address for n, p in procs.items()}
    rounds, deadline = 10, 0.4
    specs = {
        s.node_id: s
        for s in node_specs(
            ring_experiment(f"dead-{fault}", rounds=rounds, deadline=deadline), addresses
        )
    }
    clients = {n: procs[n].client() for n in ("0", "1")}
    for node in ("0", "1", "2"):
        c = procs[node].client()
        c.wait_ready()
        c.configure(specs[node])
    # Node 2's links from 0 and 1 are connected by now; then it dies or hangs (a paused
    # process keeps its sockets open and answers nothing).
    procs["2"].signal(signal.SIGKILL if fault == "killed" else signal.SIGSTOP)

    started = time.monotonic()
    for c in clients.values():
        c.start()
    seen: dict[int, float] = {}
    while True:
        status = clients["0"].status()
        seen.setdefault(status.round, time.monotonic())
        if status.state != "running":
            break
        assert time.monotonic() - started < rounds * deadline + 10, "node 0 is stuck"
        time.sleep(0.02)
    wait_until(lambda: clients["1"].status().state == "done", 10, "node 1 done")
    elapsed = time.monotonic() - started
    assert status.state == "done" and status.error == ""
    times = [seen[r] for r in sorted(seen)]
    gaps = np.diff(times)
    # Each round waits for node 2 until the deadline, then goes on: about `deadline` per
    # round (the inbox's deadline itself is checked exactly on a fake clock in
    # test_runtime.py; here, that the links never hold the round loop). A link blocking the
    # loop would cost a connect wait (1 s) or more in every round, 14 s or more in all; the
    # slack (2 s in any round, 5 s overall) covers polling and a loaded 2-core machine.
    assert gaps.max() < deadline + 2.0, gaps
    assert elapsed < rounds * deadline + 5.0
    # Real time cannot run fast: it did wait out the deadline each round.
    assert elapsed > rounds * deadline * 0.8
    for c in clients.values():
        assert [r for r, _ in c.samples()] == list(range(rounds))
        inbound = c.status().inbound
        assert inbound["2"].received == 0
    assert clients["0"].status().inbound["1"].received == rounds


def test_stop_then_configure_again_resumes_in_the_same_process(cluster):
    (proc,) = cluster.start_nodes(["0"]).values()
    nowhere = _nowhere()
    spec = node_specs(
        ring_experiment("pause", rounds=30, deadline=0.05),
        {"0": proc.address, "1": nowhere, "2": nowhere},
    )[0]
    client = proc.client()
    client.wait_ready()
    client.configure(spec)
    client.start()
    wait_until(lambda: client.status().round >= 5, 20, "five rounds")
    client.checkpoint()
    client.stop()
    stopped = client.status()
    assert stopped.state == "stopped"
    first = list(client.samples())
    client.configure(spec)
    resumed = client.status()
    assert resumed.round == resumed.samples_stored
    assert stopped.samples_stored - 1 <= resumed.samples_stored <= stopped.samples_stored
    client.start()
    wait_until(lambda: client.status().state == "done", 30, "done")
    pairs = list(client.samples())
    assert [r for r, _ in pairs] == list(range(30))
    for (r0, v0), (r1, v1) in zip(first[: resumed.samples_stored], pairs, strict=False):
        assert r0 == r1 and np.array_equal(v0, v1)
    # Following a finished run streams what is stored and ends.
    assert len(list(client.samples(offset=25, follow=True))) == 5


def test_a_held_node_stops_before_its_round_keeps_serving_and_goes_on_when_released(cluster):
    """Control.Hold: how a scheduled crash lands exactly at its round. The node runs the
    rounds before the hold, then waits there (reporting ``holding``) while its peers, which
    have it as a normal in-peer, wait out their deadlines; released, it finishes the run."""
    procs = cluster.start_nodes(["0", "1"])
    addresses = {n: p.address for n, p in procs.items()}
    specs = {
        s.node_id: s
        for s in node_specs(
            ring_experiment("hold", rounds=20, deadline=0.3, topology={"kind": "ring", "nodes": 2}),
            addresses,
        )
    }
    clients = {n: p.client() for n, p in procs.items()}
    for node, client in clients.items():
        client.wait_ready()
        client.configure(specs[node])
    clients["1"].hold(7)
    for client in clients.values():
        client.start()

    wait_until(lambda: clients["1"].status().holding, 30, "node 1 holding")
    status = clients["1"].status()
    assert status.round == 7 and status.samples_stored == 7 and status.state == "running"
    holds_for(lambda: clients["1"].status().samples_stored == 7, 1.0, "node 1 staying put")
    clients["1"].hold(None)
    wait_until(lambda: all(c.status().state == "done" for c in clients.values()), 60, "done")
    assert [r for r, _ in clients["1"].samples()] == list(range(20))
    assert not clients["1"].status().holding


def test_state_of_other_specs_moved_aside_in_one_second_each_keeps_a_folder(cluster):
    """Each Configure finding another spec's state moves it to ``0.replaced-<second>``: two in
    one second once shared that name, and the second folder went *into* the first (a third
    failed the Configure). Every name of this minute is taken here, by folders of the
    user's: each state still gets a folder of its own beside the run's, none is nested, and
    what held the names is left alone."""
    (proc,) = cluster.start_nodes(["0"]).values()
    client = proc.client()
    client.wait_ready()
    folder = proc.state_dir / "aside" / "0"
    folder.parent.mkdir(parents=True)
    now = time.time()
    taken = {
        folder.with_name("0.replaced-" + time.strftime("%Y%m%d-%H%M%S", time.localtime(now + s)))
        for s in range(-1, 60)
    }
    for where in taken:
        where.mkdir()
        (where / "mine.txt").write_text("the user's")
    for seed in (11, 12, 13, 14):  # a single node without links: each Configure is quick
        raw = {
            "name": "aside",
            "algorithm": "ula",
            "rounds": 5,
            "chains": 2,
            "seed": seed,
            "model": {"name": "linear_regression", "params": {"dim": 2}},
            "data": {"source": "synthetic", "size": 20, "seed": 5},
            "topology": {"kind": "none", "nodes": 1},
        }
        client.configure(node_specs(parse_experiment(raw), {"0": proc.address})[0])
        client.checkpoint()  # a resume point of this spec, for the next Configure to move
    for where in taken:
        assert [p.name for p in where.iterdir()] == ["mine.txt"], where
    held = {}
    for where in folder.parent.iterdir():
        if where not in taken:
            checkpoint = load_checkpoint(where / CHECKPOINT_FILE)
            assert checkpoint is not None and not (where / "0").exists(), where
            held[checkpoint.fingerprint] = where.name
    # Four specs' states (four fingerprints), each in a folder of its own.
    assert len(held) == 4 and "0" in held.values()
    assert set(held.values()) - {"0"} <= {f"{w.name}-{k}" for w in taken for k in (2, 3, 4)}
    assert "moved to" in proc.log() and "Configure failed" not in proc.log()


def _cpu_seconds(pid: int) -> float:
    """The CPU time process ``pid`` has used (user and system), from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _long_round(cluster, chains: int = 300):
    """A DG-LMC master and a worker whose rounds of 1,000,000 LMC steps on ``chains``
    chains compute for longer than Stop waits (10 s), started, the worker computing round
    0: (processes, clients)."""
    experiment = parse_experiment(
        {
            "name": "long-round",
            "algorithm": "dg-lmc",
            "model": {"name": "conjugate_gaussian", "params": {"dim": 2}},
            "data": {"source": "synthetic", "size": 50, "seed": 1},
            "topology": {"kind": "star"},
            "nodes": [
                {"id": "m", "role": "master"},
                {"id": "w", "hyperparameters": {"local_steps": 1_000_000}},
            ],
            "rounds": 3,
            "chains": chains,
            "seed": 3,
            "round_deadline": 120.0,
        }
    )
    procs = cluster.start_nodes(["m", "w"])
    specs = {s.node_id: s for s in node_specs(experiment, {k: p.address for k, p in procs.items()})}
    clients = {k: procs[k].client(timeout=90) for k in procs}
    for node in ("m", "w"):
        clients[node].wait_ready()
        clients[node].configure(specs[node])
    for client in clients.values():
        client.start()
    # Round 0's θ has gone to the worker: it is computing its LMC steps.
    wait_until(lambda: clients["m"].status().outbound["w"].sent >= 1, 60, "θ sent")
    time.sleep(1.0)
    return procs, clients


def test_a_round_still_computing_after_stop_never_touches_the_next_run(cluster):
    """Stop interrupts a round's waits, not its computation, and waits 10 s for the round
    loop. Before, a node whose round computed longer reported stopped while its loop ran
    on; a Configure then cleared the stop, and the old loop, its round done, went on into
    its closed run and marked the next run failed ("round 1: OSError: Bad file
    descriptor"). The node now says stopping until the loop has ended, and a Configure
    waits for it."""
    procs, clients = _long_round(cluster)
    worker = clients["w"]
    started = time.monotonic()
    with pytest.raises(NodeUnavailable, match="still computing round 0 0 s after Stop"):
        worker.stop(stopping_wait=0)  # a client that does not wait for the loop
    assert time.monotonic() - started >= 9, "the round ended within Stop's wait: no test"
    assert worker.status().state == "stopping"
    # The same process, configured for another run: three nodes' ring, its peers nowhere.
    nowhere = _nowhere()
    ring = node_specs(
        ring_experiment("after-long-round", rounds=5, deadline=0.05),
        {"0": procs["w"].address, "1": nowhere, "2": nowhere},
    )[0]
    worker.configure(ring)
    worker.start()
    wait_until(lambda: worker.status().state == "done", 60, "the new run done")
    pid = procs["w"].process.pid
    # Whatever the old loop still does, it is over once the process computes no more.
    wait_until(lambda: _idle(pid), 120, "the worker to be idle")
    status = worker.status()
    assert (status.experiment, status.state, status.error) == ("after-long-round", "done", "")
    assert [r for r, _ in worker.samples()] == list(range(5))
    assert "round loop failed" not in procs["w"].log()


def test_a_client_stop_returns_once_the_round_stop_found_computing_is_over(cluster):
    """What the orchestrator collects after Stop is final: the node says stopping while
    the round computes, and the client's stop returns once it says stopped."""
    procs, clients = _long_round(cluster)
    worker = clients["w"]
    started = time.monotonic()
    worker.stop()
    assert time.monotonic() - started >= 9, "the round ended within Stop's wait: no test"
    status = worker.status()
    assert (status.state, status.error) == ("stopped", "")
    log = procs["w"].log()
    assert "stopping: round 0 is still computing" in log
    assert "stopped: the round a Stop found computing is over" in log
    assert "round loop failed" not in log


def _idle(pid: int) -> bool:
    """Whether process ``pid`` used under 0.2 s of CPU in the last second."""
    before = _cpu_seconds(pid)
    time.sleep(1.0)
    return _cpu_seconds(pid) - before < 0.2


def test_sigterm_while_a_long_round_computes_ends_the_process_in_bounded_time(cluster):
    """A node told to shut down (SIGTERM) while its round computes off the event loop
    (:data:`~starling.node.runtime.runtime.INLINE_STEP_SECONDS`) waits for that round as
    Stop does (10 s), then exits: the thread computing it does not hold the process up
    until the round is over (ten times the chains of the tests above: minutes, far longer
    than allowed here)."""
    procs, clients = _long_round(cluster, chains=3000)
    worker = procs["w"]
    started = time.monotonic()
    worker.signal(signal.SIGTERM)
    worker.process.wait(timeout=30)
    took = time.monotonic() - started
    assert worker.process.returncode == 0, worker.log()[-2000:]
    # Stop's 10 s wait for the round, once (twice would be past 20 s), and about a second
    # to stop serving.
    assert 9 <= took < 18, took
    assert "stopped" in worker.log()
