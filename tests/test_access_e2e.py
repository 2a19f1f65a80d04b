"""Who may talk to a node, with real node processes, real certificates and real gRPC.

* mutual TLS: three nodes started with ``starling certs init`` certificates, driven by the
  inventory backend with the orchestrator's certificate, give samples equal byte for byte to
  ``starling simulate`` of the same experiment (synchronous sampler) — TLS changes nothing
  but the wire — while, during the run, a certificate of another CA, a peer claiming another
  node's id and a node certificate calling Control are refused (the last two counted);
* a Control token: calls with no or a wrong token are refused and counted, the run with
  the token is unharmed;
* a node reads data only under its data directory and quotes no data in an error;
* a non-loopback address without TLS is refused in one line unless ``--insecure``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest
import yaml

from starling.node.params import ConfigError
from starling.node.protocol.starling.v1 import control_pb2, control_pb2_grpc, peer_pb2_grpc
from starling.node.runtime.transport import open_channel
from starling.node.security import TlsFiles, channel_credentials
from starling.node.tokens import node_token
from starling.orchestrator.cli.status_view import status_report
from starling.orchestrator.deploy.certs import init_certs
from starling.orchestrator.execution import live
from starling.orchestrator.execution.access import Access
from starling.orchestrator.execution.client import NodeClient
from starling.orchestrator.planning.node_specs import node_specs
from tests.conftest import run_cli
from tests.node.test_runtime_harness import ROOT, Cluster, ring_experiment, wait_until
from tests.node.test_security_files import craft

pytestmark = pytest.mark.e2e

NODES = ("a", "b", "c")


def _experiment(data: dict, rounds: int = 30, **backend) -> dict:
    return {
        "name": "guarded",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.01},
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "data": data,
        "nodes": [{"id": n} for n in NODES],
        "topology": {"kind": "ring"},
        "rounds": rounds,
        "chains": 4,
        "seed": 2,
        "round_deadline": 5.0,
        **({"backend": backend} if backend else {}),
    }


def _write(path, content) -> str:
    path.write_text(yaml.safe_dump(content))
    return str(path)


def _tls(folder, who: str) -> TlsFiles:
    return TlsFiles(str(folder / "ca.pem"), str(folder / f"{who}.pem"), str(folder / f"{who}.key"))


def _tls_flags(folder, who: str) -> list[str]:
    files = _tls(folder, who)
    return ["--tls-ca", files.ca, "--tls-cert", files.cert, "--tls-key", files.key]


def _own_data(k: int) -> list[str]:
    return ["--shard", str(k), "--data-seed", "5", "--data-size", "20"]


def _simulated(tmp_path, starling_home, rounds: int):
    twin = _write(
        tmp_path / "twin.yaml", _experiment({"source": "synthetic", "seed": 5, "size": 20}, rounds)
    )
    sim = tmp_path / "sim"
    done = run_cli("simulate", twin, "--out", str(sim), env_home=starling_home)
    assert done.returncode == 0, done.stderr
    return sim


def _assert_same_samples(out, sim) -> None:
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["w2"] == json.loads((sim / "metrics.json").read_text())["w2"]
    for node in NODES:
        with (
            np.load(out / "samples" / f"node-{node}.npz") as got,
            np.load(sim / "samples" / f"node-{node}.npz") as want,
        ):
            assert np.array_equal(got["samples"], want["samples"]), node


def _run_in_background(args, starling_home):
    """``starling run`` as a real process; the test attacks the nodes while it runs."""
    env = {**os.environ, "STARLING_HOME": str(starling_home)}
    return subprocess.Popen(
        [sys.executable, "-m", "starling.orchestrator.cli", "run", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _recorded_run(out) -> str:
    """The run id ``starling run`` recorded in its results folder (what live commands use)."""
    return json.loads((out / "run.json").read_text())["access"]["run_id"]


def _code(call) -> str:
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code().name
    return "OK"


def test_mutual_tls_run_is_bit_identical_and_impostors_are_refused(tmp_path, starling_home):
    certs, stranger = tmp_path / "certs", tmp_path / "other-ca"
    init_certs(certs, NODES)
    init_certs(stranger, NODES)  # same names, another CA
    rounds = 300
    with Cluster(tmp_path) as cluster:
        procs = {
            node: cluster.launch(
                node, extra=["--id", node, *_own_data(k), *_tls_flags(certs, node)]
            )
            for k, node in enumerate(NODES)
        }
        addresses = {n: cluster.ready(p).address for n, p in procs.items()}
        files = _tls(certs, "orchestrator")
        orchestrator_tls = {"ca": files.ca, "cert": files.cert, "key": files.key}
        inventory = _write(tmp_path / "nodes.yaml", {"nodes": addresses, "tls": orchestrator_tls})
        experiment = _write(tmp_path / "exp.yaml", _experiment({"source": "node"}, rounds))

        # Without the orchestrator's certificate there is no talking to a node at all.
        plain = open_channel(addresses["a"])
        assert (
            _code(
                lambda: control_pb2_grpc.ControlStub(plain).Status(
                    control_pb2.StatusRequest(), timeout=3
                )
            )
            == "UNAVAILABLE"
        )
        plain.close()

        out = tmp_path / "tls-run"
        run = _run_in_background(
            [experiment, "--inventory", inventory, "--out", str(out)], starling_home
        )
        seen: dict[str, set[str]] = {"other-ca": set(), "impostor": set(), "node-control": set()}
        foreign = channel_credentials(_tls(stranger, "b"))
        as_b = channel_credentials(_tls(certs, "b"))
        a_options = [("grpc.ssl_target_name_override", "a")]
        while run.poll() is None or not all(seen.values()):
            with grpc.secure_channel(addresses["a"], foreign, options=a_options) as channel:
                seen["other-ca"].add(
                    _code(
                        lambda: control_pb2_grpc.ControlStub(channel).Stop(
                            control_pb2.StopRequest(), timeout=3
                        )
                    )
                )
            with grpc.secure_channel(addresses["a"], as_b, options=a_options) as channel:
                # b's certificate, claiming to be c (a's in-neighbour in the ring).
                seen["impostor"].add(
                    _code(
                        lambda: peer_pb2_grpc.PeerStub(channel).Exchange(
                            iter(()), timeout=3, metadata=(("starling-sender", "c"),)
                        )
                    )
                )
                seen["node-control"].add(
                    _code(
                        lambda: control_pb2_grpc.ControlStub(channel).Stop(
                            control_pb2.StopRequest(), timeout=3
                        )
                    )
                )
            if run.poll() is not None:
                break
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stdout[-3000:] + stderr[-3000:]
        assert seen == {
            "other-ca": {"UNAVAILABLE"},
            "impostor": {"PERMISSION_DENIED"},
            "node-control": {"PERMISSION_DENIED"},
        }, seen
        access = Access(tls=_tls(certs, "orchestrator"), run_id="")  # any run: read-only
        with NodeClient(addresses["a"], access=access, node_id="a") as client:
            status = client.status()
        assert status.denied_peer_streams >= 1 and status.denied_control_calls >= 1
        # The client checks the node's certificate names the node it meant to reach.
        with NodeClient(addresses["b"], access=access, node_id="a") as wrong:
            with pytest.raises(Exception, match="unreachable .*Hostname Verification Check failed"):
                wrong.status(attempts=1)
        # `starling status` reads the run's record: the TLS paths it names reach the nodes.
        record = live.RunRecord(
            name="guarded",
            out_dir=str(out),
            orchestrator_pid=os.getpid(),
            addresses=addresses,
            pids={},
            access={"tls": orchestrator_tls, "run_id": _recorded_run(out)},
        )
        report = status_report(record)
        assert {n: r.get("state") for n, r in report["nodes"].items()} == dict.fromkeys(
            NODES, "done"
        ), report["nodes"]
        for proc in procs.values():
            assert "BEGIN" not in proc.log() and "PRIVATE" not in proc.log()
    _assert_same_samples(out, _simulated(tmp_path, starling_home, rounds))


def _node_tokens(folder, master: str) -> dict[str, str]:
    """Each node's own token file (what ``starling certs tokens`` writes), by node."""
    files = {}
    for node in NODES:
        path = folder / f"{node}.token"
        path.write_text(node_token(master, node) + "\n")
        path.chmod(0o600)
        files[node] = str(path)
    return files


def test_control_needs_the_token_and_the_run_with_it_is_unharmed(tmp_path, starling_home):
    master = "s3cret-master-" + "x" * 20
    (tmp_path / "master").write_text(master + "\n")
    (tmp_path / "master").chmod(0o600)
    tokens = _node_tokens(tmp_path, master)
    token = node_token(master, "a")
    with Cluster(tmp_path) as cluster:
        procs = {
            node: cluster.launch(
                node, extra=["--id", node, *_own_data(k), "--token-file", tokens[node]]
            )
            for k, node in enumerate(NODES)
        }
        addresses = {n: cluster.ready(p).address for n, p in procs.items()}
        channel = open_channel(addresses["a"])
        stub = control_pb2_grpc.ControlStub(channel)
        for metadata in (
            (),
            (("authorization", "Bearer wrong"),),
            (("authorization", "Bearer " + token[:-1]),),
            (("authorization", token),),  # no scheme: not a bearer token
            (("authorization", "Basic " + token),),
            (("authorization", "Bearer " + master),),  # the master is no node's token
            (("authorization", "Bearer " + node_token(master, "b")),),  # b's opens b only
        ):
            stop = functools.partial(stub.Stop, control_pb2.StopRequest(), timeout=3)
            assert _code(functools.partial(stop, metadata=metadata)) == "UNAUTHENTICATED"
        # The scheme is case-insensitive (RFC 9110): lower case is the same token.
        status = functools.partial(stub.Status, control_pb2.StatusRequest(), timeout=3)
        assert status(metadata=(("authorization", "bearer " + token),)).node_id == ""
        channel.close()
        inventory = _write(
            tmp_path / "nodes.yaml", {"nodes": addresses, "token_file": str(tmp_path / "master")}
        )
        experiment = _write(tmp_path / "exp.yaml", _experiment({"source": "node"}))
        out = tmp_path / "token-run"
        done = run_cli(
            "run",
            experiment,
            "--inventory",
            inventory,
            "--out",
            str(out),
            env_home=starling_home,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        with NodeClient(
            addresses["a"], access=Access(token=master, run_id=_recorded_run(out)), node_id="a"
        ) as client:
            status = client.status()
        assert status.denied_control_calls == 7
        assert status.refused["control:denied"] == 7
        for proc in procs.values():
            assert token not in proc.log() and master not in proc.log()
    _assert_same_samples(out, _simulated(tmp_path, starling_home, 30))


def test_a_node_reads_only_under_its_data_dir_and_quotes_no_data(tmp_path):
    home = tmp_path / "data"
    home.mkdir()
    (home / "notes.csv").write_text("x,y\nthe-launch-code-is-1234,5\n")
    with Cluster(tmp_path) as cluster:
        (proc,) = cluster.start_nodes(["0"], extra=["--data-dir", str(home)]).values()
        client = proc.client()
        client.wait_ready()
        experiment = ring_experiment("reader", rounds=5, deadline=0.2)
        spec = node_specs(experiment, {"0": proc.address, "1": "127.0.0.1:9", "2": "127.0.0.1:9"})[
            0
        ]

        def with_path(path: str):
            return dataclasses.replace(
                spec,
                data=dataclasses.replace(
                    spec.data, source="file", path=path, format="csv", shard=0, num_shards=1
                ),
            )

        passwd = Path("/etc/passwd").read_text().splitlines()[0]
        for path in ("/etc/passwd", str(home / ".." / "state-0" / "x.csv"), "../../etc/passwd"):
            with pytest.raises(ConfigError) as refused:
                client.configure(with_path(path))
            assert str(refused.value).startswith("data.path: ")
            assert "outside this node's data directory" in str(refused.value)
            assert passwd not in str(refused.value) and "root:" not in str(refused.value)
        with pytest.raises(ConfigError) as unreadable:
            client.configure(with_path(str(home / "notes.csv")))
        assert "launch-code" not in str(unreadable.value), unreadable.value
        assert "launch-code" not in proc.log()


def test_no_node_serves_as_the_orchestrator(tmp_path):
    command = [sys.executable, "-m", "starling.node", "serve", "--id", "orchestrator"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr.strip().splitlines()) == (
        2,
        ["starling-node: id: 'orchestrator' is the orchestrator's identity; no node may take it"],
    )


def test_a_non_loopback_address_needs_tls_or_insecure(tmp_path):
    command = [sys.executable, "-m", "starling.node", "serve", "--listen", "0.0.0.0:0"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "starling-node: --listen 0.0.0.0:0: refusing a non-loopback address without TLS "
        "(give tls: in the config or --tls-*, or --insecure on a private network)"
    ]
    with Cluster(tmp_path) as cluster:
        proc = cluster.ready(cluster.launch("x", listen="0.0.0.0:0", extra=["--insecure"]))
        assert proc.address.startswith("0.0.0.0:")
        wait_until(lambda: "Control is open" in proc.log(), 10, "the access line in the log")


def test_a_certificate_naming_orchestrator_only_in_its_cn_is_no_orchestrator(tmp_path):
    """gRPC takes the CN for the identity of a certificate without a SAN: any certificate of
    the CA with CN=orchestrator called Control."""
    certs = tmp_path / "certs"
    init_certs(certs, ["a"])
    cn_only = craft(certs, "cn-orchestrator", "orchestrator", [])
    with Cluster(tmp_path) as cluster:
        proc = cluster.ready(cluster.launch("a", extra=["--id", "a", *_tls_flags(certs, "a")]))
        options = [("grpc.ssl_target_name_override", "a")]
        for files, expected in (
            (cn_only, "PERMISSION_DENIED"),
            (_tls(certs, "orchestrator"), "OK"),
        ):
            with grpc.secure_channel(proc.address, channel_credentials(files), options) as channel:
                stub = control_pb2_grpc.ControlStub(channel)
                status = functools.partial(stub.Status, control_pb2.StatusRequest(), timeout=5)
                assert _code(status) == expected
        with NodeClient(
            proc.address, access=Access(tls=_tls(certs, "orchestrator")), node_id="a"
        ) as c:
            assert c.status().denied_control_calls == 1


def test_a_token_given_beside_tls_is_required_too(tmp_path):
    """A node started with TLS and a token file ignored the token: the orchestrator's
    certificate alone called Control. Both are now needed; the log says so."""
    certs = tmp_path / "certs"
    init_certs(certs, ["a"])
    master = "beside-tls-" + "y" * 20
    token = node_token(master, "a")
    (tmp_path / "token").write_text(token)
    flags = ["--id", "a", *_tls_flags(certs, "a"), "--token-file", str(tmp_path / "token")]
    with_token = (("authorization", "Bearer " + token),)
    orchestrator = _tls(certs, "orchestrator")
    with Cluster(tmp_path) as cluster:
        proc = cluster.ready(cluster.launch("a", extra=flags))
        wait_until(lambda: "Control needs the token too" in proc.log(), 10, "the access line")
        options = [("grpc.ssl_target_name_override", "a")]
        for files, metadata, expected in (
            (orchestrator, (), "UNAUTHENTICATED"),
            (craft(certs, "b", "b", ["b"]), with_token, "PERMISSION_DENIED"),
            (orchestrator, with_token, "OK"),
        ):
            with grpc.secure_channel(proc.address, channel_credentials(files), options) as channel:
                stub = control_pb2_grpc.ControlStub(channel)
                status = functools.partial(
                    stub.Status, control_pb2.StatusRequest(), timeout=5, metadata=metadata
                )
                assert _code(status) == expected
        with NodeClient(
            proc.address, access=Access(tls=orchestrator, token=master), node_id="a"
        ) as c:
            assert c.status().denied_control_calls == 2
        assert token not in proc.log()


def test_tls_files_no_handshake_could_use_stop_the_node_in_one_line(tmp_path):
    """A key of another certificate said 'cannot listen on 127.0.0.1:0: Failed to bind'."""
    certs = tmp_path / "certs"
    init_certs(certs, ["a", "b"])
    flags = [*_tls_flags(certs, "a")[:4], "--tls-key", str(certs / "b.key")]
    command = [sys.executable, "-m", "starling.node", "serve", "--id", "a", *flags]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"starling-node: tls.key: '{certs}/b.key' is not the key of tls.cert '{certs}/a.pem'"
    ]
    (certs / "a.key").chmod(0o640)
    with Cluster(tmp_path) as cluster:
        proc = cluster.ready(cluster.launch("a", extra=["--id", "a", *_tls_flags(certs, "a")]))
        warning = f"tls.key: {certs}/a.key is open to users other than its owner (mode 0640)"
        wait_until(lambda: warning in proc.log(), 10, "the key's warning in the log")
        assert "PRIVATE" not in proc.log()
