"""The node's doors under misuse: what a peer or a client sends that it should not, and
configurations that cannot work. Each case once stopped a node or leaked through it; each
must now be refused, named and counted, with the node running on."""

from __future__ import annotations

import dataclasses
import queue
import threading
import time

import grpc
import numpy as np
import pytest

from starling.node.messages import Message
from starling.node.params import ConfigError
from starling.node.protocol import convert
from starling.node.protocol.contract import NodeState
from starling.node.protocol.starling.v1 import (
    control_pb2,
    control_pb2_grpc,
    peer_pb2,
    peer_pb2_grpc,
)
from starling.node.runtime.checks import Rejected, check_iterate, check_spec
from starling.node.runtime.inbox import PENDING_BYTES, PENDING_MESSAGES, REFUSED, Inbox
from starling.node.runtime.run import EARLIER_SUFFIX, SAMPLES_FILE, build
from starling.node.runtime.runtime import NodeRuntime
from starling.node.runtime.servicers import MAX_SAMPLE_STREAMS
from starling.node.runtime.stats import StatsBook
from starling.node.runtime.store import SampleStore
from starling.node.runtime.streaming import stream_samples
from starling.node.runtime.transport import open_channel
from starling.node.spec import MAX_SECONDS
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.execution.access import Access
from starling.orchestrator.execution.client import NodeClient, NodeRejected
from starling.orchestrator.planning.node_specs import node_specs
from tests.node.test_runtime_harness import exchange_as, ring_experiment, wait_until

NOWHERE = {"0": "127.0.0.1:1", "1": "127.0.0.1:2", "2": "127.0.0.1:3"}


def _spec(name: str = "door", **overrides):
    return node_specs(ring_experiment(name, rounds=20, deadline=0.2, **overrides), NOWHERE)[0]


def _iterate(tensors: dict[str, np.ndarray], kind: str = "x", **fields) -> peer_pb2.Iterate:
    header = dict(experiment="door", sender="1", receiver="0", round=0, phase=0, kind=kind)
    header.update(fields)
    iterate = peer_pb2.Iterate(**header)
    for name, value in tensors.items():
        iterate.tensors.append(convert.tensor_from_array(value, name))
    return iterate


def _small_specs(algorithm: str, topology: str, name: str) -> list:
    """The node specs of a 3-node, 3-chain, dim-2 linear regression run of ``algorithm``."""
    raw = {
        "name": name,
        "algorithm": algorithm,
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "data": {"source": "synthetic", "size": 20, "seed": 5},
        "topology": {"kind": topology, "nodes": 3},
        "rounds": 5,
        "chains": 3,
    }
    return node_specs(parse_experiment(raw), NOWHERE)


# ----------------------------------------------------------------- checks, no process


def test_a_message_of_a_kind_the_program_never_receives_is_rejected():
    spec = _spec()
    program, _ = build(spec)
    senders = frozenset({"1", "2"})
    good = _iterate({"x": np.zeros((3, 2))})
    assert check_iterate(good, spec, program, senders) is not None
    # Well-formed in every other way: a tensor named after its kind, of the right shape.
    # Accepted, it would reach the sampler, which reads its "x" and fails the round loop.
    with pytest.raises(Rejected, match="unexpected message kind 'foo'"):
        check_iterate(_iterate({"foo": np.zeros((3, 2))}, kind="foo"), spec, program, senders)


@pytest.mark.parametrize(
    ("shape", "data_bytes", "reason"),
    [
        ((3000, 2), 48_000, "oversized message 'x' \\(its shapes declare 48000 bytes"),
        ((2**40, 2**40), 48, "oversized"),  # refused by its declared shape alone
        ((3, 2), 48_000, "48000 bytes for shape \\(3, 2\\)"),  # more bytes than it declares
        ((3, 2), 40, "40 bytes for shape"),
    ],
)
def test_a_tensor_whose_size_is_wrong_is_refused_whatever_it_declares(shape, data_bytes, reason):
    """The size check reads the shapes a message declares, not its bytes (reading those
    copies them); bytes that disagree with the declared shape are refused on decoding."""
    spec = _spec()
    program, _ = build(spec)
    iterate = _iterate({})
    tensor = iterate.tensors.add(name="x", dtype="float64", data=bytes(data_bytes))
    tensor.shape.extend(shape)
    with pytest.raises(Rejected, match=reason):
        check_iterate(iterate, spec, program, frozenset({"1", "2"}))


def test_push_sum_refuses_the_other_variants_kind():
    spec = _small_specs("push-sum-rs", "directed_ring", "door-ps")[0]
    program, _ = build(spec)
    (sender,) = spec.schedule[0].in_peers
    sums = {"sigma": np.zeros((3, 2)), "tau": np.ones((3, 1))}
    for kind, accepted in (("sums", True), ("share", False)):
        iterate = _iterate(sums, kind=kind, experiment="door-ps", sender=sender)
        if accepted:
            assert check_iterate(iterate, spec, program, frozenset({sender})) is not None
        else:
            with pytest.raises(Rejected, match=f"unexpected message kind {kind!r}"):
                check_iterate(iterate, spec, program, frozenset({sender}))


@pytest.mark.parametrize("dtype", ["float32", "int64", "int32"])
def test_an_iterate_that_is_not_float64_is_refused_naming_the_tensor(dtype):
    """Every sampler computes and sends float64; a float32 or integer iterate of the right
    shape used to enter the receiver's sums (and ``run`` then differed from ``simulate``)."""
    spec = _spec()
    program, _ = build(spec)
    iterate = _iterate({"x": np.ones((3, 2), dtype=dtype)})
    with pytest.raises(Rejected, match=f"peer '1': tensor 'x' is {dtype}, expected float64"):
        check_iterate(iterate, spec, program, frozenset({"1", "2"}))


@pytest.mark.parametrize(
    ("algorithm", "kind", "iterate", "weight"),
    [("push-sum", "share", "x", "y"), ("push-sum-rs", "sums", "sigma", "tau")],
)
@pytest.mark.parametrize("bad", [0.0, -0.5, -1e-300])
def test_a_push_sum_weight_at_or_below_zero_is_refused(algorithm, kind, iterate, weight, bad):
    """An admitted peer's weight share of 0 or less made the receiver's Z = W / y inf or
    NaN from that round on; a positive one is taken, whatever its size within the bound."""
    spec = _small_specs(algorithm, "directed_ring", "door-ps")[0]
    program, _ = build(spec)
    (sender,) = spec.schedule[0].in_peers
    weights = np.full((3, 1), 0.4)
    taken = _iterate(
        {iterate: np.zeros((3, 2)), weight: weights}, kind=kind, experiment="door-ps", sender=sender
    )
    assert check_iterate(taken, spec, program, frozenset({sender})) is not None
    weights[1, 0] = bad
    refused = _iterate(
        {iterate: np.zeros((3, 2)), weight: weights}, kind=kind, experiment="door-ps", sender=sender
    )
    with pytest.raises(Rejected, match=f"tensor '{weight}' holds .*expected every value above 0"):
        check_iterate(refused, spec, program, frozenset({sender}))


def test_a_counter_may_be_an_integer():
    """async SGHMC's workers send the round of their gradient as an integer: still taken."""
    specs = _small_specs("async-sghmc", "star", "door-async")
    spec = next(s for s in specs if s.in_peers())
    program, _ = build(spec)
    sender = sorted(spec.in_peers())[0]
    message = _iterate(
        {"grad": np.zeros((3, 2)), "at_round": np.array([0])},
        kind="grad",
        experiment="door-async",
        sender=sender,
        receiver=spec.node_id,
        phase=1,
    )
    assert check_iterate(message, spec, program, frozenset({sender})) is not None


@pytest.mark.parametrize(
    ("weights", "reason"),
    [
        ({"0": 0.5, "1": 0.25}, r"schedule\[0\]\.weights: no weight for in-peer '2'"),
        ({"0": 0.5, "1": -0.25, "2": 0.75}, r"schedule\[0\]\.weights\.1: must be in \[0, 1\]"),
        ({"0": 0.0, "1": 0.75, "2": 0.75}, r"weights sum to 1\.5, more than 1"),
    ],
)
def test_mixing_weights_that_cannot_be_a_stochastic_row_are_refused(weights, reason):
    spec = _spec()
    hood = dataclasses.replace(spec.schedule[0], weights=weights)
    with pytest.raises(ConfigError, match=reason):
        build(dataclasses.replace(spec, schedule=(hood,)))


def test_no_node_of_a_spec_may_take_the_orchestrators_identity():
    """An orchestrator that does not check (another implementation, an old version) cannot
    make a node serve as, or admit Peer streams from, the orchestrator's identity."""
    spec = _spec()
    renamed = {"1": "orchestrator"}
    schedule = tuple(
        dataclasses.replace(h, in_peers=tuple(renamed.get(p, p) for p in h.in_peers))
        for h in spec.schedule
    )
    for bad in (
        dataclasses.replace(spec, node_id="orchestrator"),
        dataclasses.replace(spec, schedule=schedule),
        dataclasses.replace(spec, peers={**spec.peers, "orchestrator": "127.0.0.1:9"}),
    ):
        with pytest.raises(ConfigError, match=r"^node ids: 'orchestrator' is the orchestrator's"):
            check_spec(bad)
    check_spec(spec)


def test_a_round_deadline_beyond_what_clocks_hold_is_refused_on_both_sides():
    spec = _spec()
    check_spec(dataclasses.replace(spec, round_deadline=MAX_SECONDS))
    with pytest.raises(ConfigError, match=r"^round_deadline: .* up to 1e\+06, got 10000000000\.0"):
        check_spec(dataclasses.replace(spec, round_deadline=1e10))
    with pytest.raises(ConfigError, match="round_deadline"):
        ring_experiment("door", rounds=5, deadline=1e10)


def test_names_too_long_for_a_file_are_refused_before_anything_is_released():
    with pytest.raises(ConfigError, match=r"^experiment: too long for a file name \(300"):
        check_spec(dataclasses.replace(_spec(), experiment="e" * 300))
    # Quoting counts: 70 three-byte characters are 630 characters in a file name.
    with pytest.raises(ConfigError, match=r"^node_id: too long"):
        check_spec(dataclasses.replace(_spec(), node_id="é" * 70))


@pytest.mark.parametrize("shape", [[1] * 40, [0, 2**62, 2**62]])
def test_impossible_tensor_shapes_are_tensor_errors(shape):
    tensor = convert.tensor_from_array(np.zeros(0), "x")
    del tensor.shape[:]
    tensor.shape.extend(shape)
    with pytest.raises(convert.TensorError, match="tensor 'x'"):
        convert.array_from_tensor(tensor)


def test_what_one_sender_has_waiting_is_bounded():
    inbox = Inbox(StatsBook())
    small = Message("x", {"x": np.zeros((1, 2))})
    outcomes = [inbox.deliver("1", r, 0, small) for r in range(PENDING_MESSAGES + 5)]
    assert outcomes.count("received") == PENDING_MESSAGES
    assert outcomes[-5:] == ["overflow"] * 5
    assert inbox.deliver("2", 0, 0, small) == "received"  # another sender is not affected
    # Closing rounds frees their share: the sender may send again.
    inbox.wait(0, 0, ("1", "2"), deadline=0.0)
    assert inbox.deliver("1", PENDING_MESSAGES + 10, 0, small) == "received"
    # Bytes bound it too, but a single message is always taken, however large.
    big = Message("x", {"x": np.zeros(PENDING_BYTES // 8 + 1)})
    fresh = Inbox(StatsBook())
    assert fresh.deliver("1", 0, 0, big) == "received"
    assert fresh.deliver("1", 1, 0, small) == "overflow"


def test_a_message_refused_for_its_content_answers_for_its_round_and_counts_nothing():
    """A sampler that ran away sends finite values beyond the screening bound, round after
    round: each was refused, and its receivers waited out their whole deadline for it, every
    round (a diverged 60-round quickstart took 300 s). Refused for its content, it answers for
    its round like a withheld notice: the round closes at once, without it, and the inbox
    counts nothing (the receiver counts it rejected)."""
    stats = StatsBook()
    inbox = Inbox(stats)
    small = Message("x", {"x": np.zeros((1, 2))})
    assert inbox.deliver("1", 0, 0, REFUSED) == "refused"
    assert inbox.deliver("2", 0, 0, small) == "received"
    started = time.monotonic()
    got = inbox.wait(0, 0, ("1", "2"), deadline=started + 30.0)
    assert time.monotonic() - started < 5.0  # not the deadline: both answered
    assert set(got) == {"2"}
    assert stats.snapshot().get("1") is None or stats.snapshot()["1"].received == 0
    # A usable message of the same round that comes before the round closes is taken.
    inbox.deliver("1", 2, 0, REFUSED)
    assert inbox.deliver("1", 2, 0, small) == "received"
    assert inbox.deliver("1", 2, 0, small) == "duplicate"
    assert set(inbox.wait(2, 0, ("1",), deadline=time.monotonic() + 30.0)) == {"1"}
    # A sender that never answers is still waited for, to the deadline.
    inbox.deliver("1", 3, 0, REFUSED)
    began = time.monotonic()
    assert inbox.wait(3, 0, ("1", "2"), deadline=began + 0.3) == {}
    assert time.monotonic() - began >= 0.3
    # Asynchronous programs: it answers for its round under a staleness bound too.
    lazy = Inbox(StatsBook(), synchronous=False)
    lazy.deliver("1", 4, 0, REFUSED)
    began = time.monotonic()
    assert lazy.wait_latest(("1",), 5, 1, deadline=began + 30.0) == {}
    assert time.monotonic() - began < 5.0


def test_a_follow_stream_ends_when_the_node_is_configured_for_another_run(tmp_path):
    first, second = SampleStore(tmp_path / "a.bin"), SampleStore(tmp_path / "b.bin")
    for r in range(3):
        first.append(r, np.full((1, 2), r))
        second.append(r, np.full((1, 2), 10 + r))
    now = {"store": first}
    batches = stream_samples(lambda: (now["store"], NodeState.RUNNING), 0, True, lambda: True)
    try:
        assert [index for index, _, _ in next(batches)] == [0, 1, 2]
        now["store"] = second  # reconfigured: the follower must not go on with run B's samples
        assert list(batches) == []
    finally:
        first.close()
        second.close()


def test_a_follow_stream_waits_through_stopping_for_the_last_sample(tmp_path):
    """A node that says stopping may still store the round Stop found computing: a
    follower ends only once it says stopped and it has read everything."""
    store = SampleStore(tmp_path / "s.bin")
    store.append(0, np.zeros((1, 2)))
    now = {"state": NodeState.STOPPING}
    batches = stream_samples(lambda: (store, now["state"]), 0, True, lambda: True)
    try:
        assert [index for index, _, _ in next(batches)] == [0]

        def round_returns() -> None:
            time.sleep(0.3)  # the follower is waiting on the store by then
            store.append(1, np.ones((1, 2)))
            now["state"] = NodeState.STOPPED
            store.wake()

        threading.Thread(target=round_returns).start()
        assert [index for batch in batches for index, _, _ in batch] == [1]
    finally:
        store.close()


# ----------------------------------------------------------------- the runtime, in process


def test_a_configure_that_fails_half_way_leaves_the_node_unconfigured(tmp_path):
    runtime = NodeRuntime(tmp_path / "state")
    try:
        runtime.configure(_spec("first"), peer_secret="s")
        # The second run's folder cannot be made: a file stands where its folder goes.
        (tmp_path / "state" / "second").write_text("in the way")
        with pytest.raises(OSError):
            runtime.configure(_spec("second"), peer_secret="s")
        status = runtime.status()
        assert (status.state, runtime.configured) == (NodeState.IDLE, False)
        assert "configure failed" in status.error
        with pytest.raises(Exception, match="cannot start"):
            runtime.start()
        runtime.configure(_spec("first"), peer_secret="s")  # and it can be configured again
        assert runtime.status().state == NodeState.CONFIGURED
    finally:
        runtime.shutdown()


def test_a_fresh_start_keeps_the_earlier_runs_samples_one_run_back(tmp_path):
    runtime = NodeRuntime(tmp_path / "state")
    spec = _spec()
    try:
        for value in (1.0, 2.0, 3.0):
            runtime.configure(spec, fresh=True, peer_secret="s")
            runtime.current_run.store.append(0, np.full((3, 2), value))
    finally:
        runtime.shutdown()
    folder = tmp_path / "state" / "door" / "0"
    earlier = folder.with_name("0" + EARLIER_SUFFIX)
    for where, value in ((folder, 3.0), (earlier, 2.0)):
        store = SampleStore(where / SAMPLES_FILE)
        assert [v[0, 0] for _, _, v in store.read(0, 5)] == [value]
        store.close()
    assert sorted(p.name for p in folder.parent.iterdir()) == ["0", "0" + EARLIER_SUFFIX]


# ----------------------------------------------------------------- a real node process


@pytest.mark.e2e
def test_an_open_stream_does_not_outlive_its_runs_secret(node):
    proc, client = node
    client.configure(_spec())
    outgoing: queue.Queue = queue.Queue()
    channel = open_channel(proc.address)
    try:
        stub = peer_pb2_grpc.PeerStub(channel)
        call = exchange_as(stub, client, "1", iter(outgoing.get, None), 30, future=True)
        outgoing.put(_iterate({"x": np.zeros((3, 2))}))
        wait_until(lambda: client.status().inbound["1"].received == 1, 10, "first message")
        # A new run, by an orchestrator with a secret of its own.
        run_b = NodeClient(proc.address, access=Access())
        proc.clients.append(run_b)
        run_b.configure(_spec("door-b"))
        assert run_b.access.link_secret("1", "0") != client.access.link_secret("1", "0")
        outgoing.put(_iterate({"x": np.full((3, 2), 123.0)}, experiment="door-b"))
        with pytest.raises(grpc.RpcError) as ended:
            call.result(timeout=10)
        assert ended.value.code() == grpc.StatusCode.UNAUTHENTICATED
        status = run_b.status()
        assert (status.experiment, status.inbound["1"].received) == ("door-b", 0)
        assert status.denied_peer_streams == 1
        outgoing.put(None)
    finally:
        channel.close()


@pytest.mark.e2e
def test_an_open_stream_whose_proof_still_holds_speaks_on_into_the_new_configuration(node):
    """The other side of the test above: the node is configured again for the same run by
    the same orchestrator (a reconfiguration after a fault) while a peer's stream is open.
    The stream's next message passes the gate under the new terms and is filed in the new
    configuration. Configured for another experiment, even by the same orchestrator, the
    stream ends: its proof names the run it was made for."""
    proc, client = node
    client.configure(_spec())
    outgoing: queue.Queue = queue.Queue()
    channel = open_channel(proc.address)
    try:
        stub = peer_pb2_grpc.PeerStub(channel)
        call = exchange_as(stub, client, "1", iter(outgoing.get, None), 30, future=True)
        outgoing.put(_iterate({"x": np.zeros((3, 2))}))
        wait_until(lambda: client.status().inbound["1"].received == 1, 10, "first message")
        client.configure(_spec())
        outgoing.put(_iterate({"x": np.ones((3, 2))}, round=1))
        wait_until(lambda: client.status().inbound["1"].received == 1, 10, "in the new one")
        status = client.status()
        assert status.inbound["1"].rejected == 0 and status.denied_peer_streams == 0
        client.configure(_spec("door-b"))
        outgoing.put(_iterate({"x": np.ones((3, 2))}, experiment="door-b"))
        with pytest.raises(grpc.RpcError) as ended:
            call.result(timeout=10)
        assert ended.value.code() == grpc.StatusCode.UNAUTHENTICATED
        status = client.status()
        assert status.experiment == "door-b" and status.inbound["1"].received == 0
        assert status.denied_peer_streams == 1
        outgoing.put(None)
    finally:
        channel.close()


def test_each_node_is_handed_only_its_own_links_secrets():
    """Without TLS a node proves who it is only by a secret; with the run's one secret any
    node could speak as any other. Configure now hands node 0 the secrets of its own links
    (to and from 1 and 2), each different, none of another link, and not the run's secret
    from which they all derive."""
    access = Access()
    spec = _spec()
    client = NodeClient("127.0.0.1:1", access=access)
    try:
        config = client.configure_request(spec)
    finally:
        client.close()
    assert dict(config.send_secrets) == {p: access.link_secret("0", p) for p in ("1", "2")}
    assert dict(config.accept_secrets) == {p: access.link_secret(p, "0") for p in ("1", "2")}
    handed = {config.peer_secret, *config.send_secrets.values(), *config.accept_secrets.values()}
    assert len(handed) == 5 and access.peer_secret not in handed
    assert access.link_secret("1", "2") not in handed  # another link's


@pytest.mark.e2e
def test_an_in_neighbour_cannot_speak_as_another_one(node):
    """Node 1 of the ring knows the secret of its link 1 -> 0, not that of 2 -> 0: a stream
    it opens to node 0 claiming to be 2 is refused (counted), whatever secret it has."""
    proc, client = node
    client.configure(_spec())
    mine = client.access.link_secret("1", "0")
    own = client.access.link_secrets("1", ["0"], ["0"])[0]  # node 1's own from Configure
    channel = open_channel(proc.address)
    try:
        stub = peer_pb2_grpc.PeerStub(channel)
        # Its own link's, its own, another link's, and the run's (which no node is handed;
        # every node of the run held it before, and it let any node speak as any other).
        for secret in (mine, own, client.access.link_secret("1", "2"), client.access.peer_secret):
            with pytest.raises(grpc.RpcError) as refused:
                exchange_as(
                    stub,
                    client,
                    "2",
                    [_iterate({"x": np.zeros((3, 2))}, sender="2")],
                    secret=secret,
                )
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        exchange_as(stub, client, "2", [_iterate({"x": np.zeros((3, 2))}, sender="2")])
    finally:
        channel.close()
    status = client.status()
    assert status.denied_peer_streams == 4 and status.inbound["2"].received == 1


@pytest.mark.e2e
def test_a_run_too_big_for_the_nodes_memory_is_refused_and_the_node_serves_on(node):
    _, client = node
    client.configure(_spec())
    huge = dataclasses.replace(
        _spec("door-huge"),
        chains=10**6,
        model=dataclasses.replace(_spec().model, params={"dim": 100_000}),
    )
    with pytest.raises(NodeRejected, match="Configure: the node lacks the memory for it"):
        client.configure(huge)
    status = client.status()
    assert (status.experiment, status.state) == ("door", "configured")  # the run it had


@pytest.mark.e2e
def test_sample_streams_are_limited_and_control_keeps_answering(node):
    proc, client = node
    client.configure(_spec())
    channel = grpc.insecure_channel(proc.address)
    stub = control_pb2_grpc.ControlStub(channel)
    followers = [_Follower(stub) for _ in range(MAX_SAMPLE_STREAMS)]
    try:
        # Each follower holds a server thread for as long as the run lasts.
        wait_until(lambda: _refused(stub) is not None, 20, "one stream past the limit refused")
        assert f"limit of {MAX_SAMPLE_STREAMS} sample streams" in (_refused(stub) or "")
        assert client.status().state == "configured"  # Control still answers
        for follower in followers:
            follower.stop()
        # The slots come back once the followers are gone.
        wait_until(lambda: _refused(stub) is None, 20, "slots released")
    finally:
        for follower in followers:
            follower.stop()
        channel.close()


class _Follower:
    """A follow stream held open in a thread. A probe of :func:`_refused` can take the last
    slot for a moment before a slow-starting follower is served: the follower refused then
    opens its stream again, so the limit is reached whatever the order."""

    def __init__(self, stub: control_pb2_grpc.ControlStub) -> None:
        self._stub = stub
        self._stopped = threading.Event()
        self._stream = None
        self._lock = threading.Lock()
        threading.Thread(target=self._hold, daemon=True).start()

    def _hold(self) -> None:
        while not self._stopped.is_set():
            with self._lock:
                if self._stopped.is_set():
                    return
                self._stream = self._stub.StreamSamples(
                    control_pb2.SamplesRequest(follow=True), timeout=60
                )
            try:
                for _ in self._stream:
                    pass
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    return  # cancelled
                time.sleep(0.05)

    def stop(self) -> None:
        with self._lock:
            self._stopped.set()
            if self._stream is not None:
                self._stream.cancel()


def _refused(stub: control_pb2_grpc.ControlStub) -> str | None:
    """The refusal of one more (non-follow) sample stream, or None if it was served."""
    try:
        list(stub.StreamSamples(control_pb2.SamplesRequest(), timeout=10))
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return exc.details()
        raise
    return None


@pytest.mark.parametrize("kind", ["ring", "path", "star", "full", "grid"])
def test_the_orchestrators_weights_pass_the_nodes_check(kind):
    topology = {"kind": kind, "nodes": 4}
    if kind == "grid":
        topology.update(rows=2, cols=2)
    experiment = ring_experiment("door", rounds=5, deadline=1.0, topology=topology)
    addresses = {str(k): f"127.0.0.1:{k + 1}" for k in range(4)}
    for spec in node_specs(experiment, addresses):
        build(spec)
