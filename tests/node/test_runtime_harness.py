"""Real node processes for the runtime tests: ``python -m starling.node serve`` on 127.0.0.1.

Not a test module itself (it holds no tests); the runtime test files import it. Every
process started through a :class:`Cluster` is killed when the cluster closes, whatever
happened in the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from starling.node.protocol.contract import READY_PREFIX
from starling.node.protocol.starling.v1 import peer_pb2, peer_pb2_grpc
from starling.node.runtime.link_proof import challenge_of, proof
from starling.orchestrator.config.experiment import Experiment, parse_experiment
from starling.orchestrator.execution.client import NodeClient
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0  # generous: two shared cores, several interpreters importing numpy


@dataclass
class NodeProc:
    node_id: str
    state_dir: Path
    log_path: Path
    process: subprocess.Popen
    address: str = ""
    first_line: str = ""
    clients: list[NodeClient] = field(default_factory=list)

    def client(self, timeout: float = 10.0) -> NodeClient:
        client = NodeClient(self.address, timeout=timeout)
        self.clients.append(client)
        return client

    def signal(self, signum: int) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signum)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class Cluster:
    """Starts node processes and guarantees they are gone afterwards."""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.procs: list[NodeProc] = []

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def launch(
        self,
        node_id: str,
        listen: str = "127.0.0.1:0",
        state_dir: Path | None = None,
        extra: Iterable[str] = (),
    ) -> NodeProc:
        """Start a node process without waiting for it (see :meth:`ready`)."""
        state_dir = state_dir or self.workdir / f"state-{node_id}"
        log_path = self.workdir / f"node-{node_id}-{len(self.procs)}.log"
        log = open(log_path, "wb")  # noqa: SIM115 - handed to the child
        command = [
            sys.executable,
            "-m",
            "starling.node",
            "serve",
            "--listen",
            listen,
            "--state-dir",
            str(state_dir),
            *extra,
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        log.close()
        proc = NodeProc(node_id, state_dir, log_path, process)
        self.procs.append(proc)
        return proc

    def ready(self, proc: NodeProc, timeout: float = START_TIMEOUT) -> NodeProc:
        """Wait for the node's one stdout line and record its address."""
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(proc.process.stdout.readline()))
        reader.daemon = True
        reader.start()
        reader.join(timeout)
        if not line or not line[0].startswith(READY_PREFIX):
            raise AssertionError(
                f"node {proc.node_id} did not report ready: {line!r}\n{proc.log()}"
            )
        proc.first_line = line[0]
        proc.address = line[0][len(READY_PREFIX) :].strip()
        return proc

    def start_nodes(self, node_ids: Iterable[str], **kwargs: Any) -> dict[str, NodeProc]:
        """Launch all at once (imports overlap), then wait for each."""
        procs = {node_id: self.launch(node_id, **kwargs) for node_id in node_ids}
        return {node_id: self.ready(proc) for node_id, proc in procs.items()}

    def close(self) -> None:
        for proc in self.procs:
            for client in proc.clients:
                client.close()
            if proc.process.poll() is None:
                proc.process.send_signal(signal.SIGCONT)  # in case a test paused it
                proc.process.kill()
        for proc in self.procs:
            try:
                proc.process.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
                pass
            if proc.process.stdout is not None:
                proc.process.stdout.close()


def exchange_as(
    stub: peer_pb2_grpc.PeerStub,
    client: NodeClient,
    sender: str,
    requests: Iterable[peer_pb2.Iterate],
    timeout: float = 10.0,
    *,
    secret: str | None = None,
    future: bool = False,
) -> Any:
    """A Peer stream from ``sender`` to the node ``client`` configured, as a genuine sender
    opens it: it answers the node's challenge with the proof of that link's secret
    (:meth:`~starling.orchestrator.execution.access.Access.link_secret`, or ``secret``), then sends
    ``requests``. The summary, or with ``future`` the call."""
    status = client.status()
    key = client.access.link_secret(sender, status.node_id) if secret is None else secret
    opened: list[grpc.Future] = []
    started = threading.Event()

    def stream() -> Iterator[peer_pb2.Iterate]:
        started.wait(timeout)
        challenge = challenge_of(opened[0].initial_metadata()) if opened else None
        if challenge is None:
            return
        answer = proof(key, status.experiment, sender, status.node_id, challenge)
        yield peer_pb2.Iterate(proof=answer)
        yield from requests

    try:
        call = stub.Exchange.future(
            stream(), timeout=timeout, metadata=(("starling-sender", sender),)
        )
        opened.append(call)
    finally:
        started.set()
    return call if future else call.result()


def ring_experiment(name: str, rounds: int, deadline: float, **overrides: Any) -> Experiment:
    """D-SGLD on a ring of three nodes, Bayesian linear regression on private shards."""
    raw = {
        "name": name,
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.01},
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "data": {"source": "synthetic", "size": 20, "seed": 5},
        "topology": {"kind": "ring", "nodes": 3},
        "rounds": rounds,
        "chains": 3,
        "seed": 11,
        "round_deadline": deadline,
        **overrides,
    }
    return parse_experiment(raw)


def start_run(procs: dict[str, NodeProc], specs) -> dict[str, NodeClient]:
    """Configure each spec's node, then start them all (no node starts before every node
    is configured); returns node id -> client."""
    clients = {spec.node_id: procs[spec.node_id].client() for spec in specs}
    for spec in specs:
        clients[spec.node_id].wait_ready()
        clients[spec.node_id].configure(spec)
    for client in clients.values():
        client.start()
    return clients


def wait_done(clients: dict[str, NodeClient], timeout: float) -> float:
    """Wait until every node reports ``done``; returns the time it took."""
    return wait_until(
        lambda: all(c.status().state == "done" for c in clients.values()), timeout, "done"
    )
