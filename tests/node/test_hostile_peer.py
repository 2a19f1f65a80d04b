"""What a hostile or buggy peer or client could do to a node that the other door tests do
not cover: each case once cost the node memory without bound or took what it should have
refused; each must now be bounded or refused, with the node running on."""

from __future__ import annotations

import logging
import re
import threading
import time
import tracemalloc

import grpc
import numpy as np
import pytest

from starling.node.logs import TextFormatter, redact_run
from starling.node.messages import Message
from starling.node.params import ConfigError
from starling.node.protocol import convert
from starling.node.protocol.starling.v1 import (
    control_pb2,
    control_pb2_grpc,
    peer_pb2,
    peer_pb2_grpc,
)
from starling.node.runtime.inbox import Inbox
from starling.node.runtime.run import CHECKPOINT_FILE
from starling.node.runtime.stats import StatsBook
from starling.node.runtime.transport import open_channel
from starling.orchestrator.planning.node_specs import node_specs
from tests.node.test_runtime_harness import exchange_as, ring_experiment
from tests.waiting import wait_until

NOWHERE = {"0": "127.0.0.1:1", "1": "127.0.0.1:2", "2": "127.0.0.1:3"}


def test_a_flood_for_one_future_round_costs_an_asynchronous_inbox_no_memory_per_message():
    """An asynchronous program takes every message (it keeps only each sender's latest),
    but it used to note each one pending in a list until its round was gathered: a peer
    repeating one valid message for a round far ahead grew the node's memory for ever."""
    stats = StatsBook()
    inbox = Inbox(stats, synchronous=False)
    message = Message("x", {"x": np.zeros((1, 2))}, round=50)
    flood = 20_000
    inbox.deliver("1", 50, 0, message)  # the first takes what a sender's entry needs
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        outcomes = {inbox.deliver("1", 50, 0, message) for _ in range(flood - 1)}
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert outcomes == {"received"}
    assert grown < 64 * 1024, f"{grown} bytes for {flood} messages of one round"
    counters = stats.snapshot()["1"]
    assert (counters.received, counters.pending_received) == (flood, flood)
    assert counters.pending_bytes == flood * message.nbytes
    # Counted once, settled at once when the round is gathered.
    inbox.deliver("1", 51, 0, message)
    inbox.latest(("1",), 50)
    counters = stats.snapshot()["1"]
    assert (counters.received, counters.pending_received) == (flood + 1, 1)
    assert counters.pending_bytes == message.nbytes
    inbox.latest(("1",), 51)
    assert stats.snapshot()["1"].pending_received == 0


@pytest.mark.e2e
def test_a_checkpoint_asked_of_a_held_node_is_written_at_once(node):
    """A held node waits at a round boundary: a Checkpoint used to wait there for a round
    that never came (a round budget and 5 s more, days for a long deadline), holding a
    Control thread, and returned without writing one."""
    proc, client = node
    spec = node_specs(ring_experiment("held", rounds=20, deadline=60.0), NOWHERE)[0]
    client.configure(spec)
    client.hold(0)
    client.start()
    wait_until(lambda: client.status().holding, 20, "held before round 0")
    started = time.monotonic()
    client.checkpoint()  # the client gives up after 30 s, well before 60 s + 5 s
    assert time.monotonic() - started < 25
    assert (proc.state_dir / "held" / "0" / CHECKPOINT_FILE).is_file()
    status = client.status()
    assert (status.state, status.holding, status.round) == ("running", True, 0)


@pytest.mark.e2e
@pytest.mark.parametrize("delay_ms", [float("inf"), 1e300, -1.0, float("nan")])
def test_a_link_delay_no_clock_can_wait_is_refused_naming_it(node, delay_ms):
    """An infinite delay was taken: the link then held every message it was given for the
    rest of the run (memory growing each round) and never sent one."""
    _, client = node
    client.configure(node_specs(ring_experiment("delay", rounds=5, deadline=1.0), NOWHERE)[0])
    with pytest.raises(ConfigError, match=r"delay_ms: must be in \[0, 1e\+09\]"):
        client.set_link("1", delay_ms=delay_ms)
    client.set_link("1", delay_ms=1e9)  # the longest a setting may wait (MAX_SECONDS)
    assert client.status().state == "configured"


def test_a_node_keeps_the_secrets_of_two_runs_for_its_logs_not_of_every_run():
    """Every Configure added its secrets to the logs' redaction for good: a node serving
    run after run (or a client configuring it again and again, with megabyte secrets)
    grew its memory, and the time of every log line, with each one."""

    def line(text: str) -> str:
        return TextFormatter().format(logging.LogRecord("t", logging.INFO, "", 0, text, (), None))

    redact_run(["run-0-secret"])
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for k in range(1, 2001):
            redact_run([f"run-{k}-secret-" + "s" * 1000])
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes kept for 2000 runs' secrets"
    current, previous = "run-2000-secret-" + "s" * 1000, "run-1999-secret-" + "s" * 1000
    assert line(f"a {current} b").endswith(": a [redacted] b")
    assert line(f"a {previous} b").endswith(": a [redacted] b")


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("field", "secret", "reason"),
    [
        ("peer_secret", "s" * 5000, r"^peer_secret: 5000 characters; at most 4096 fit"),
        ("accept_secrets", "sécret", r"^accept_secrets\.1: a character other than printable"),
        ("send_secrets", "a\nb", r"^send_secrets\.1: a character other than printable"),
    ],
)
def test_a_secret_no_stream_can_carry_is_refused_naming_the_field(node, field, secret, reason):
    proc, client = node
    spec = node_specs(ring_experiment("secret", rounds=5, deadline=1.0), NOWHERE)[0]
    client.configure(spec)
    config = client.configure_request(spec)
    if field == "peer_secret":
        config.peer_secret = secret
    else:
        getattr(config, field)["1"] = secret
    channel = grpc.insecure_channel(proc.address)
    try:
        with pytest.raises(grpc.RpcError) as refused:
            control_pb2_grpc.ControlStub(channel).Configure(config, timeout=10)
    finally:
        channel.close()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert re.match(reason, refused.value.details() or "")
    status = client.status()
    assert (status.experiment, status.state) == ("secret", "configured")  # the run it had


def test_status_answers_while_a_configure_opens_its_run(tmp_path, monkeypatch):
    """Opening a run (closing the old run's links, scanning a long store, moving folders)
    took the runtime's lock: Status and every other Control call waited for it, seconds
    for a node with many peers or a long store. Now they answer meanwhile, and a Start
    in between is refused: the node is not configured until the run is open."""
    from starling.node.protocol.contract import NodeState
    from starling.node.runtime import runtime as runtime_module
    from starling.node.runtime.runtime import NodeRuntime, PreconditionError

    opening, release = threading.Event(), threading.Event()
    real_open_run = runtime_module.open_run

    def slow_open_run(*args, **kwargs):
        opening.set()
        assert release.wait(30), "never released"
        return real_open_run(*args, **kwargs)

    monkeypatch.setattr(runtime_module, "open_run", slow_open_run)
    runtime = NodeRuntime(tmp_path / "state")
    spec = node_specs(ring_experiment("slow", rounds=5, deadline=1.0), NOWHERE)[0]
    configuring = threading.Thread(
        target=runtime.configure, args=(spec,), kwargs={"peer_secret": "secret"}
    )
    configuring.start()
    try:
        assert opening.wait(30), "configure never reached open_run"
        answered: list[NodeState] = []
        asking = threading.Thread(target=lambda: answered.append(runtime.status().state))
        asking.start()
        asking.join(10)
        assert answered == [NodeState.IDLE], "Status waited for the configure"
        with pytest.raises(PreconditionError, match="cannot start while idle"):
            runtime.start()
    finally:
        release.set()
        configuring.join(30)
    try:
        assert runtime.status().state == NodeState.CONFIGURED
    finally:
        runtime.shutdown()


@pytest.mark.e2e
@pytest.mark.parametrize("field", ["experiment", "kind", "sender"])
def test_a_peers_megabyte_name_is_echoed_cut_in_the_log_and_the_status(node, field):
    """An admitted in-neighbour's iterate whose experiment, kind or claimed sender is a few
    megabytes long is rejected, and the reason named it whole: 4 MB in the log line and in
    the link's ``last_error``, which every Status (and the run's books) carried on from then."""
    proc, client = node
    spec = node_specs(ring_experiment("long", rounds=5, deadline=1.0), NOWHERE)[0]
    client.configure(spec)
    header = {"experiment": "long", "sender": "1", "kind": "x", field: "z" * 3_000_000}
    iterate = peer_pb2.Iterate(receiver="0", round=1, **header)
    iterate.tensors.append(convert.tensor_from_array(np.zeros((3, 2)), "x"))
    log_before = len(proc.log())
    channel = open_channel(proc.address)
    try:
        summary = exchange_as(peer_pb2_grpc.PeerStub(channel), client, "1", [iterate], 30)
    finally:
        channel.close()
    assert (summary.received, summary.rejected) == (0, 1)
    error = client.status().inbound["1"].last_error
    assert error.startswith("peer '1'") or error.startswith("stream of '1'"), error
    assert "(3,000,000 characters)" in error and len(error) < 500, error[:300]
    logged = proc.log()[log_before:]
    assert "(3,000,000 characters)" in logged and len(logged) < 5000, logged[:300]
    assert client.status().state == "configured"


@pytest.mark.e2e
def test_a_call_naming_a_megabyte_run_or_name_is_refused_in_one_readable_line(node):
    """A call for another run is refused naming both runs; a run id of a megabyte was named
    whole in the status details, which no gRPC client reads (16 KiB of metadata at most):
    the caller got RESOURCE_EXHAUSTED, not the reason. So was a stored run asked for by a
    megabyte name, and a Peer stream's claimed sender was logged whole."""
    proc, client = node
    spec = node_specs(ring_experiment("named", rounds=5, deadline=1.0), NOWHERE)[0]
    config = client.configure_request(spec)
    config.run_id = "run-1"
    channel = grpc.insecure_channel(proc.address)
    try:
        stub = control_pb2_grpc.ControlStub(channel)
        stub.Configure(config, timeout=10)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Stop(control_pb2.StopRequest(run_id="r" * 1_000_000), timeout=10)
        with pytest.raises(grpc.RpcError) as missing:
            request = control_pb2.SamplesRequest(experiment="e" * 1_000_000, node_id="0")
            list(stub.StreamSamples(request, timeout=10))
        with pytest.raises(grpc.RpcError) as stranger:  # 7 kB: inside what gRPC reads of metadata
            peer_pb2_grpc.PeerStub(channel).Exchange(
                iter([peer_pb2.Iterate()]), timeout=10, metadata=(("starling-sender", "s" * 7000),)
            )
    finally:
        channel.close()
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION, refused.value.details()
    details = refused.value.details() or ""
    assert details.startswith("Stop refused: it names run 'rrr"), details[:200]
    assert "(1,000,000 characters), but this node runs 'run-1'" in details and len(details) < 500
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND, missing.value.details()
    details = missing.value.details() or ""
    assert "(1,000,000 characters) for node '0'" in details and len(details) < 500, details[:200]
    assert stranger.value.code() == grpc.StatusCode.PERMISSION_DENIED, stranger.value.details()
    details = stranger.value.details() or ""
    assert "(7,000 characters) is not an in-neighbour" in details and len(details) < 500
    assert len(proc.log()) < 20_000
    assert client.status().state == "configured"


@pytest.mark.e2e
def test_idle_connections_to_the_metrics_endpoint_hold_few_threads_and_not_for_long(tmp_path):
    """The metrics endpoint has no authentication. prometheus_client's server gave every
    connection a thread for as long as it stayed open: 300 connections that never finished
    their request held 300 threads of the node (the systemd unit allows 2048 in all), for
    ever. Now at most MAX_CONNECTIONS are served at once, each closed after IDLE_SECONDS
    without a byte; once they are, a scrape answers again."""
    import os
    import socket
    import urllib.request

    from starling.node.metrics_http import IDLE_SECONDS, MAX_CONNECTIONS
    from tests.node.test_runtime_harness import Cluster

    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        port = spare.getsockname()[1]
    with Cluster(tmp_path) as cluster:
        proc = cluster.ready(cluster.launch("0", extra=["--metrics", str(port)]))
        client = proc.client()
        client.wait_ready()

        def threads() -> int:
            return len(os.listdir(f"/proc/{proc.process.pid}/task"))

        before = threads()
        idle = []
        try:
            for _ in range(300):
                connection = socket.create_connection(("127.0.0.1", port))
                connection.sendall(b"GET /metrics HTTP/1.1\r\n")  # never finished
                idle.append(connection)
            time.sleep(2.0)
            assert threads() - before <= MAX_CONNECTIONS + 2, threads() - before
            assert client.status().state == "idle"  # Control answers meanwhile
            wait_until(lambda: threads() - before <= 2, IDLE_SECONDS + 20, "idle ones closed")
        finally:
            for connection in idle:
                connection.close()
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as reply:
            assert b"starling_" in reply.read()
        assert "Traceback" not in proc.log()
