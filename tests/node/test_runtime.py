"""The node runtime over real gRPC: equal to the simulator, strict with bad peers, clean exits.

Node processes are real (``python -m starling.node serve`` on 127.0.0.1), so are the channels; the
only in-process checks are the pure conversions and the sample store.
"""

from __future__ import annotations

import dataclasses
import re
import signal
import socket
import threading
import time

import grpc
import numpy as np
import pytest

from starling.node.engine import Gather, simulate
from starling.node.messages import Message
from starling.node.params import ConfigError
from starling.node.protocol import convert
from starling.node.protocol.starling.v1 import control_pb2, peer_pb2, peer_pb2_grpc
from starling.node.runtime.inbox import WITHHELD, Inbox
from starling.node.runtime.links import OutboundLink
from starling.node.runtime.peer_secrets import PeerSecrets
from starling.node.runtime.stats import StatsBook
from starling.node.runtime.store import SampleStore, StoreError
from starling.node.runtime.transport import ChannelSettings, open_channel
from starling.orchestrator.config.experiment import load_experiment
from starling.orchestrator.execution.client import NodeClient, NodeRejected, NodeUnavailable
from starling.orchestrator.planning.node_specs import node_specs
from tests.fake_clock import FakeClock
from tests.node.test_runtime_harness import (
    ROOT,
    Cluster,
    exchange_as,
    ring_experiment,
    wait_until,
)


@pytest.fixture
def cluster(tmp_path):
    with Cluster(tmp_path) as c:
        yield c


# ----------------------------------------------------------------- pure conversions


def test_spec_survives_the_wire_exactly():
    faults = [{"link": ["0", "1"], "rounds": [2, 5]}, {"link": "all", "drop": 0.25}]
    experiments = [
        load_experiment(ROOT / "examples" / "quickstart.yaml"),
        ring_experiment("faulty", rounds=7, deadline=0.5, faults=faults, checkpoint_every=3),
    ]
    for experiment in experiments:
        addresses = {n: f"10.0.0.{k}:50051" for k, n in enumerate(experiment.node_ids)}
        for spec in node_specs(experiment, addresses):
            wire = convert.spec_to_config(spec).SerializeToString()
            assert convert.config_to_spec(control_pb2.NodeConfig.FromString(wire)) == spec


def test_tensors_are_bit_exact_and_checked():
    rng = np.random.default_rng(0)
    for value in (
        rng.standard_normal((3, 4)),
        rng.standard_normal(5).astype(np.float32),
        np.arange(6, dtype=np.int64).reshape(2, 3),
        np.zeros((0, 2)),
    ):
        back = convert.array_from_tensor(convert.tensor_from_array(value, "x"))
        assert back.dtype == value.dtype and back.shape == value.shape
        assert back.tobytes() == value.tobytes()
        assert back.flags.writeable
        view = convert.array_from_tensor(convert.tensor_from_array(value, "x"), writable=False)
        assert view.dtype == value.dtype and view.tobytes() == value.tobytes()
        assert not view.flags.writeable  # a received iterate: no copy, and none can write it
    short = convert.tensor_from_array(np.ones((2, 2)), "x")
    short.data = short.data[:-8]
    with pytest.raises(convert.TensorError, match="24 bytes for shape"):
        convert.array_from_tensor(short)
    with pytest.raises(convert.TensorError, match="dtype"):
        convert.tensor_from_array(np.ones(2, dtype=complex), "z")


def test_sample_store_cuts_a_torn_record_and_truncates(tmp_path):
    store = SampleStore(tmp_path / "s.bin")
    values = [np.full((2, 3), float(k)) for k in range(4)]
    for k, value in enumerate(values):
        store.append(10 + k, value)
    store.close()
    with open(tmp_path / "s.bin", "ab") as file:  # a write cut short by SIGKILL
        file.write(b"SMPL\x01\x02")
    store = SampleStore(tmp_path / "s.bin")
    assert len(store) == 4 and store.rounds() == [10, 11, 12, 13]
    store.truncate(2)
    store.append(12, values[3])
    got = store.read(0, 10)
    assert [(i, r) for i, r, _ in got] == [(0, 10), (1, 11), (2, 12)]
    assert np.array_equal(got[2][2], values[3])
    store.close()


def test_a_store_opened_read_only_never_writes_its_file(tmp_path):
    """A stored run is read so: a torn last record is neither indexed nor cut, and what
    would write (append, truncate) is refused."""
    path = tmp_path / "s.bin"
    store = SampleStore(path)
    for k in range(3):
        store.append(k, np.full((2, 3), float(k)))
    store.close()
    whole = path.read_bytes()
    path.write_bytes(whole + whole[: len(whole) // 3 - 5])  # the 4th record, torn
    torn = path.read_bytes()
    store = SampleStore(path, read_only=True)
    assert len(store) == 3 and [r for _, r, _ in store.read(0, 10)] == [0, 1, 2]
    with pytest.raises(StoreError, match="read-only"):
        store.append(3, np.zeros((2, 3)))
    with pytest.raises(StoreError, match="read-only"):
        store.truncate(1)
    store.sync()
    store.close()
    assert path.read_bytes() == torn
    with pytest.raises(FileNotFoundError):
        SampleStore(tmp_path / "absent.bin", read_only=True)
    assert not (tmp_path / "absent.bin").exists()


def _msg(round_index: int) -> Message:
    return Message("x", {"x": np.full((1, 1), float(round_index))}, round=round_index)


def test_inbox_waits_for_answers_then_the_deadline_and_no_longer():
    clock = FakeClock()
    inbox = Inbox(StatsBook(), next_round=0, clock=clock)
    start = clock.now()
    far = start + 30
    # A message and a withheld notice both answer: no wait, only the message is used.
    inbox.deliver("a", 0, 0, _msg(0))
    inbox.deliver("b", 0, 0, WITHHELD)
    assert list(inbox.wait(0, 0, ["a", "b"], far)) == ["a"]
    # A later message from a sender means its earlier one is lost (one ordered stream).
    assert inbox.deliver("a", 2, 0, _msg(2)) == "received"
    assert inbox.deliver("b", 1, 0, _msg(1)) == "received"
    got = inbox.wait(1, 0, ["a", "b"], far)
    assert list(got) == ["b"] and got["b"].round == 1
    assert clock.waits == [] and clock.now() == start  # neither gather waited at all
    assert inbox.deliver("c", 1, 0, _msg(1)) == "late"  # (1, 0) is closed
    # a already sent round 2 on its ordered stream: a round-1 message now is a copy (a
    # restarted sender running the round again), counted when its first copy came.
    assert inbox.deliver("a", 1, 0, _msg(1)) == "stale resend"
    # A message that arrives during the wait ends it there, long before the deadline.
    clock.at(start + 2.5, lambda: inbox.deliver("b", 2, 0, _msg(2)))
    assert sorted(inbox.wait(2, 0, ["a", "b"], far)) == ["a", "b"]  # a's was buffered
    assert clock.now() == start + 2.5
    # So does a sender declared down (not waited for any more).
    clock.at(start + 4.0, lambda: inbox.set_down("b", True))
    assert inbox.wait(3, 0, ["b"], far) == {}
    assert clock.now() == start + 4.0
    inbox.set_down("b", False)
    # A sender that never answers costs exactly the deadline, waited in one piece.
    waits = len(clock.waits)
    deadline = clock.now() + 0.5
    assert inbox.wait(4, 0, ["c"], deadline) == {}
    assert clock.now() == deadline and clock.waits[waits:] == [0.5]
    # A deadline already past is no wait at all, and the round closes all the same.
    assert inbox.wait(5, 0, ["c"], deadline - 1.0) == {}
    assert clock.now() == deadline and inbox.deliver("c", 5, 0, _msg(5)) == "late"


@pytest.mark.parametrize(
    ("arrivals", "ready"),
    [
        ([], False),
        ([("a", 0, _msg(0))], False),  # b has not answered
        ([("a", 0, _msg(0)), ("b", 0, WITHHELD)], True),  # a notice answers too
        ([("a", 0, _msg(0)), ("b", 1, _msg(1))], True),  # b is past round 0: lost
        ([("a", 0, _msg(0)), "b down"], True),
        (["interrupted"], True),
    ],
)
def test_ready_says_whether_a_synchronous_gather_would_wait_and_closes_nothing(arrivals, ready):
    """An event-loop driver asks ``ready`` instead of blocking in ``wait``: for a
    synchronous gather it must say exactly when ``wait`` returns without waiting, and leave
    the round open."""
    clock = FakeClock()
    inbox = Inbox(StatsBook(), next_round=0, clock=clock)
    for arrival in arrivals:
        if arrival == "b down":
            inbox.set_down("b", True)
        elif arrival == "interrupted":
            inbox.interrupt()
        else:
            inbox.deliver(*arrival[:2], 0, arrival[2])
    gather = Gather(True, deadline=clock.now() + 30)
    assert inbox.ready(0, 0, ["a", "b"], gather) is ready
    assert inbox.ready(0, 0, ["a", "b"], gather) is ready  # asking changes nothing
    inbox.wait(0, 0, ["a", "b"], clock.now() + 30)
    assert (clock.waits == []) is ready


def test_ready_leaves_the_round_open_for_a_late_sender():
    inbox = Inbox(StatsBook(), next_round=0, clock=FakeClock())
    inbox.deliver("a", 0, 0, _msg(0))
    assert inbox.ready(0, 0, ["a"], Gather(True))
    assert inbox.deliver("b", 0, 0, _msg(0)) == "received"  # not "late": nothing closed
    assert sorted(inbox.wait(0, 0, ["a", "b"], 0.0)) == ["a", "b"]


def test_ready_says_whether_an_asynchronous_gather_would_wait():
    """Bounded staleness: ready once every expected sender answered for round r − B or
    later, as :meth:`Inbox.wait_latest` waits; without a bound, always."""
    clock = FakeClock()
    inbox = Inbox(StatsBook(), synchronous=False, clock=clock)
    bounded = Gather(False, 2, clock.now() + 30)
    assert inbox.ready(5, 0, ["a"], Gather(False))  # no bound: nothing is waited for
    assert inbox.ready(1, 0, ["a"], bounded)  # rounds before 0 need no answer
    assert not inbox.ready(5, 0, ["a"], bounded)
    inbox.deliver("a", 3, 0, _msg(3))
    assert inbox.ready(5, 0, ["a"], bounded)
    assert not inbox.ready(6, 0, ["a"], bounded)  # round 3 is too old for round 6
    inbox.wait_latest(["a"], 5, 2, clock.now() + 30)
    assert clock.waits == []


def test_a_gather_is_woken_by_another_thread_not_by_its_deadline():
    """The real clock and real threads (the test above runs on a fake clock in one thread):
    a delivery (a gRPC server thread), a down mark or a stop (Control) wakes a waiting
    gather. Each wait has a 60 s deadline and its waker fires after 0.1 s; an unwoken wait
    lasts the whole 60 s, so ending before 30 s proves the wake-up on any loaded machine."""
    inbox = Inbox(StatsBook(), next_round=0)
    for round_index, wake in (
        (0, lambda: inbox.deliver("a", 0, 0, _msg(0))),
        (1, lambda: inbox.set_down("a", True)),
    ):
        threading.Timer(0.1, wake).start()
        started = time.monotonic()
        inbox.wait(round_index, 0, ["a"], started + 60)
        assert time.monotonic() - started < 30, round_index
    later = Inbox(StatsBook(), synchronous=False)
    threading.Timer(0.1, later.interrupt).start()
    started = time.monotonic()
    later.wait_latest(["a"], 10, 2, started + 60)
    assert time.monotonic() - started < 30


def test_asynchronous_inbox_ignores_a_resend_it_already_has():
    # A link resends what may have died with a broken stream; an asynchronous receiver that
    # had it (or a later one) must not count it received again.
    inbox = Inbox(StatsBook(), synchronous=False)
    assert inbox.deliver("1", 3, 0, _msg(3)) == "received"
    assert inbox.deliver("1", 2, 0, _msg(2), resent=True) == "stale resend"
    assert inbox.deliver("1", 3, 0, _msg(3), resent=True) == "stale resend"
    assert inbox.deliver("1", 4, 0, _msg(4), resent=True) == "received"  # never had it
    assert inbox.latest(["1"], 5)["1"].round == 4


def test_asynchronous_inbox_keeps_the_latest_message_per_sender():
    stats = StatsBook()
    inbox = Inbox(stats, synchronous=False)
    inbox.deliver("a", 3, 0, _msg(3))
    inbox.deliver("a", 1, 0, _msg(1))  # overtaken on the way: older, ignored
    inbox.deliver("b", 0, 0, WITHHELD)  # nothing to use
    got = inbox.latest(["a", "b"], round_index=5)
    assert list(got) == ["a"] and got["a"].round == 3
    assert inbox.latest(["a"], round_index=6)["a"].round == 3  # reused until replaced
    assert stats.snapshot()["a"].max_staleness == 3


# ----------------------------------------------------------------- real processes


def _run(procs, specs, follow_node=None):
    clients = {s.node_id: procs[s.node_id].client() for s in specs}
    for spec in specs:
        clients[spec.node_id].wait_ready()
        clients[spec.node_id].configure(spec)
    started = time.monotonic()
    for client in clients.values():
        client.start()
    followed = None
    if follow_node is not None:
        # Streams while the run goes on and ends by itself when the node is done.
        followed = list(clients[follow_node].samples(follow=True))
    wait_until(lambda: all(c.status().state == "done" for c in clients.values()), 60, "done")
    elapsed = time.monotonic() - started
    collected = {}
    for node, client in clients.items():
        pairs = followed if node == follow_node else list(client.samples())
        assert [r for r, _ in pairs] == list(range(specs[0].rounds))
        collected[node] = np.stack([v for _, v in pairs])
    return clients, collected, elapsed


@pytest.mark.e2e
def test_network_run_equals_simulation_bit_for_bit(cluster):
    procs = cluster.start_nodes(["0", "1", "2"])
    addresses = {n: p.address for n, p in procs.items()}

    # Fault-free: a generous deadline is never reached, so every message is used.
    specs = node_specs(ring_experiment("clean", rounds=25, deadline=20.0), addresses)
    clients, collected, _ = _run(procs, specs, follow_node="0")
    expected = simulate(specs)
    for node in addresses:
        assert collected[node].tobytes() == expected[node].tobytes(), node
        status = clients[node].status()
        assert status.error == "" and status.samples_stored == 25
        for peer, stats in status.outbound.items():
            assert (stats.sent, stats.withheld, stats.dropped) == (25, 0, 0), (node, peer)
        for peer, stats in status.inbound.items():
            assert (stats.received, stats.late, stats.rejected) == (25, 0, 0), (node, peer)

    # Scheduled faults, same processes: withheld notices replace the lost messages, so
    # the run again equals the simulator, and no receiver waits out its 20 s deadline.
    faults = [
        {"link": ["0", "1"], "rounds": [3, 9]},
        {"link": "all", "drop": 0.3, "rounds": [12, 18]},
    ]
    experiment = ring_experiment("faulty", rounds=25, deadline=20.0, faults=faults)
    specs = node_specs(experiment, addresses)
    clients, collected, elapsed = _run(procs, specs)
    expected = simulate(specs)
    for node in addresses:
        assert collected[node].tobytes() == expected[node].tobytes(), node
    # Real time, since it is real processes: one wait for a withheld message costs the whole
    # 20 s deadline, while the 25 rounds take about a second, so the bound is the deadline.
    assert elapsed < 20.0, f"a receiver waited for a withheld message ({elapsed:.1f} s)"
    withheld = clients["0"].status().outbound["1"].withheld
    assert withheld >= 6  # rounds 3..8 for certain, plus random drops in 12..17
    assert clients["1"].status().inbound["0"].withheld == withheld


def _iterate(experiment, sender, tensor, **kw):
    fields = dict(
        experiment=experiment,
        sender=sender,
        receiver="0",
        round=0,
        phase=0,
        kind="x",
        tensors=[tensor],
    )
    fields.update(kw)
    return peer_pb2.Iterate(**fields)


@pytest.mark.e2e
def test_bad_peers_are_rejected_counted_and_survived(cluster, tmp_path):
    (proc,) = cluster.start_nodes(["0"]).values()
    # Node 0's out-peers point at a port nobody listens on: its links just drop.
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        nowhere = f"127.0.0.1:{spare.getsockname()[1]}"
    experiment = ring_experiment("guarded", rounds=40, deadline=0.2)
    spec = node_specs(experiment, {"0": proc.address, "1": nowhere, "2": nowhere})[0]
    client = proc.client()
    client.wait_ready()

    with pytest.raises(ConfigError, match=r"^hyperparameters\.eta"):
        client.configure(dataclasses.replace(spec, hyperparameters={"eta": -1.0}))
    # The node checks with the same schema types as the orchestrator's parser.
    with pytest.raises(ConfigError, match=r"^hyperparameters\.eta: expected a finite number"):
        client.configure(dataclasses.replace(spec, hyperparameters={"eta": float("inf")}))
    with pytest.raises(ConfigError, match=r"^round_deadline"):
        client.configure(dataclasses.replace(spec, round_deadline=0.0))
    client.configure(spec)

    good = convert.tensor_from_array(np.zeros((3, 2)), "x")
    nan = convert.tensor_from_array(np.array([[0.0, np.nan]] * 3), "x")
    wrong_shape = convert.tensor_from_array(np.zeros((2, 2)), "x")
    oversized = convert.tensor_from_array(np.zeros((3000, 2)), "x")
    torn = convert.tensor_from_array(np.zeros((3, 2)), "x")
    torn.data = torn.data[:10]
    stream = [
        _iterate("guarded", "1", nan),
        _iterate("guarded", "1", wrong_shape),
        _iterate("another-experiment", "1", good),
        _iterate("guarded", "1", oversized),
        _iterate("guarded", "1", torn),
        _iterate("guarded", "stranger", good),
        _iterate("guarded", "1", good),  # the one well-formed message still gets through
    ]
    secret = client.access.link_secret("1", "0")  # of the link 1 -> 0 that Configure handed
    channel = open_channel(proc.address)
    try:
        stub = peer_pb2_grpc.PeerStub(channel)
        summary = exchange_as(stub, client, "1", stream, 60)
        # Streams that are not an in-neighbour's, or do not prove the link's secret, never
        # start: a stranger, no proof at all, a proof of another secret.
        with pytest.raises(grpc.RpcError) as refused:
            stub.Exchange(
                iter([_iterate("guarded", "1", good)]),
                timeout=10,
                metadata=(("starling-sender", "stranger"),),
            )
        assert refused.value.code().name == "PERMISSION_DENIED"
        with pytest.raises(grpc.RpcError) as refused:
            stub.Exchange(
                iter([_iterate("guarded", "1", good)]),
                timeout=10,
                metadata=(("starling-sender", "1"),),
            )
        assert refused.value.code().name == "UNAUTHENTICATED"
        with pytest.raises(grpc.RpcError) as refused:
            exchange_as(stub, client, "1", [_iterate("guarded", "1", good)], secret=secret[:-1])
        assert refused.value.code().name == "UNAUTHENTICATED"
    finally:
        channel.close()
    assert (summary.received, summary.rejected) == (1, 6)
    status = client.status()
    inbound = status.inbound
    # A message claiming another sender inside 1's stream is refused and counted on 1, the
    # sender the stream was admitted for; the claimed name appears only in the error, never
    # as a link of its own (a peer cannot book rejections on another, nor invent links).
    assert (inbound["1"].received, inbound["1"].rejected) == (1, 6)
    assert "stranger" not in inbound
    assert "stream of '1': a message claims 'stranger'" in proc.log()
    assert status.denied_peer_streams == 3
    log = proc.log()
    for reason in (
        "NaN or Inf",
        "has shape (2, 2)",
        "unknown experiment",
        "oversized",
        "bytes for shape",
    ):
        assert reason in log, reason

    # The node runs on, alone (its peers are unreachable), one deadline per round.
    client.start()
    with pytest.raises(NodeRejected, match="running"):
        client.configure(spec)
    with pytest.raises(ConfigError, match="receiver"):
        client.set_link("nobody", up=False)
    # Queued messages are dropped once a connection attempt (about 1 s) has failed.
    wait_until(lambda: client.status().outbound["1"].dropped >= 1, 20, "drops to be counted")
    status = client.status()
    assert status.state == "running" and status.error == "" and status.round >= 3
    client.stop()
    assert client.status().state == "stopped"


@pytest.mark.e2e
def test_message_over_the_transport_limit_ends_only_its_stream(cluster):
    """A message above ``--max-request-bytes`` (read before gRPC knows anything of its
    caller) ends its stream with RESOURCE_EXHAUSTED; the sender's next stream is welcome."""
    limit = 2 * 1024 * 1024
    (proc,) = cluster.start_nodes(["0"], extra=["--max-request-bytes", str(limit)]).values()
    experiment = ring_experiment("limits", rounds=5, deadline=0.2)
    spec = node_specs(experiment, {"0": proc.address, "1": "127.0.0.1:9", "2": "127.0.0.1:9"})[0]
    client = proc.client()
    client.wait_ready()
    client.configure(spec)
    good = convert.tensor_from_array(np.zeros((3, 2)), "x")
    huge = convert.tensor_from_array(np.zeros((200_000, 2)), "x")  # 3.2 MB > 2 MiB, unsplit
    channel = open_channel(proc.address)
    stub = peer_pb2_grpc.PeerStub(channel)
    try:
        with pytest.raises(grpc.RpcError) as caught:
            exchange_as(stub, client, "1", [_iterate("limits", "1", huge)])
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        # The sender's next stream is welcome, and the node is unharmed.
        summary = exchange_as(stub, client, "1", [_iterate("limits", "1", good)])
    finally:
        channel.close()
    assert (summary.received, summary.rejected) == (1, 0)
    assert client.status().inbound["1"].received == 1
    client.start()
    wait_until(lambda: client.status().state == "done", 20, "done")


@pytest.mark.e2e
def test_a_sender_does_not_send_a_message_over_its_limit_and_says_why(cluster):
    """The sending side of the test above: a link whose iterate would exceed the limit does
    not send it (the receiver's transport would end the whole stream), counts a send error
    naming the size and the limit, and sends the next message that fits on the same stream."""
    (proc,) = cluster.start_nodes(["0"]).values()
    experiment = ring_experiment("limits", rounds=5, deadline=0.2)
    addresses = {"0": proc.address, "1": "127.0.0.1:9", "2": "127.0.0.1:9"}
    specs = {spec.node_id: spec for spec in node_specs(experiment, addresses)}
    client = proc.client()
    client.wait_ready()
    client.configure(specs["0"])
    secret = client.access.link_secret("1", "0")
    settings = ChannelSettings(
        max_message_bytes=100_000,
        sender="1",
        experiment="limits",
        secrets=PeerSecrets(send={"0": secret}),
    )
    stats = StatsBook()
    link = OutboundLink(specs["1"], "0", proc.address, stats, settings)
    try:
        link.send(0, 0, Message("x", {"x": np.zeros((20000, 2))}))  # 320 kB
        link.send(0, 0, Message("x", {"x": np.ones((3, 2))}))
        wait_until(lambda: client.status().inbound["1"].received == 1, 10, "the one that fits")
    finally:
        link.close()
    sent = stats.snapshot()["0"]
    assert (sent.sent, sent.send_errors) == (1, 1)
    assert re.search(r"round 0: 3200\d\d bytes exceed the 100000-byte limit", sent.last_error)
    assert client.status().inbound["1"].rejected == 0


@pytest.mark.e2e
def test_sigterm_and_sigint_exit_cleanly(cluster):
    running, idle = cluster.start_nodes(["0", "1"]).values()
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        nowhere = f"127.0.0.1:{spare.getsockname()[1]}"
    # Node 0 runs with a long deadline, blocked waiting for peers that never answer.
    spec = node_specs(
        ring_experiment("term", rounds=50, deadline=30.0),
        {"0": running.address, "1": nowhere, "2": nowhere},
    )[0]
    client = running.client()
    client.wait_ready()
    client.configure(spec)
    client.start()
    wait_until(lambda: client.status().state == "running", 10, "running")
    for proc, signum in ((running, signal.SIGTERM), (idle, signal.SIGINT)):
        sent = time.monotonic()
        proc.signal(signum)
        assert proc.process.wait(timeout=15) == 0, proc.log()
        # Within the 5 s an orchestrator gives a node between SIGTERM and SIGKILL.
        assert time.monotonic() - sent < 5.0
        assert proc.process.stdout.read() == ""  # the ready line was the only output
        assert "Traceback" not in proc.log()
    assert (running.state_dir / "term" / "0" / "samples.bin").exists()


@pytest.mark.e2e
def test_port_in_use_is_one_clear_line_and_exit_2(cluster):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        proc = cluster.launch("clash", listen=address)
        assert proc.process.wait(timeout=30) == 2
    assert proc.process.stdout.read() == ""
    errors = proc.log().strip().splitlines()
    assert len(errors) == 1, errors
    assert address in errors[0] and "address already in use" in errors[0]


@pytest.mark.e2e
def test_unreachable_node_is_named(cluster):
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        nowhere = f"127.0.0.1:{spare.getsockname()[1]}"
    with NodeClient(nowhere, timeout=0.5) as client:
        with pytest.raises(NodeUnavailable, match=nowhere):
            client.wait_ready(timeout=0.5)
        with pytest.raises(NodeUnavailable, match=nowhere):
            client.status()


def test_asynchronous_inbox_bounds_staleness_until_the_deadline_and_counts_overruns():
    # Bounded staleness (stale synchronous parallel): at round r with bound B, wait until
    # every expected sender answered for round r − B or later, or the deadline passes.
    clock = FakeClock()
    stats = StatsBook()
    inbox = Inbox(stats, synchronous=False, clock=clock)
    start = clock.now()
    far = start + 30
    # Rounds before 0 need nobody: an empty inbox at round 1 with bound 2 is no wait.
    assert inbox.wait_latest(["a", "b"], 1, 2, far) == {}
    # a's round-3 message is recent enough at round 5; b answered round 3 with a withheld
    # notice (a cut link), which counts as an answer: nothing is waited for.
    inbox.deliver("a", 3, 0, _msg(3))
    inbox.deliver("b", 3, 0, WITHHELD)
    got = inbox.wait_latest(["a", "b"], 5, 2, far)
    assert list(got) == ["a"] and got["a"].round == 3
    assert clock.waits == [] and clock.now() == start
    # A fresher message arriving during the wait ends it there.
    clock.at(start + 1.5, lambda: inbox.deliver("a", 6, 0, _msg(6)))
    got = inbox.wait_latest(["a"], 8, 2, far)
    assert got["a"].round == 6 and clock.now() == start + 1.5
    assert stats.snapshot()["a"].overruns == 0
    # A sender that falls behind costs exactly the deadline, is counted as an overrun,
    # and its stale message is used all the same.
    deadline = clock.now() + 0.5
    got = inbox.wait_latest(["a"], 20, 2, deadline)
    assert clock.now() == deadline and got["a"].round == 6
    snapshot = stats.snapshot()["a"]
    assert (snapshot.overruns, snapshot.late, snapshot.max_staleness) == (1, 0, 14)
    # Stopping the node wakes a waiting round loop at once, and that is no overrun.
    stopped = clock.now() + 0.25
    clock.at(stopped, inbox.interrupt)
    inbox.wait_latest(["a"], 30, 2, clock.now() + 30)
    assert clock.now() == stopped and stats.snapshot()["a"].overruns == 1
