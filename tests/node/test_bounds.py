"""Bounds on what peers can make a node do: how far ahead a message may claim to be, how many
inbound streams it serves, and being told to stop waiting for a peer. Real node processes,
real gRPC clients."""

from __future__ import annotations

import socket
import threading
import time

import grpc
import numpy as np
import pytest

from starling.node.params import ConfigError
from starling.node.protocol import convert
from starling.node.protocol.starling.v1 import peer_pb2, peer_pb2_grpc
from starling.node.runtime.servicers import STREAMS_PER_SENDER
from starling.node.runtime.transport import open_channel
from starling.orchestrator.planning.node_specs import node_specs
from tests.node.test_runtime_harness import Cluster, exchange_as, ring_experiment
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


def _lonely_node(cluster, name: str, rounds: int, deadline: float, extra=()):
    """Node 0 of a 3-ring whose in-peers 1 and 2 never run: it waits a deadline per round."""
    (proc,) = cluster.start_nodes(["0"], extra=extra).values()
    nowhere = _nowhere()
    experiment = ring_experiment(name, rounds=rounds, deadline=deadline)
    spec = node_specs(experiment, {"0": proc.address, "1": nowhere, "2": nowhere})[0]
    client = proc.client()
    client.wait_ready()
    client.configure(spec)
    return proc, client


def _iterate(experiment: str, sender: str, round_index: int) -> peer_pb2.Iterate:
    tensor = convert.tensor_from_array(np.zeros((3, 2)), "x")
    return peer_pb2.Iterate(
        experiment=experiment,
        sender=sender,
        receiver="0",
        round=round_index,
        phase=0,
        kind="x",
        tensors=[tensor],
    )


def test_a_message_far_ahead_is_refused_and_the_peer_still_waited_for(cluster):
    """One message for round 10^12 from each in-peer used to count both as answered for
    every round to come, so the node stopped waiting for them; beyond the window it is
    rejected with its reason, and the node goes on waiting a deadline per round."""
    deadline = 0.3
    proc, client = _lonely_node(cluster, "window", rounds=40, deadline=deadline)
    channel = open_channel(proc.address)
    try:
        stub = peer_pb2_grpc.PeerStub(channel)
        for sender in ("1", "2"):
            summary = exchange_as(stub, client, sender, [_iterate("window", sender, 10**12)])
            assert (summary.received, summary.rejected) == (0, 1)
    finally:
        channel.close()
    inbound = client.status().inbound
    for sender in ("1", "2"):
        assert inbound[sender].rejected == 1 and inbound[sender].received == 0
        assert "beyond this node's window" in inbound[sender].last_error, inbound[sender]
        assert str(10**12) in inbound[sender].last_error

    client.start()
    started = time.monotonic()
    wait_until(lambda: client.status().round >= 2, 10 * deadline, "two rounds of waiting")
    status = client.status()
    elapsed = time.monotonic() - started
    # Still waiting a deadline per round for its silent peers: at most elapsed/deadline + 1
    # rounds (here about 6); trusting round 10^12 it would be done with 40 in a moment.
    assert status.state == "running", status
    assert status.round <= elapsed / deadline + 1, (status.round, elapsed)
    client.stop()


def test_a_message_for_a_round_past_the_run_is_refused_until_the_run_is_extended(cluster):
    """A run of 5 rounds has rounds 0 to 4: a message for round 5 (well inside the round
    window) was filed as pending for a round that never comes. It is rejected naming the
    peer, the round and the run's rounds; configured again with more rounds (an extended
    run, same fingerprint) the node takes it."""
    proc, client = _lonely_node(cluster, "past", rounds=5, deadline=0.2)
    channel = open_channel(proc.address)
    try:
        stub = peer_pb2_grpc.PeerStub(channel)
        summary = exchange_as(stub, client, "1", [_iterate("past", "1", r) for r in (4, 5, 9)])
        assert (summary.received, summary.rejected) == (1, 2)
        withheld = peer_pb2.Iterate(
            experiment="past", sender="2", receiver="0", round=5, phase=0, withheld=True
        )
        summary = exchange_as(stub, client, "2", [withheld])
        assert (summary.received, summary.rejected) == (0, 1)
        inbound = client.status().inbound
        assert (inbound["1"].received, inbound["1"].rejected) == (1, 2)
        assert inbound["1"].pending_received == 1  # round 4 only
        assert inbound["1"].last_error == (
            "peer '1': round 9 is past this run's last round (the run has 5 rounds, 0 to 4)"
        )
        assert "peer '2': round 5 is past" in inbound["2"].last_error
        assert inbound["2"].pending_withheld == 0

        extended = node_specs(
            ring_experiment("past", rounds=10, deadline=0.2),
            {"0": proc.address, "1": _nowhere(), "2": _nowhere()},
        )[0]
        client.configure(extended)
        summary = exchange_as(stub, client, "1", [_iterate("past", "1", 9)])
        assert (summary.received, summary.rejected) == (1, 0)
    finally:
        channel.close()


def test_streams_beyond_the_limit_are_refused_and_control_still_answers(cluster):
    """100 idle peer streams against a limit of 4: four are served, 96 refused with
    RESOURCE_EXHAUSTED and counted, and Control.Status answers promptly throughout."""
    limit, opened = 4, 100
    proc, client = _lonely_node(
        cluster, "streams", rounds=5, deadline=0.2, extra=["--max-peer-streams", str(limit)]
    )
    release = threading.Event()

    def idle():
        # An open stream that sends nothing until released: it holds its server thread.
        release.wait(60)
        return
        yield  # pragma: no cover - makes this a generator

    channels = [open_channel(proc.address) for _ in range(4)]
    calls = []
    try:
        for k in range(opened):
            stub = peer_pb2_grpc.PeerStub(channels[k % len(channels)])
            calls.append(exchange_as(stub, client, "1", idle(), 60, future=True))
        wait_until(lambda: sum(c.done() for c in calls) >= opened - limit, 30, "refusals")
        refused = [c for c in calls if c.done()]
        assert len(refused) == opened - limit
        for call in refused:
            assert call.exception().code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert f"limit of {limit} inbound peer streams" in call.exception().details()
        # Control has its own threads: a status read answers with every peer slot taken.
        # Its bound is the call's own gRPC deadline (the client's 10 s, one attempt), not a
        # wall-clock figure a loaded machine breaks: queued behind the idle streams, the
        # call would wait for their release (60 s) and fail with DEADLINE_EXCEEDED.
        for _ in range(5):
            status = client.status(attempts=1)
        assert status.refused_streams == opened - limit
        # A freed slot is free again.
        release.set()
        wait_until(lambda: all(c.done() for c in calls), 30, "streams to close")
        summary = exchange_as(
            peer_pb2_grpc.PeerStub(channels[0]), client, "1", [_iterate("streams", "1", 0)]
        )
        assert summary.received == 1
    finally:
        release.set()
        for channel in channels:
            channel.close()


def test_a_peer_declared_down_is_not_waited_for_until_it_is_back(cluster):
    """SetPeerDown stops the wait for a silent in-peer at once, mid-round included, and
    undoing it brings the deadline back; a non-peer is refused by name."""
    deadline = 1.0
    _, client = _lonely_node(cluster, "down", rounds=100_000, deadline=deadline)
    with pytest.raises(ConfigError, match="^peer: 'stranger' is not an in-peer"):
        client.set_peer_down("stranger", True)
    client.start()
    holds_for(lambda: client.status().round <= 1, 0.3, "waiting for the silent peers")
    before = client.status().round
    for peer in ("1", "2"):
        client.set_peer_down(peer, True)
    # Nobody left to wait for: hundreds of rounds within a second.
    wait_until(lambda: client.status().round > before + 100, 10, "rounds without waiting")
    assert client.status().peers_down == ("1", "2")
    client.set_peer_down("1", False)
    wait_until(lambda: client.status().peers_down == ("2",), 10, "peer 1 back")
    first = client.status().round
    # Waiting for peer 1 again: about one round per deadline (2 s → 2, allow 3, counting
    # the round in flight when the mark was lifted).
    holds_for(lambda: client.status().round - first <= 3, 2.0, "one round per deadline")
    assert client.status().peers_down == ("2",)
    client.stop()


def test_one_sender_cannot_take_every_stream_slot(cluster):
    """Sender 1 opens 20 idle streams: it gets STREAMS_PER_SENDER of them, the rest are
    refused and counted, and sender 2 still finds a slot."""
    proc, client = _lonely_node(cluster, "crowd", rounds=5, deadline=0.2)
    release = threading.Event()

    def idle():
        release.wait(60)
        return
        yield  # pragma: no cover - makes this a generator

    channel = open_channel(proc.address)
    try:
        stub = peer_pb2_grpc.PeerStub(channel)
        calls = [exchange_as(stub, client, "1", idle(), 60, future=True) for _ in range(20)]
        wait_until(lambda: sum(c.done() for c in calls) >= 20 - STREAMS_PER_SENDER, 30, "refusals")
        refused = [c for c in calls if c.done()]
        assert len(refused) == 20 - STREAMS_PER_SENDER
        for call in refused:
            assert call.exception().code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert f"'1' holds its limit of {STREAMS_PER_SENDER} streams" in (
                call.exception().details()
            )
        assert client.status().refused_streams == 20 - STREAMS_PER_SENDER
        summary = exchange_as(stub, client, "2", [_iterate("crowd", "2", 0)])
        assert summary.received == 1
    finally:
        release.set()
        channel.close()
