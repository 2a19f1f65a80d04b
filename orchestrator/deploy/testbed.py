"""What every deployment target shares: a testbed as plain data, rendered by one module per
target (:mod:`.compose`, :mod:`.swarm`, :mod:`.kubernetes`).

A :class:`Testbed` is an experiment made ready to run on nodes that a container engine starts:
each node serves synthetic shard k of its own (its position in the node list), listens on
:data:`PORT` under the DNS name ``node-<id>`` (a compose or swarm service, a Kubernetes
Service), and the orchestrator reaches them through an inventory of those names. The links
come from the experiment's plan (:func:`~starling.orchestrator.planning.plan.plan_run`):
node ``a``'s out-peers over its whole schedule are the nodes it opens connections to, so a
network policy can admit exactly those. Nothing here writes a file or calls an engine.
"""

from __future__ import annotations

import copy
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from starling.node.params import ConfigError
from starling.node.security import ORCHESTRATOR_ID
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.planning.plan import plan_run
from starling.orchestrator.topology import KINDS

__all__ = [
    "DEFAULT_EXPERIMENT",
    "METRICS_PORT",
    "NETWORK",
    "NODE_IMAGE",
    "ORCHESTRATOR_IMAGE",
    "ORCHESTRATOR_METRICS_PORT",
    "PORT",
    "STORE",
    "Testbed",
    "TestbedNode",
    "make_testbed",
    "party_files",
    "node_ids",
    "service_name",
]

PORT = 50051
"""Every node's one gRPC port: Control (the orchestrator's calls) and Peer (other nodes'
streams) are two services on it."""
METRICS_PORT = 9464
"""Where each node serves Prometheus metrics in the testbed (deploy/prometheus.yml)."""
ORCHESTRATOR_METRICS_PORT = 9465
NODE_IMAGE = "starling-node:latest"
ORCHESTRATOR_IMAGE = "starling-orchestrator:latest"
NETWORK = "testbed"
"""The network every target puts the nodes and the orchestrator on."""
STORE = "/var/lib/starling"
"""The node image's store (samples, checkpoints): a volume of the node's own."""
EXPERIMENT_PATH = "/etc/starling/experiment.yaml"
"""Where the orchestrator's container finds the experiment it runs."""
DEFAULT_EXPERIMENT = "compose-quickstart"
"""The shipped example (:mod:`starling.orchestrator.config.shipped`) run by default."""
READY_TIMEOUT = 120.0
"""Seconds the orchestrator waits for every node: images may still be starting."""


def node_ids(count: int) -> list[str]:
    """a, b, c, ... for up to 26 nodes (as docker-compose.yml names them), n0, n1, ... after."""
    if count <= 26:
        return list(string.ascii_lowercase[:count])
    return [f"n{k}" for k in range(count)]


def service_name(node: str) -> str:
    """The DNS name node ``node`` answers to on every target: ``node-<id>``."""
    return f"node-{node}"


@dataclass(frozen=True)
class TestbedNode:
    """One node of a testbed: who it is, which shard it holds, whom it talks to."""

    id: str
    shard: int
    out_peers: tuple[str, ...]
    """The nodes it opens connections to (it sends to them) over the whole schedule."""
    in_peers: tuple[str, ...]
    """The nodes that open connections to it (it takes messages from them)."""

    @property
    def service(self) -> str:
        return service_name(self.id)


@dataclass(frozen=True)
class Testbed:
    """An experiment ready for a container engine; see the module docstring."""

    nodes: tuple[TestbedNode, ...]
    experiment: Mapping[str, Any]
    """The experiment file the orchestrator runs, as its YAML mapping."""
    data_size: int
    data_seed: int
    certs_at: str | None
    """The folder where, inside each container, a party finds ``ca.pem``, its ``ID.pem`` and
    ``ID.key`` (mutual TLS); None: plain gRPC on a private network (``--insecure``)."""

    @property
    def name(self) -> str:
        return str(self.experiment["name"])

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(node.id for node in self.nodes)

    def links(self) -> set[tuple[str, str]]:
        """Every (sender, receiver) pair of the plan, over the whole schedule."""
        return {(node.id, peer) for node in self.nodes for peer in node.out_peers}

    def _tls_flags(self, party: str) -> list[str]:
        assert self.certs_at is not None
        folder = self.certs_at.rstrip("/")
        return [
            "--tls-ca",
            f"{folder}/ca.pem",
            "--tls-cert",
            f"{folder}/{party}.pem",
            "--tls-key",
            f"{folder}/{party}.key",
        ]

    def node_args(self, node: TestbedNode, metrics: bool = True) -> list[str]:
        """The arguments of the node image (after its ``node serve --config`` entrypoint)."""
        args = [
            "--id",
            node.id,
            "--shard",
            str(node.shard),
            "--data-size",
            str(self.data_size),
            "--data-seed",
            str(self.data_seed),
        ]
        if self.certs_at is None:
            # Plain gRPC on the deployment's private network; with certificates, mutual TLS.
            args.append("--insecure")
        else:
            args += self._tls_flags(node.id)
        if metrics:  # inside the deployment's network only: no port is published
            args += ["--metrics", f"0.0.0.0:{METRICS_PORT}"]
        return args

    def health_command(self, node: TestbedNode) -> list[str]:
        """``starling node health`` on the node's own loopback, with its certificate when
        it serves mutual TLS: the healthcheck or probe inside its container."""
        command = ["starling", "node", "health", f"127.0.0.1:{PORT}"]
        if self.certs_at is not None:
            command += ["--id", node.id, *self._tls_flags(node.id)]
        return command

    def orchestrator_command(self, metrics: bool = True) -> list[str]:
        command = ["starling", "run", EXPERIMENT_PATH]
        if metrics:
            command += ["--metrics", f"0.0.0.0:{ORCHESTRATOR_METRICS_PORT}"]
        return command

    def experiment_yaml(self) -> str:
        return yaml.safe_dump(dict(self.experiment), sort_keys=False)

    def tls_parties(self) -> tuple[str, ...]:
        """Whose certificate and key the deployment hands out: every node, the orchestrator."""
        return (*self.ids, ORCHESTRATOR_ID)

    def tls_files(self) -> list[str]:
        """The files of a ``starling certs init`` folder the deployment hands out: the CA's
        certificate (never its key), and every party's :func:`party_files`."""
        return [CA_FILE] + [name for party in self.tls_parties() for name in party_files(party)[1:]]


CA_FILE = "ca.pem"


def party_files(party: str) -> tuple[str, str, str]:
    """What one party (a node id, ``orchestrator``) holds: the CA's certificate, its own
    certificate, its own key."""
    return (CA_FILE, f"{party}.pem", f"{party}.key")


def _positive(value: int, flag: str, what: str, least: int = 1) -> None:
    if value < least:
        raise ConfigError(f"{flag}: expected {what}, got {value}")


def make_testbed(
    base: Mapping[str, Any],
    count: int | None = None,
    topology: str | None = None,
    data_size: int = 50,
    data_seed: int = 1,
    certs_at: str | None = None,
) -> Testbed:
    """The testbed running experiment ``base``: on its own nodes and topology, or on
    ``count`` new nodes a, b, ... (topology ``topology``, default ring), or on its nodes with
    another topology kind. Each node is given synthetic shard k of ``data_seed`` with
    ``data_size`` points (``data: {source: node}``), and the backend becomes an inventory of
    the ``node-<id>`` names; a ConfigError names the option or field that cannot work."""
    if count is not None:
        _positive(count, "--nodes", "a positive number of nodes")
    _positive(data_size, "--data-size", "a positive number of points")
    _positive(data_seed, "--data-seed", "a seed of 0 or more", least=0)
    if topology is not None and topology not in KINDS:
        # Checked here: else the line named the generated experiment's name, not the option.
        raise ConfigError(
            f"--topology: unknown topology {topology!r} (known: {', '.join(sorted(KINDS))})"
        )
    raw = copy.deepcopy(dict(base))
    if count is not None:
        raw["nodes"] = [{"id": node} for node in node_ids(count)]
        raw["topology"] = {"kind": topology or "ring"}
        raw["name"] = f"{raw.get('name', 'testbed')}-{count}-{raw['topology']['kind']}"
    elif topology is not None:
        raw["topology"] = {"kind": topology}
        raw["name"] = f"{raw.get('name', 'testbed')}-{topology}"
    # An address in the node list would pin the node elsewhere than its service name.
    raw["nodes"] = [
        {k: v for k, v in entry.items() if k != "address"} if isinstance(entry, dict) else entry
        for entry in raw.get("nodes", [])
    ]
    if not raw["nodes"]:
        raw.pop("nodes")  # the topology's own count (``topology: {nodes: 4}``) names them
    raw["data"] = {"source": "node"}
    ids = list(parse_experiment(raw).node_ids)
    backend: dict[str, Any] = {
        "kind": "inventory",
        "nodes": {node: f"{service_name(node)}:{PORT}" for node in ids},
        "ready_timeout": READY_TIMEOUT,
    }
    if certs_at is not None:
        folder = certs_at.rstrip("/")
        backend["tls"] = {
            "ca": f"{folder}/ca.pem",
            "cert": f"{folder}/{ORCHESTRATOR_ID}.pem",
            "key": f"{folder}/{ORCHESTRATOR_ID}.key",
        }
    raw["backend"] = backend
    run = plan_run(parse_experiment(raw))  # a topology that cannot hold these nodes fails here
    nodes = tuple(
        TestbedNode(
            id=node,
            shard=shard,
            out_peers=run.specs[node].out_peers(),
            in_peers=run.specs[node].in_peers(),
        )
        for shard, node in enumerate(ids)
    )
    return Testbed(nodes, raw, data_size, data_seed, certs_at)
