"""A node's trust in what reaches it, attacked from other processes: a neighbour's absurd
but well-formed values (screened, counted per peer), a Control call meant for another run
(refused naming both), a rotated or revoked token (taken without a restart), gRPC's own log
lines (through the node's logger, refused handshakes counted) and a name that would forge
a log line. Each attack refused and counted; the legitimate use beside it still works."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys

import grpc
import numpy as np
import pytest

from starling.node.protocol import convert
from starling.node.protocol.starling.v1 import (
    control_pb2,
    control_pb2_grpc,
    peer_pb2,
    peer_pb2_grpc,
)
from starling.node.runtime.transport import open_channel
from starling.node.security import TlsFiles
from starling.node.tokens import node_token
from starling.orchestrator.deploy.certs import init_certs
from starling.orchestrator.execution.access import Access
from starling.orchestrator.execution.client import NodeClient, NodeRejected, NodeUnavailable
from starling.orchestrator.planning.node_specs import node_specs
from tests.conftest import run_cli
from tests.node.test_runtime_harness import ROOT, Cluster, exchange_as, ring_experiment
from tests.operating import free_port, samples, scrape, value
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e


def _nowhere() -> str:
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{spare.getsockname()[1]}"


def _spec(address: str, name: str = "trust", rounds: int = 5):
    nowhere = _nowhere()
    experiment = ring_experiment(name, rounds=rounds, deadline=1.0)
    return node_specs(experiment, {"0": address, "1": nowhere, "2": nowhere})[0]


def _iterate(value: float, round_index: int = 0, sender: str = "1") -> peer_pb2.Iterate:
    return peer_pb2.Iterate(
        experiment="trust",
        sender=sender,
        receiver="0",
        round=round_index,
        phase=0,
        kind="x",
        tensors=[convert.tensor_from_array(np.full((3, 2), value), "x")],
    )


def test_a_neighbours_absurd_values_are_screened_and_counted_on_its_link(tmp_path):
    """In-neighbour 1 proves its link and sends well-formed, finite iterates of 1e10 (the
    attack that drove a node's samples there): each is refused as screened, counted on
    link 1 (status and metrics), and its ordinary iterates, and neighbour 2's, still go in."""
    metrics = f"127.0.0.1:{free_port()}"
    with Cluster(tmp_path) as cluster:
        (proc,) = cluster.start_nodes(["0"], extra=["--metrics", metrics]).values()
        client = proc.client()
        client.wait_ready()
        client.configure(_spec(proc.address))
        with open_channel(proc.address) as channel:
            stub = peer_pb2_grpc.PeerStub(channel)
            hostile = exchange_as(
                stub, client, "1", [_iterate(1e10, 0), _iterate(-3e9, 1), _iterate(0.5, 2)]
            )
            honest = exchange_as(stub, client, "2", [_iterate(2.0, 0, "2")])
        assert (hostile.received, hostile.rejected) == (1, 2)
        assert (honest.received, honest.rejected) == (1, 0)
        inbound = client.status().inbound
        assert (inbound["1"].screened, inbound["1"].rejected, inbound["1"].received) == (2, 2, 1)
        assert inbound["2"].screened == 0
        assert "peer '1': screened, round 1: 'x' holds 3e+09, beyond the screening bound 1e+06" in (
            inbound["1"].last_error
        )
        table = samples(scrape(metrics))
        screened = "starling_link_messages_screened_total"
        assert value(table, screened, peer="1", direction="in") == 2
        assert value(table, screened, peer="2", direction="in") == 0
        # The doors' load: nothing held now that the streams are over.
        assert value(table, "starling_door_calls_serving", door="peer") == 0
        assert "screened, round 0" in proc.log()


def test_a_screen_bound_given_is_the_nodes_and_a_bad_one_is_one_line(tmp_path):
    command = [sys.executable, "-m", "starling.node", "serve", "--screen-bound", "-1"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr.strip().splitlines()) == (
        2,
        [
            "starling-node: --screen-bound: must be a finite number >= 0 (0 turns screening "
            "off), got -1.0"
        ],
    )
    with Cluster(tmp_path) as cluster:
        (proc,) = cluster.start_nodes(["0"], extra=["--screen-bound", "0"]).values()
        client = proc.client()
        client.wait_ready()
        client.configure(_spec(proc.address))
        with open_channel(proc.address) as channel:
            summary = exchange_as(peer_pb2_grpc.PeerStub(channel), client, "1", [_iterate(1e10)])
        assert (summary.received, summary.rejected) == (1, 0)  # off: taken


def test_a_control_call_for_another_run_is_refused_naming_both(tmp_path, starling_home):
    """``starling stop --run OLD_FOLDER`` used to stop whatever the inventory's nodes ran
    now. Every Control call names its run: one for another run is refused naming both, the
    node runs on, and the run's own orchestrator is obeyed."""
    with Cluster(tmp_path) as cluster:
        (proc,) = cluster.start_nodes(["0"]).values()
        current = NodeClient(proc.address, access=Access(), node_id="0")  # a run's own id
        proc.clients.append(current)
        current.wait_ready()
        current.configure(_spec(proc.address, rounds=100_000))
        current.start()
        old = NodeClient(proc.address, access=Access(run_id="0ld0ld0ld0ld0ld0"), node_id="0")
        proc.clients.append(old)
        for call in (old.stop, old.start, lambda: old.hold(5), old.checkpoint, old.status):
            with pytest.raises(NodeRejected) as refused:
                call()
            assert "names run '0ld0ld0ld0ld0ld0', but this node runs " in str(refused.value)
            assert f"{current.run_id!r} (experiment 'trust')" in str(refused.value)
        with pytest.raises(NodeRejected, match="names run '0ld0ld0ld0ld0ld0'"):
            old.set_link("1", up=False)
        # The live command reads the old run's record (the user's own, sealed by their
        # starling: core/seals.py) and gets the same answer.
        folder = tmp_path / "old-run"
        folder.mkdir()
        record = {
            "name": "trust",
            "out_dir": str(folder),
            "orchestrator_pid": 999_999_999,
            "addresses": {"0": proc.address},
            "pids": {"0": None},
            "access": {"run_id": "0ld0ld0ld0ld0ld0"},
        }
        code = (
            "import json, sys; from starling.orchestrator.execution import live; "
            "live.publish(live.RunRecord(**json.loads(sys.argv[1])))"
        )
        subprocess.run(
            [sys.executable, "-c", code, json.dumps(record)],
            env={**os.environ, "STARLING_HOME": str(starling_home)},
            check=True,
        )
        done = run_cli("stop", "--run", str(folder), env_home=starling_home, timeout=120)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "node 0: not stopped" in done.stdout and "names run '0ld0ld0ld0ld0ld0'" in (
            done.stdout
        )
        status = current.status()
        assert status.state == "running" and status.run_id == current.run_id
        assert status.refused["control:other_run"] == 7
        current.stop()
        assert current.status().state == "stopped"


def test_a_token_is_rotated_and_revoked_without_a_restart(tmp_path):
    """The node re-reads its token file when it changes: a new token works at once and the
    old one no longer does; two listed tokens both work (an overlap while rotating); an
    emptied file admits no one (logged) until it holds a token again."""
    first, second = "rotate-first-" + "a" * 20, "rotate-second-" + "b" * 20
    token_file = tmp_path / "0.token"
    token_file.write_text(node_token(first, "0") + "\n")
    with Cluster(tmp_path) as cluster:
        (proc,) = cluster.start_nodes(["0"], extra=["--token-file", str(token_file)]).values()
        old = NodeClient(proc.address, access=Access(token=first, run_id=""), node_id="0")
        new = NodeClient(proc.address, access=Access(token=second, run_id=""), node_id="0")
        proc.clients += [old, new]
        old.wait_ready()

        def admitted(client: NodeClient) -> bool:
            try:
                client.status(attempts=1)
            except NodeUnavailable as exc:
                assert "UNAUTHENTICATED" in str(exc), exc
                return False
            return True

        assert (admitted(old), admitted(new)) == (True, False)
        token_file.write_text(f"# rotating\n{node_token(first, '0')}\n{node_token(second, '0')}\n")
        wait_until(lambda: admitted(new), 10, "the second token")
        assert admitted(old)
        token_file.write_text(node_token(second, "0") + "\n")
        wait_until(lambda: not admitted(old), 10, "the first token revoked")
        assert admitted(new)
        token_file.write_text("")
        wait_until(lambda: not admitted(new), 10, "an emptied file to admit no one")
        wait_until(lambda: "Control admits no one until it is fixed" in proc.log(), 10, "log")
        token_file.write_text(node_token(second, "0") + "\n")
        wait_until(lambda: admitted(new), 10, "the file fixed")
        assert node_token(second, "0") not in proc.log()


def test_a_master_or_a_shared_token_is_no_nodes_token_file(tmp_path):
    """A node's token file must hold a token derived for a node (``stn1.``): a file shared
    by every node (the old way, or the orchestrator's master) opened every node."""
    (tmp_path / "shared").write_text("one-token-for-every-node-" + "z" * 10)
    command = [
        sys.executable,
        "-m",
        "starling.node",
        "serve",
        "--token-file",
        str(tmp_path / "shared"),
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"starling-node: token_file: '{tmp_path}/shared' line 1 is not a node's own token "
        "(stn1....): a token shared by every node would let one node's file open them all "
        "(starling certs tokens DIR --nodes ... writes one per node)"
    ]
    command = [sys.executable, "-m", "starling.node", "serve", "--listen", "0.0.0.0:0"]
    (tmp_path / "0.token").write_text(node_token("m" * 20, "0"))
    done = subprocess.run(
        [*command, "--token-file", str(tmp_path / "0.token")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr.strip().splitlines()) == (
        2,
        [
            "starling-node: --listen 0.0.0.0:0: refusing a token without TLS on a non-loopback "
            "address: the token and the run's link secrets would cross the network in clear "
            "(give tls: in the config or --tls-*, or --insecure to accept that on a private "
            "network)"
        ],
    )


def test_grpc_own_lines_go_through_the_json_log_and_refused_handshakes_are_counted(tmp_path):
    """A plaintext client at a TLS node: gRPC's C core reports the failed handshake on fd 2.
    It used to break --log-format json with a raw line; now every line is a JSON object,
    the handshake line among them (logger grpc.core), and the refusal is counted."""
    certs = tmp_path / "certs"
    init_certs(certs, ["0"])
    flags = ["--id", "0", "--log-format", "json", "--tls-ca", str(certs / "ca.pem")]
    flags += ["--tls-cert", str(certs / "0.pem"), "--tls-key", str(certs / "0.key")]
    with Cluster(tmp_path) as cluster:
        (proc,) = cluster.start_nodes(["0"], extra=flags).values()
        for _ in range(3):
            with grpc.insecure_channel(proc.address) as channel:
                stub = control_pb2_grpc.ControlStub(channel)
                with pytest.raises(grpc.RpcError):
                    stub.Status(control_pb2.StatusRequest(), timeout=2)
        wait_until(lambda: "Handshake failed" in proc.log(), 20, "gRPC's line")
        orchestrator = Access(tls=_files(certs, "orchestrator"), run_id="")
        with NodeClient(proc.address, access=orchestrator, node_id="0") as client:
            counted = client.status().refused.get("tls:handshake", 0)
    # Each failed handshake is one line of gRPC's (all logged: fewer than LOG_FIRST).
    assert 1 <= counted <= proc.log().count("Handshake failed"), counted
    lines = [line for line in proc.log().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line one JSON object
    core = [e for e in entries if e["logger"] == "grpc.core"]
    assert core and all(e["event"] == "grpc_core" for e in core)
    assert any("Handshake failed" in e["message"] for e in core)


def _files(certs, who: str) -> TlsFiles:
    return TlsFiles(str(certs / "ca.pem"), str(certs / f"{who}.pem"), str(certs / f"{who}.key"))


def test_no_name_forges_a_log_line(tmp_path):
    """An experiment named with a newline and a fake log line used to write that line
    into the node's log as if the node had written it; the name is escaped now."""
    forged = "2030-01-01 00:00:00,000 WARNING starling.node: forged"
    with Cluster(tmp_path) as cluster:
        (proc,) = cluster.start_nodes(["0"]).values()
        client = proc.client()
        client.wait_ready()
        client.configure(dataclasses.replace(_spec(proc.address), experiment=f"x\n{forged}"))
        wait_until(lambda: "configured x" in proc.log(), 10, "the configure line")
    lines = proc.log().splitlines()
    assert not any(line.startswith(forged) for line in lines), lines
    assert any(f"configured x\\n{forged}" in line for line in lines), lines


def _served_serial(address: str, certs, who: str = "orchestrator") -> int:
    """The serial of the certificate the node serves now (a TLS handshake of our own)."""
    import ssl

    from cryptography import x509

    context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    context.check_hostname = False
    context.load_cert_chain(str(certs / f"{who}.pem"), str(certs / f"{who}.key"))
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with context.wrap_socket(raw) as tls:
            der = tls.getpeercert(binary_form=True)
    return x509.load_der_x509_certificate(der).serial_number


def test_a_revoked_certificate_is_refused_and_a_renewed_one_served_without_a_restart(tmp_path):
    """The node checks its callers against the CA's list (tls.crl) and re-reads the list
    when it changes: once b is revoked, b's certificate opens nothing (counted), while the
    orchestrator's works on. A renewed certificate of the node's own is served to the next
    handshake, without a restart."""
    from starling.orchestrator.deploy.certs import renew_certs, revoke_certs

    certs = tmp_path / "certs"
    init_certs(certs, ["0", "b", "spare"])
    revoke_certs(certs, ["spare"])  # a list to start with
    flags = ["--id", "0", "--tls-ca", str(certs / "ca.pem"), "--tls-crl", str(certs / "crl.pem")]
    flags += ["--tls-cert", str(certs / "0.pem"), "--tls-key", str(certs / "0.key")]
    keep = tmp_path / "b-kept"
    keep.mkdir()
    for suffix in ("pem", "key"):
        (keep / f"b.{suffix}").write_bytes((certs / f"b.{suffix}").read_bytes())
    as_b = TlsFiles(str(certs / "ca.pem"), str(keep / "b.pem"), str(keep / "b.key"))
    options = [("grpc.ssl_target_name_override", "0")]

    def b_calls(address: str) -> str:
        from starling.node.security import channel_credentials

        with grpc.secure_channel(address, channel_credentials(as_b), options) as channel:
            stub = peer_pb2_grpc.PeerStub(channel)
            try:
                stub.Exchange(iter(()), timeout=5, metadata=(("starling-sender", "b"),))
            except grpc.RpcError as exc:
                return exc.code().name
        return "OK"

    with Cluster(tmp_path) as cluster:
        (proc,) = cluster.start_nodes(["0"], extra=flags).values()
        client = NodeClient(
            proc.address, access=Access(tls=_files(certs, "orchestrator"), run_id=""), node_id="0"
        )
        proc.clients.append(client)
        client.wait_ready()
        before = client.status().denied_peer_streams
        assert b_calls(proc.address) in ("UNAVAILABLE", "PERMISSION_DENIED")  # not a peer yet
        revoke_certs(certs, ["b"])
        assert b_calls(proc.address) == "PERMISSION_DENIED"  # the list read again at once
        assert "crl.pem changed; 2 certificates revoked" in proc.log()
        assert "the client certificate is revoked" in proc.log()
        assert client.status().denied_peer_streams > before
        # Renewed: the next handshake gets the new certificate.
        served = _served_serial(proc.address, certs)
        renew_certs(certs, ["0"])
        wait_until(lambda: _served_serial(proc.address, certs) != served, 10, "the renewal")
        assert client.status().state == "idle"


def test_a_nodes_store_is_its_owners_alone(tmp_path):
    """Stores were world-readable (the samples are computed from a node's private data):
    a node serves with umask 077, so every folder and file it writes is owner-only."""
    import os
    import stat

    previous = os.umask(0o022)  # what the node's parent hands down
    try:
        with Cluster(tmp_path) as cluster:
            (proc,) = cluster.start_nodes(["0"]).values()
            client = proc.client()
            client.wait_ready()
            client.configure(_spec(proc.address, rounds=3))
            client.start()
            wait_until(lambda: client.status().state == "done", 30, "the run")
            client.checkpoint()
    finally:
        os.umask(previous)
    written = [p for p in proc.state_dir.rglob("*")]
    assert any(p.is_file() for p in written)
    for path in [proc.state_dir, *written]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert not mode & 0o077, (path, oct(mode))
