"""Emulated devices with real network stacks (:mod:`tests.netns`): every node in its own
network namespace with its own address, the orchestrator in another, links through a
bridge, impairments by the kernel (nftables loss, tc rate limits).

(a) four nodes and the orchestrator with mutual TLS across the namespaces give samples
    equal byte for byte to ``simulate`` (synchronous sampler, so the wire cannot change a
    number), with (b) refusals on the way, all from other namespaces over the bridge: the
    orchestrator with no certificate or one of another CA gets no node; and while the run
    goes on, an intruder host (:mod:`tests.netns_intruder`) offers a node a Peer stream with
    a certificate of another CA, one with a genuine node certificate claiming another node's
    id, and Control calls with a node's certificate or none — each refused, the run's
    samples still those of ``simulate``. The same with a Control token instead of TLS: no
    or a wrong token, and a Peer stream without the run's secret, are refused, and the run
    is unharmed;
(c) 10 % loss (nftables ``numgen random``) and 1 Mbit/s (``tc tbf`` in an htb class for
    b's address in a's namespace) on the link a → b alone:
    the run completes and the account shows that link's late and missing messages.
    Delay (``tc netem``) is added where the kernel has it, skipped with the reason if not.

Skipped with the reason where namespaces cannot be made (not root, tools missing), except
under ``CI=true``, where that fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from contextlib import contextmanager

import numpy as np
import pytest
import yaml

from starling.node.protocol.contract import READY_PREFIX
from starling.node.tokens import node_token
from starling.orchestrator.deploy.certs import init_certs
from starling.orchestrator.results.link_books import link_summary
from tests.conftest import run_cli
from tests.netns import NamespaceBed, netem_available, unavailable
from tests.node.test_runtime_harness import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("namespaces_possible")]


@pytest.fixture(scope="module")
def namespaces_possible() -> None:
    """Skip with the reason where namespaces cannot be made; under ``CI=true`` (root, the
    tools installed by docker/ci-setup.sh) that is a failure, not a skip."""
    reason = unavailable()
    if reason and os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    if reason:
        pytest.skip(reason)


NODES = ("a", "b", "c", "d")
PORT = 50051


def _experiment(rounds: int, data: dict, deadline: float, name: str) -> dict:
    return {
        "name": name,
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.01},
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "data": data,
        "nodes": [{"id": n} for n in NODES],
        "topology": {"kind": "ring"},
        "rounds": rounds,
        "chains": 4,
        "seed": 3,
        "round_deadline": deadline,
    }


def _write(path, content) -> str:
    path.write_text(yaml.safe_dump(content))
    return str(path)


class Devices:
    """Node processes inside the testbed's namespaces; killed and reaped by :meth:`close`."""

    def __init__(self, testbed: NamespaceBed, workdir):
        self.testbed, self.workdir = testbed, workdir
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, node: str, shard: int, access: list[str]) -> str:
        address = f"{self.testbed.addresses[node]}:{PORT}"
        argv = [
            sys.executable,
            "-m",
            "starling.node",
            "serve",
            "--listen",
            address,
            "--id",
            node,
            "--state-dir",
            str(self.workdir / f"state-{node}"),
            "--shard",
            str(shard),
            "--data-seed",
            "5",
            "--data-size",
            "20",
            *access,
        ]
        log = open(self.workdir / f"node-{node}.log", "wb")  # noqa: SIM115 - the child's
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.procs[node] = subprocess.Popen(
            self.testbed.command(node, argv),
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        log.close()
        return address

    def ready(self, timeout: float = 60) -> None:
        for node, proc in self.procs.items():
            line: list[str] = []
            reader = threading.Thread(
                target=lambda p=proc, got=line: got.append(p.stdout.readline())
            )
            reader.daemon = True
            reader.start()
            reader.join(timeout)
            log = (self.workdir / f"node-{node}.log").read_text(errors="replace")
            assert line and line[0].startswith(READY_PREFIX), f"node {node}: {line!r}\n{log}"

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            proc.wait(timeout=10)
            proc.stdout.close()


@pytest.fixture
def testbed():
    bed = NamespaceBed([*NODES, "orch", "evil"])
    try:
        yield bed
    finally:
        bed.close()


_ASK_REFUSED = """
import json, sys
from starling.orchestrator.execution.access import Access
from starling.orchestrator.execution.client import NodeClient
token = open(sys.argv[2]).read().strip()
with NodeClient(sys.argv[1], access=Access(token=token, run_id=""), node_id=sys.argv[3]) as client:
    print(json.dumps(dict(client.status().refused)))
"""
"""What a node has refused so far, asked over Control with the token (argv: address, the
master token's file, the node's id)."""


def _orchestrate(testbed, args, home, timeout=600) -> subprocess.CompletedProcess:
    env = {**os.environ, "STARLING_HOME": str(home), "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "starling.orchestrator.cli", *args]
    return subprocess.run(
        testbed.command("orch", argv),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@contextmanager
def _intruder(testbed, tmp_path, plan: dict):
    """The intruder attacking from its own namespace while the body runs; its findings (the
    codes each attack got) in the yielded dict once the body is done."""
    stop = tmp_path / "intruder.stop"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "tests.netns_intruder", json.dumps({**plan, "stop": str(stop)})]
    proc = subprocess.Popen(
        testbed.command("evil", argv),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    found: dict = {}
    try:
        yield found
    finally:
        stop.touch()
        try:
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]
    found.update(json.loads(stdout))


def _same_as_simulate(out, tmp_path, starling_home, rounds: int, deadline: float, name: str):
    twin = _write(
        tmp_path / "twin.yaml",
        _experiment(rounds, {"source": "synthetic", "seed": 5, "size": 20}, deadline, name),
    )
    sim = tmp_path / "sim"
    assert run_cli("simulate", twin, "--out", str(sim), env_home=starling_home).returncode == 0
    assert (
        json.loads((out / "metrics.json").read_text())["w2"]
        == json.loads((sim / "metrics.json").read_text())["w2"]
    )
    for node in NODES:
        with (
            np.load(out / "samples" / f"node-{node}.npz") as got,
            np.load(sim / "samples" / f"node-{node}.npz") as want,
        ):
            assert np.array_equal(got["samples"], want["samples"]), node


def test_mutual_tls_across_namespaces_equals_simulate(testbed, tmp_path, starling_home):
    certs, other = tmp_path / "certs", tmp_path / "other"
    init_certs(certs, NODES)
    init_certs(other, NODES)
    devices = Devices(testbed, tmp_path)
    try:
        addresses = {
            node: devices.start(
                node,
                k,
                [
                    "--tls-ca",
                    str(certs / "ca.pem"),
                    "--tls-cert",
                    str(certs / f"{node}.pem"),
                    "--tls-key",
                    str(certs / f"{node}.key"),
                ],
            )
            for k, node in enumerate(NODES)
        }
        devices.ready()
        tls = {
            "ca": str(certs / "ca.pem"),
            "cert": str(certs / "orchestrator.pem"),
            "key": str(certs / "orchestrator.key"),
        }
        inventory = _write(tmp_path / "nodes.yaml", {"nodes": addresses, "tls": tls})
        experiment = _write(
            tmp_path / "exp.yaml", _experiment(60, {"source": "node"}, 5.0, "netns-tls")
        )
        # (b) From the orchestrator's namespace: no certificate, or another CA's, gets nothing.
        wrong = _write(
            tmp_path / "wrong.yaml",
            {
                "nodes": addresses,
                "ready_timeout": 3,
                "tls": {
                    "ca": str(other / "ca.pem"),
                    "cert": str(other / "orchestrator.pem"),
                    "key": str(other / "orchestrator.key"),
                },
            },
        )
        plain = _write(tmp_path / "plain.yaml", {"nodes": addresses, "ready_timeout": 3})
        for k, refused in enumerate((wrong, plain)):
            where = str(tmp_path / f"refused-{k}")
            done = _orchestrate(
                testbed, ["run", experiment, "--inventory", refused, "--out", where], starling_home
            )
            assert done.returncode == 2, done.stdout + done.stderr
            assert "no healthy node" in done.stderr, done.stderr
        out = tmp_path / "out"
        # d is a's in-neighbour in the ring: the intruder claims to be d, with a certificate
        # of another CA named d, and with b's genuine certificate.
        plan = {
            "mode": "tls",
            "target": addresses["a"],
            "target_id": "a",
            "neighbour": "d",
            "impostor": "b",
            "certs": str(certs),
            "stranger": str(other),
        }
        with _intruder(testbed, tmp_path, plan) as intruder:
            done = _orchestrate(
                testbed,
                ["run", experiment, "--inventory", inventory, "--out", str(out)],
                starling_home,
            )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    finally:
        devices.close()
    assert intruder["rounds"] >= 2, intruder  # it kept at it for the whole run
    assert intruder["seen"] == {
        "other-ca": ["UNAVAILABLE"],  # no handshake with another CA's certificate
        "impostor": ["PERMISSION_DENIED"],  # b's certificate does not name d
        "node-control": ["PERMISSION_DENIED"],  # Control needs the orchestrator's
        "no-cert": ["UNAVAILABLE"],
    }, intruder
    _same_as_simulate(out, tmp_path, starling_home, 60, 5.0, "netns-tls")


def test_control_token_across_namespaces_refuses_intruders(testbed, tmp_path, starling_home):
    """Without TLS (``--insecure`` on the testbed's private bridge) Control needs the token
    and Peer streams the run's secret: an intruder in its own namespace gets neither, and
    the run it attacks throughout gives ``simulate``'s samples byte for byte."""
    master = "netns-master-" + "y" * 24
    (tmp_path / "master").write_text(master + "\n")
    for node in NODES:
        (tmp_path / f"{node}.token").write_text(node_token(master, node) + "\n")
    token = node_token(master, "a")
    devices = Devices(testbed, tmp_path)
    try:
        addresses = {
            node: devices.start(
                node, k, ["--insecure", "--token-file", str(tmp_path / f"{node}.token")]
            )
            for k, node in enumerate(NODES)
        }
        devices.ready()
        inventory = _write(
            tmp_path / "nodes.yaml", {"nodes": addresses, "token_file": str(tmp_path / "master")}
        )
        experiment = _write(
            tmp_path / "exp.yaml", _experiment(60, {"source": "node"}, 5.0, "netns-token")
        )
        out = tmp_path / "out"
        plan = {
            "mode": "token",
            "target": addresses["a"],
            "neighbour": "d",
            "wrong": token[:-1] + "z",
            "other_token": node_token(master, "b"),
        }
        with _intruder(testbed, tmp_path, plan) as intruder:
            done = _orchestrate(
                testbed,
                ["run", experiment, "--inventory", inventory, "--out", str(out)],
                starling_home,
            )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    finally:
        devices.close()
    assert intruder["rounds"] >= 2, intruder
    seen = intruder["seen"]
    assert seen["no-token"] == seen["wrong-token"] == ["UNAUTHENTICATED"], intruder
    assert seen["other-node-token"] == ["UNAUTHENTICATED"], intruder
    # Reflection answers the orchestrator alone on a node with a token.
    assert seen["idle-reflection"] == ["UNAUTHENTICATED"], intruder
    # Before the run configures the node there is no secret to show: the stream is put off
    # (UNAVAILABLE), never admitted to speak later; once configured, refused for want of it.
    assert "UNAUTHENTICATED" in seen["no-secret"], intruder
    assert set(seen["no-secret"]) <= {"UNAUTHENTICATED", "UNAVAILABLE"}, intruder
    for node in NODES:
        log = (tmp_path / f"node-{node}.log").read_text(errors="replace")
        assert node_token(master, node) not in log and master not in log
    _same_as_simulate(out, tmp_path, starling_home, 60, 5.0, "netns-token")


def test_idle_floods_from_another_host_leave_the_run_unharmed(testbed, tmp_path, starling_home):
    """From its own namespace, an attacker (:mod:`tests.door_attacker`) holds hundreds of
    idle calls of every kind open on node a for the whole run (reflection, health watches
    and checks, Control and sample calls without the token, Peer streams claiming a's
    in-neighbour d and never proving it). Each door serves the attacker its share and
    refuses the rest, counted; the orchestrator's Health and Control, and d's genuine
    streams from d's own address, are untouched: samples equal ``simulate``'s."""
    master = "netns-flood-" + "f" * 24
    (tmp_path / "master").write_text(master + "\n")
    for node in NODES:
        (tmp_path / f"{node}.token").write_text(node_token(master, node) + "\n")
    count = 300
    devices = Devices(testbed, tmp_path)
    try:
        addresses = {
            node: devices.start(
                node, k, ["--insecure", "--token-file", str(tmp_path / f"{node}.token")]
            )
            for k, node in enumerate(NODES)
        }
        devices.ready()
        inventory = _write(
            tmp_path / "nodes.yaml", {"nodes": addresses, "token_file": str(tmp_path / "master")}
        )
        experiment = _write(
            tmp_path / "exp.yaml", _experiment(60, {"source": "node"}, 5.0, "netns-flood")
        )
        stop = tmp_path / "flood.stop"
        plan = {
            "target": addresses["a"],
            "kinds": ["reflection", "watch", "check", "control", "samples", "peer"],
            "count": count,
            "sender": "d",
            "stop": str(stop),
            "hold": 600,
            "persist": True,  # what is refused is asked again, the whole run long
        }
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        attacker = subprocess.Popen(
            testbed.command(
                "evil", [sys.executable, "-m", "tests.door_attacker", json.dumps(plan)]
            ),
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert attacker.stdout.readline().strip() == "opened", attacker.stderr.read()
            out = tmp_path / "out"
            done = _orchestrate(
                testbed,
                ["run", experiment, "--inventory", inventory, "--out", str(out)],
                starling_home,
            )
        finally:
            stop.touch()
            said, errors = attacker.communicate(timeout=120)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert attacker.returncode == 0, errors[-3000:]
        # The node's own account of the flood, read over the run's record.
        status = _orchestrate(
            testbed, ["status", "--run", str(out), "--format", "json"], starling_home
        )
        # And its counters now that the attack is over, asked with the token.
        asked = subprocess.run(
            testbed.command(
                "orch",
                [sys.executable, "-c", _ASK_REFUSED, addresses["a"], str(tmp_path / "master"), "a"],
            ),
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert asked.returncode == 0, asked.stderr[-3000:]
        live_refused = json.loads(asked.stdout)
    finally:
        devices.close()
    saw = json.loads(said.splitlines()[-1])
    for kind in ("reflection", "control", "samples"):  # never served without the token
        # ("held": asked again just before the attack stopped, not answered yet)
        assert set(saw[kind]) <= {"UNAUTHENTICATED", "held"}, (kind, saw)
        assert saw[kind]["UNAUTHENTICATED"] >= count, (kind, saw)
    for kind in ("check", "watch", "peer"):  # a share held, the rest refused, never more
        assert saw[kind]["RESOURCE_EXHAUSTED"] >= count - 8, (kind, saw)
        assert "OK" not in saw[kind], (kind, saw)
    # Before the run configured a, Peer streams are put off (UNAVAILABLE); unproved ones the
    # watchdog cancels, or the node refuses once they end (UNAUTHENTICATED).
    assert set(saw["peer"]) <= {
        "RESOURCE_EXHAUSTED",
        "UNAVAILABLE",
        "CANCELLED",
        "UNAUTHENTICATED",
        "held",
    }, saw
    assert status.returncode == 0, status.stdout[-3000:] + status.stderr[-3000:]
    # The node's own account of the flood as the run recorded it when its rounds ended
    # (metrics.json's refused, which status shows once the run is over). The attack outlasts
    # the rounds, so the record holds what was refused by then: the calls the attacker opened
    # at once before the run are all in it; peer streams, put off (UNAVAILABLE) until the
    # run configured a, are refused for capacity only as they are asked again after that.
    refused = json.loads(status.stdout)["nodes"]["a"]["refused"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["refused"]["a"] == refused, (metrics["refused"], refused)
    assert refused["control:denied"] >= 3 * count, refused
    assert refused["health:caller_busy"] >= count - 4, refused
    assert refused["watch:caller_busy"] >= count - 2, refused
    # Peer streams are refused for capacity only once the run configured a (before, they
    # are put off), so how many fall before the rounds end is a race; the node's live
    # count once the attack is over is not: every RESOURCE_EXHAUSTED the attacker got is
    # one the node counted, and the node counts no more than that and the calls still
    # in flight when the attacker cancelled them.
    assert refused.get("peer:capacity", 0) <= live_refused["peer:capacity"], live_refused
    got = saw["peer"]["RESOURCE_EXHAUSTED"]
    in_flight = saw["peer"].get("held", 0) + saw["peer"].get("CANCELLED", 0)
    assert got <= live_refused["peer:capacity"] <= got + in_flight, (live_refused, saw)
    assert set(metrics["refused"]) == {"a"}, metrics["refused"]  # nobody else was knocked on
    _same_as_simulate(out, tmp_path, starling_home, 60, 5.0, "netns-flood")


@pytest.mark.parametrize("delay_ms", [0, 100], ids=["loss+rate", "loss+rate+delay"])
def test_a_lossy_slow_link_completes_and_is_accounted(testbed, tmp_path, starling_home, delay_ms):
    if delay_ms and not netem_available(testbed.namespaces["b"]):
        pytest.skip("kernel has no netem: the delay part cannot be emulated here")
    testbed.loss("a", "b", 10)  # nftables numgen random: 10 % of a's packets to b dropped
    testbed.link_rate("a", "b", "1mbit")  # tc tbf on a's packets to b only
    if delay_ms:
        testbed.delay("b", delay_ms)  # pragma: no cover - this machine's kernel has no netem
    devices = Devices(testbed, tmp_path)
    try:
        addresses = {node: devices.start(node, k, ["--insecure"]) for k, node in enumerate(NODES)}
        devices.ready()
        inventory = _write(tmp_path / "nodes.yaml", {"nodes": addresses})
        # A lost segment is sent again after TCP's retransmission timeout (200 ms at least),
        # well past the 50 ms round deadline: lost packets become late or missing messages.
        experiment = _write(
            tmp_path / "exp.yaml", _experiment(300, {"source": "node"}, 0.05, "netns-lossy")
        )
        out = tmp_path / "out"
        done = _orchestrate(
            testbed, ["run", experiment, "--inventory", inventory, "--out", str(out)], starling_home
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    finally:
        devices.close()
    metrics = json.loads((out / "metrics.json").read_text())
    ab = link_summary(metrics["link_stats"])["a->b"]
    missing = ab["sent"] - ab["delivered"] - ab["late"]
    assert ab["late"] + missing > 0, ab
    assert "a→b: " in done.stdout, done.stdout[-3000:]  # the account names the link
