"""Every door of a node bounded, attacked from a process of its own
(:mod:`tests.door_attacker`): idle calls of every kind, oversized messages, replayed proofs.
Each attack is refused and counted in the node's status, and the legitimate use beside it
(the orchestrator's Health and Control, a genuine peer's stream) still works. How fast
Health and Control answer under a thousand idle calls of each kind is a figure of
``python -m benchmarks.doors``, not asserted here."""

from __future__ import annotations

import json
import queue
import socket
import subprocess
import sys
import threading

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from starling.node.protocol import convert
from starling.node.protocol.starling.v1 import control_pb2_grpc, peer_pb2, peer_pb2_grpc
from starling.node.runtime.doors import LOG_FIRST
from starling.node.runtime.link_proof import challenge_of, proof
from starling.node.runtime.transport import open_channel
from starling.node.tokens import node_token
from starling.orchestrator.execution.access import Access
from starling.orchestrator.execution.client import NodeClient
from starling.orchestrator.planning.node_specs import node_specs
from tests.node.test_runtime_harness import ROOT, Cluster, exchange_as, ring_experiment
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

MASTER = "doors-master-" + "q" * 20


@pytest.fixture
def guarded(tmp_path):
    """Node 0 of a 3-ring (its in-peers never run), started with its own Control token and
    configured by an orchestrator holding the master: ``(proc, client)``."""
    token_file = tmp_path / "0.token"
    token_file.write_text(node_token(MASTER, "0") + "\n")
    token_file.chmod(0o600)
    with Cluster(tmp_path) as cluster:
        (proc,) = cluster.start_nodes(
            ["0"], extra=["--id", "0", "--token-file", str(token_file)]
        ).values()
        client = NodeClient(proc.address, access=Access(token=MASTER), node_id="0")
        proc.clients.append(client)
        client.wait_ready()
        with socket.socket() as spare:
            spare.bind(("127.0.0.1", 0))
            nowhere = f"127.0.0.1:{spare.getsockname()[1]}"
        spec = node_specs(
            ring_experiment("doors", rounds=5, deadline=1.0),
            {"0": proc.address, "1": nowhere, "2": nowhere},
        )[0]
        client.configure(spec)
        yield proc, client


def _iterate(round_index: int = 0, value: float = 0.0) -> peer_pb2.Iterate:
    return peer_pb2.Iterate(
        experiment="doors",
        sender="1",
        receiver="0",
        round=round_index,
        phase=0,
        kind="x",
        tensors=[convert.tensor_from_array(np.full((3, 2), value), "x")],
    )


class Attacker:
    """The attacker's process: opens its calls, holds them until :meth:`stop`."""

    def __init__(self, tmp_path, plan: dict):
        self.stop_file = tmp_path / f"stop-{len(list(tmp_path.glob('stop-*')))}"
        plan = {"stop": str(self.stop_file), "hold": 120, **plan}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.door_attacker", json.dumps(plan)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        assert line.strip() == "opened", (line, self.proc.stderr.read())

    def stop(self) -> dict:
        self.stop_file.touch()
        out, err = self.proc.communicate(timeout=120)
        assert self.proc.returncode == 0, err[-3000:]
        return json.loads(out.splitlines()[-1])


def _health(address: str, access: Access) -> str:
    with access.channel(address, "0") as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(), timeout=10
        )
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def test_idle_calls_of_every_kind_are_bounded_counted_and_the_orchestrator_still_served(
    guarded, tmp_path
):
    proc, client = guarded
    count = 150
    attacker = Attacker(
        tmp_path,
        {
            "target": proc.address,
            "kinds": ["reflection", "watch", "check", "control", "samples", "peer"],
            "count": count,
            "sender": "2",
        },
    )
    try:
        # The orchestrator: Health and Control answer; a genuine peer's stream is admitted.
        for _ in range(5):
            assert _health(proc.address, client.access) == "SERVING"
            assert client.status(attempts=1).state == "configured"
        with open_channel(proc.address) as channel:
            summary = exchange_as(peer_pb2_grpc.PeerStub(channel), client, "1", [_iterate()])
        assert (summary.received, summary.rejected) == (1, 0)
    finally:
        saw = attacker.stop()
    # Without the token nothing gated is served at all; reflection answers the orchestrator
    # only, on a node that has a token.
    for kind in ("reflection", "control", "samples"):
        assert saw[kind] == {"UNAUTHENTICATED": count}, (kind, saw)
    # Ungated doors: one caller holds its share (4 checks, 2 watches; 8 streams as one
    # sender), the rest is refused at once.
    for kind, share in (("check", 4), ("watch", 2), ("peer", 8)):
        assert saw[kind].get("held", 0) + saw[kind].get("CANCELLED", 0) <= share, (kind, saw)
        assert saw[kind]["RESOURCE_EXHAUSTED"] >= count - share, (kind, saw)
    refused = client.status().refused
    assert refused["control:denied"] >= 3 * count, refused
    assert refused["health:caller_busy"] >= count - 4, refused
    assert refused["watch:caller_busy"] >= count - 2, refused
    assert refused["peer:capacity"] >= count - 8, refused
    # Logged, but not once per refusal: the first few, then one in a thousand.
    log = proc.log()
    assert 0 < log.count("refused a health call") <= LOG_FIRST, log[-2000:]
    assert log.count("refused a control call") <= LOG_FIRST + 1


def test_a_call_that_never_sends_its_request_is_cancelled_and_counted(guarded, tmp_path):
    """A held health check (its request never sent) holds a thread only until the door's
    watchdog cancels it (10 s), counted ``health:idle``; the slots are free again."""
    proc, client = guarded
    attacker = Attacker(
        tmp_path, {"target": proc.address, "kinds": ["check"], "count": 4, "hold": 30}
    )
    try:
        wait_until(lambda: client.status().refused.get("health:idle", 0) == 4, 30, "the watchdog")
    finally:
        saw = attacker.stop()
    assert saw == {"check": {"CANCELLED": 4}}, saw
    assert _health(proc.address, client.access) == "SERVING"


def test_memory_before_identity_is_bounded_by_the_request_limit(guarded, tmp_path):
    """A Configure of 64 MB: without the token it is refused before it is read (counted);
    with it, gRPC refuses a message over --max-request-bytes (4 MiB) before the node holds
    it. The node's peak memory is a figure of ``benchmarks.doors``."""
    proc, client = guarded
    attacker = Attacker(
        tmp_path,
        {"target": proc.address, "kinds": ["big"], "count": 3, "big_bytes": 64 << 20},
    )
    saw = attacker.stop()
    assert saw == {"big": {"UNAUTHENTICATED": 3}}, saw
    config = client.configure_request(
        node_specs(
            ring_experiment("doors", rounds=5, deadline=1.0),
            {"0": proc.address, "1": "127.0.0.1:9", "2": "127.0.0.1:9"},
        )[0]
    )
    config.experiment = "x" * (8 << 20)
    with client.access.channel(proc.address, "0") as channel:
        stub = control_pb2_grpc.ControlStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Configure(config, timeout=30)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert client.status().experiment == "doors"  # untouched
    assert client.status().refused["control:denied"] >= 3


def test_a_captured_proof_opens_no_other_stream(guarded):
    """Someone who captured a genuine stream's opening (its challenge and the proof that
    answered it) presents that proof on a stream of its own: the node's new challenge makes
    it worthless (UNAUTHENTICATED, counted), and nothing of the secret crossed the wire."""
    proc, client = guarded
    secret = client.access.link_secret("1", "0")
    captured: dict[str, str] = {}
    outgoing: queue.Queue = queue.Queue()
    with open_channel(proc.address) as channel:
        stub = peer_pb2_grpc.PeerStub(channel)
        opened: list[grpc.Future] = []
        started = threading.Event()

        def genuine():
            started.wait(10)
            captured["challenge"] = challenge_of(opened[0].initial_metadata()) or ""
            captured["proof"] = proof(secret, "doors", "1", "0", captured["challenge"])
            yield peer_pb2.Iterate(proof=captured["proof"])
            yield from iter(outgoing.get, None)

        call = stub.Exchange.future(genuine(), metadata=(("starling-sender", "1"),), timeout=30)
        opened.append(call)
        started.set()
        outgoing.put(_iterate())
        wait_until(lambda: client.status().inbound["1"].received == 1, 10, "the genuine one")
        assert secret not in captured["proof"] and len(captured["challenge"]) == 32

        replayed = stub.Exchange.future(
            iter([peer_pb2.Iterate(proof=captured["proof"]), _iterate(1)]),
            metadata=(("starling-sender", "1"),),
            timeout=10,
        )
        with pytest.raises(grpc.RpcError) as refused:
            replayed.result()
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        outgoing.put(None)
        assert call.result(timeout=10).received == 1
    status = client.status()
    assert status.denied_peer_streams == 1 and status.inbound["1"].received == 1


def test_parts_are_joined_and_parts_beyond_the_run_are_refused(guarded):
    """An iterate in parts is joined and taken as if it came whole; parts that add up to
    more than an iterate of the run can be (here 3 MB for (3, 2) iterates) are refused,
    counted ``rejected`` naming why, and the stream goes on."""
    from starling.node.protocol.wire import PART_BYTES, split_iterate

    proc, client = guarded
    good = _iterate().SerializeToString()
    halves = [peer_pb2.Iterate(chunk=good[:10], more=True), peer_pb2.Iterate(chunk=good[10:])]
    big = peer_pb2.Iterate(experiment="doors", sender="1", receiver="0", round=1, kind="x")
    big.tensors.add(name="x", dtype="float64", data=bytes(3 << 20)).shape.extend([3, 131072])
    parts = [peer_pb2.Iterate.FromString(p) for p in split_iterate(big.SerializeToString())]
    assert len(parts) == 4 and all(len(p.chunk) <= PART_BYTES for p in parts)
    with open_channel(proc.address) as channel:
        summary = exchange_as(
            peer_pb2_grpc.PeerStub(channel), client, "1", [*halves, *parts, _iterate(2)]
        )
    assert (summary.received, summary.rejected) == (2, 1)
    inbound = client.status().inbound["1"]
    assert (inbound.received, inbound.rejected) == (2, 1)
    assert "beyond the" in inbound.last_error and "this node takes for this run" in (
        inbound.last_error
    )


def test_iterates_above_the_request_limit_cross_in_parts_and_equal_simulate(
    tmp_path, starling_home
):
    """A run whose iterates (300 chains x dim 2000, 4.8 MB) are larger than what any node
    reads in one message (4 MiB): each crosses in parts after its stream proved itself,
    and the samples equal ``simulate``'s byte for byte (synchronous sampler)."""
    import yaml

    from tests.conftest import run_cli

    experiment = {
        "name": "parts",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.001},
        "model": {"name": "linear_regression", "params": {"dim": 2000}},
        "data": {"source": "synthetic", "size": 20, "seed": 5},
        "topology": {"kind": "ring", "nodes": 3},
        "rounds": 4,
        "chains": 300,
        "seed": 3,
        "round_deadline": 60.0,
        "evaluation": {"diagnostics": False},
    }
    path = tmp_path / "parts.yaml"
    path.write_text(yaml.safe_dump(experiment))
    for command in ("run", "simulate"):
        done = run_cli(command, str(path), "--out", str(tmp_path / command), env_home=starling_home)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    for node, books in metrics["link_stats"].items():
        for peer, counters in books["inbound"].items():
            assert (counters["received"], counters["rejected"]) == (4, 0), (node, peer)
    for node in ("0", "1", "2"):
        with (
            np.load(tmp_path / "run" / "samples" / f"node-{node}.npz") as got,
            np.load(tmp_path / "simulate" / "samples" / f"node-{node}.npz") as want,
        ):
            assert np.array_equal(got["samples"], want["samples"]), node


def test_reflection_answers_the_orchestrator_only_on_a_node_with_a_token(guarded):
    """Reflection describes the API, and its streams hold threads: on a node that can tell
    the orchestrator from others it passes the same check as Control."""
    from tests.operating import Reflector

    proc, client = guarded
    with Reflector(proc.address, client.access.channel(proc.address, "0")) as ours:
        assert "starling.v1.Control" in ours.services()
    with Reflector(proc.address) as stranger:
        with pytest.raises(grpc.RpcError) as refused:
            stranger.services()
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert client.status().refused["control:denied"] >= 1
