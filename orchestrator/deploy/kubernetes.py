"""The kubernetes target of ``starling deploy generate``: manifests for ``kubectl apply``.

    starling deploy generate --target kubernetes --tls certs/ > starling.yaml
    kubectl apply -n starling -f starling.yaml

For every node ``<id>``:

* a Deployment of one pod (strategy Recreate: never two pods on one store), placed on the
  machine labelled ``starling.node.<id>=true``, its probes ``starling node health`` on the
  pod's own loopback (readiness: SERVING; liveness: the same, with room for a slow start);
* a headless Service ``node-<id>``: the stable DNS name its peers and the orchestrator dial,
  resolving to the pod itself;
* a PersistentVolumeClaim ``node-<id>-store`` for its store (samples, checkpoints), which
  follows the pod across restarts (on k3s, the local-path provisioner keeps it on that board);
* with ``--tls DIR``, a Secret ``node-<id>-tls`` with the CA's certificate and its own
  certificate and key, mounted read-only at ``/certs``;

and once: the experiment as a ConfigMap, the orchestrator as a Job (no retries: a second
orchestrator would start the run again) writing to the PersistentVolumeClaim
``starling-results``, its Secret, and the NetworkPolicies.

NetworkPolicies hold the topology's direction in the network: all traffic of Starling's pods
is denied but what these admit. Node ``b`` admits connections to its port from the nodes
that send to it (its in-peers over the whole schedule) and from the orchestrator; node ``a``
may open connections to the nodes it sends to (its out-peers), and the orchestrator to every
node; each pod may also reach the cluster's DNS. A one-way link a->b thus lets only ``a``
open a connection to ``b``. Control and Peer share the node's one port, which a
NetworkPolicy cannot tell apart: it admits an in-peer to the port, and mutual TLS keeps the
in-peer off Control (a node accepts only the orchestrator's certificate there).
:func:`network_policies` with ``cut`` writes the policies with links taken out, the
Kubernetes form of a kernel link cut (``starling deploy policies --cut a:b``).
"""

from __future__ import annotations

import base64
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from starling.node.params import ConfigError
from starling.node.security import ORCHESTRATOR_ID
from starling.orchestrator.deploy.compose import dump
from starling.orchestrator.deploy.testbed import (
    EXPERIMENT_PATH,
    NODE_IMAGE,
    ORCHESTRATOR_IMAGE,
    PORT,
    STORE,
    Testbed,
    TestbedNode,
    party_files,
)

__all__ = [
    "CERTS_AT",
    "ROLE_LABEL",
    "check_names",
    "generate",
    "manifests",
    "network_policies",
    "recovery_job",
    "render",
]

CERTS_AT = "/certs"
"""Where a pod finds its TLS files: ``certs_at`` of a kubernetes testbed with TLS."""
PART_OF = {"app.kubernetes.io/part-of": "starling"}
ROLE_LABEL = "starling/role"
NODE_LABEL = "starling/node"
MACHINE_LABEL = "starling.node"
"""Prefix of the machine label that places node ``<id>``: ``starling.node.<id>=true``."""
ORCHESTRATOR_MACHINE_LABEL = "starling.orchestrator"
IMAGE_USER = 10001
"""The images' user ``starling`` (docker/Dockerfile)."""
EXPERIMENT_CONFIG = "starling-experiment"
RESULTS_CLAIM = "starling-results"
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
ORCHESTRATOR_SECRET = f"{ORCHESTRATOR_ID}-tls"


def _meta(name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {"name": name, "labels": {**PART_OF, **(labels or {})}}


def _node_labels(node: str) -> dict[str, str]:
    return {ROLE_LABEL: "node", NODE_LABEL: node}


def _orchestrator_labels() -> dict[str, str]:
    return {ROLE_LABEL: ORCHESTRATOR_ID}


def _claim(name: str, size: str, labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _meta(name, labels),
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
    }


def _secret(name: str, files: Mapping[str, bytes], labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(name, labels),
        "type": "Opaque",
        "data": {file: base64.b64encode(data).decode("ascii") for file, data in files.items()},
    }


def _tls_files(party: str, certs: Mapping[str, bytes]) -> dict[str, bytes]:
    return {name: certs[name] for name in party_files(party)}


def _pod_security() -> dict[str, Any]:
    # fsGroup: the volumes (store, results) are writable by the image's user.
    return {"runAsUser": IMAGE_USER, "runAsGroup": IMAGE_USER, "fsGroup": IMAGE_USER}


def _probe(testbed: Testbed, node: TestbedNode, failures: int, delay: int) -> dict[str, Any]:
    return {
        "exec": {"command": testbed.health_command(node)},
        "initialDelaySeconds": delay,
        "periodSeconds": 5,
        "timeoutSeconds": 10,
        "failureThreshold": failures,
    }


def _node_objects(
    testbed: Testbed, node: TestbedNode, certs: Mapping[str, bytes] | None, storage: str
) -> list[dict[str, Any]]:
    labels = _node_labels(node.id)
    mounts: list[dict[str, Any]] = [{"name": "store", "mountPath": STORE}]
    volumes: list[dict[str, Any]] = [
        {"name": "store", "persistentVolumeClaim": {"claimName": f"{node.service}-store"}}
    ]
    objects: list[dict[str, Any]] = []
    if certs is not None:
        objects.append(_secret(f"{node.service}-tls", _tls_files(node.id, certs), labels))
        mounts.append({"name": "tls", "mountPath": CERTS_AT, "readOnly": True})
        volumes.append(
            {"name": "tls", "secret": {"secretName": f"{node.service}-tls", "defaultMode": 0o400}}
        )
    container = {
        "name": "node",
        "image": NODE_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "args": testbed.node_args(node),
        "ports": [{"name": "grpc", "containerPort": PORT, "protocol": "TCP"}],
        "volumeMounts": mounts,
        "readinessProbe": _probe(testbed, node, failures=3, delay=2),
        # Restarted only when it stops answering for a minute: a loaded board is slow.
        "livenessProbe": _probe(testbed, node, failures=12, delay=30),
    }
    objects += [
        _claim(f"{node.service}-store", storage, labels),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(node.service, labels),
            "spec": {
                "clusterIP": "None",  # headless: the name resolves to the pod itself
                "selector": labels,
                "ports": [{"name": "grpc", "port": PORT, "targetPort": PORT, "protocol": "TCP"}],
            },
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta(node.service, labels),
            "spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},  # one pod at a time on the store
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": {**PART_OF, **labels}},
                    "spec": {
                        "nodeSelector": {f"{MACHINE_LABEL}.{node.id}": "true"},
                        "securityContext": _pod_security(),
                        "terminationGracePeriodSeconds": 10,
                        "containers": [container],
                        "volumes": volumes,
                    },
                },
            },
        },
    ]
    return objects


def _job(
    name: str, args: list[str], mounts: list[dict[str, Any]], volumes: list[dict[str, Any]]
) -> dict[str, Any]:
    """A one-shot pod of the orchestrator image, labelled as the orchestrator (so the
    policies let it reach the nodes) and placed on the orchestrator's machine."""
    labels = _orchestrator_labels()
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(name, labels),
        "spec": {
            "backoffLimit": 0,  # a second try would start the run again, not resume it
            "template": {
                "metadata": {"labels": {**PART_OF, **labels}},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {ORCHESTRATOR_MACHINE_LABEL: "true"},
                    "securityContext": _pod_security(),
                    "containers": [
                        {
                            "name": ORCHESTRATOR_ID,
                            "image": ORCHESTRATOR_IMAGE,
                            "imagePullPolicy": "IfNotPresent",
                            "args": args,
                            "volumeMounts": mounts,
                        }
                    ],
                    "volumes": volumes,
                },
            },
        },
    }


def _orchestrator_volumes(tls: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The orchestrator's mounts and volumes: results, the experiment, its TLS Secret."""
    mounts: list[dict[str, Any]] = [
        {"name": "results", "mountPath": "/results"},
        {"name": "experiment", "mountPath": "/etc/starling", "readOnly": True},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "results", "persistentVolumeClaim": {"claimName": RESULTS_CLAIM}},
        {"name": "experiment", "configMap": {"name": EXPERIMENT_CONFIG}},
    ]
    if tls:
        mounts.append({"name": "tls", "mountPath": CERTS_AT, "readOnly": True})
        volumes.append(
            {"name": "tls", "secret": {"secretName": ORCHESTRATOR_SECRET, "defaultMode": 0o400}}
        )
    return mounts, volumes


def recovery_job(testbed: Testbed, run_folder: str) -> dict[str, Any]:
    """A Job that stops the nodes' rounds of the run in ``run_folder`` (on the results
    claim) and writes its results from what they stored: ``starling stop``, then
    ``starling collect``, for when the orchestrator's Job died mid-run."""
    mounts, volumes = _orchestrator_volumes(testbed.certs_at is not None)
    folder = shlex.quote(run_folder)
    script = f"starling stop --run {folder}; exec starling collect {folder}"
    return _job(f"starling-{ORCHESTRATOR_ID}-collect", ["sh", "-c", script], mounts, volumes)


def _orchestrator_objects(
    testbed: Testbed, certs: Mapping[str, bytes] | None, storage: str
) -> list[dict[str, Any]]:
    labels = _orchestrator_labels()
    mounts, volumes = _orchestrator_volumes(certs is not None)
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(EXPERIMENT_CONFIG, labels),
            "data": {EXPERIMENT_PATH.rsplit("/", 1)[1]: testbed.experiment_yaml()},
        },
        _claim(RESULTS_CLAIM, storage, labels),
    ]
    if certs is not None:
        objects.append(_secret(ORCHESTRATOR_SECRET, _tls_files(ORCHESTRATOR_ID, certs), labels))
    objects.append(
        _job(f"starling-{ORCHESTRATOR_ID}", testbed.orchestrator_command(), mounts, volumes)
    )
    return objects


def _dns_egress() -> dict[str, Any]:
    """Every pod may ask the cluster's DNS (kube-dns, CoreDNS on k3s) for its peers' names."""
    return {
        "to": [
            {
                "namespaceSelector": {},
                "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
            }
        ],
        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
    }


def _pods(labels: Iterable[Mapping[str, str]]) -> list[dict[str, Any]]:
    return [{"podSelector": {"matchLabels": dict(found)}} for found in labels]


def _grpc_port() -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": PORT}]


def network_policies(testbed: Testbed, cut: Iterable[tuple[str, str]] = ()) -> list[dict[str, Any]]:
    """The NetworkPolicies admitting exactly the testbed's links (module docstring), less
    the (sender, receiver) links in ``cut``."""
    check_names(testbed)
    down = set(cut)
    policies: list[dict[str, Any]] = [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta("starling-deny-all"),
            # No rule: nothing in or out of a Starling pod but what the policies below admit.
            "spec": {
                "podSelector": {"matchLabels": dict(PART_OF)},
                "policyTypes": ["Ingress", "Egress"],
            },
        }
    ]
    for node in testbed.nodes:
        senders = [_node_labels(p) for p in node.in_peers if (p, node.id) not in down]
        receivers = [_node_labels(p) for p in node.out_peers if (node.id, p) not in down]
        egress = [_dns_egress()]
        if receivers:
            egress.insert(0, {"to": _pods(receivers), "ports": _grpc_port()})
        policies.append(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": _meta(f"{node.service}-links", _node_labels(node.id)),
                "spec": {
                    "podSelector": {"matchLabels": _node_labels(node.id)},
                    "policyTypes": ["Ingress", "Egress"],
                    "ingress": [
                        {
                            "from": _pods([*senders, _orchestrator_labels()]),
                            "ports": _grpc_port(),
                        }
                    ],
                    "egress": egress,
                },
            }
        )
    policies.append(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta(f"starling-{ORCHESTRATOR_ID}", _orchestrator_labels()),
            "spec": {
                "podSelector": {"matchLabels": _orchestrator_labels()},
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [],  # nothing dials the orchestrator
                "egress": [
                    {"to": _pods(_node_labels(n) for n in testbed.ids), "ports": _grpc_port()},
                    _dns_egress(),
                ],
            },
        }
    )
    return policies


def check_names(testbed: Testbed) -> None:
    """A ConfigError naming the first node whose Service name ``node-<id>`` Kubernetes
    would refuse (a DNS label: lowercase letters, digits and ``-``, at most 63)."""
    for node in testbed.nodes:
        if not _DNS_LABEL.fullmatch(node.service) or len(node.service) > 63:
            raise ConfigError(
                f"nodes: node {node.id!r} would be the Kubernetes Service {node.service!r}, "
                "but a Service name is lowercase letters, digits and '-' (at most 63): "
                "rename the node"
            )


_QUANTITY = re.compile(
    r"\+?(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[mkMGTPE]|[eE][+-]?[0-9]+)?"
)
"""A Kubernetes resource quantity (apimachinery's ``resource.Quantity``): a decimal number
and a binary (``Ki`` … ``Ei``), decimal (``m``, ``k`` … ``E``) or exponent suffix."""


def check_storage(storage: str) -> None:
    """A ConfigError naming ``--storage`` unless it is a size a volume claim can ask for.
    The schemas take any string there (``storage: lots`` validated), and only the cluster's
    API server refused it, at ``kubectl apply``."""
    match = _QUANTITY.fullmatch(storage)
    if match is None or float(match["number"]) <= 0:
        raise ConfigError(f"--storage: expected a size like 1Gi, 500Mi or 10G, got {storage!r}")


def manifests(
    testbed: Testbed, certs: Mapping[str, bytes] | None = None, storage: str = "1Gi"
) -> list[dict[str, Any]]:
    """Every object, in the order ``kubectl apply`` creates them; ``certs``: file name ->
    content of a ``starling certs init`` folder when ``testbed`` uses TLS (``certs_at`` is
    :data:`CERTS_AT`); ``storage``: the size each claim asks for (:func:`check_storage`)."""
    check_names(testbed)
    check_storage(storage)
    objects: list[dict[str, Any]] = []
    for node in testbed.nodes:
        objects += _node_objects(testbed, node, certs, storage)
    objects += _orchestrator_objects(testbed, certs, storage)
    return objects + network_policies(testbed)


def render(objects: Iterable[Mapping[str, Any]], header: str = "") -> str:
    """Manifests as one multi-document YAML file."""
    return header + "".join("---\n" + dump(dict(obj)) for obj in objects)


def generate(
    testbed: Testbed, certs: Mapping[str, bytes] | None = None, storage: str = "1Gi"
) -> str:
    """The manifests' text (:func:`manifests`), with a header saying how to apply them."""
    labels = " ".join(f"{MACHINE_LABEL}.{n}=true" for n in testbed.ids)
    header = (
        f"# Starling on Kubernetes: {len(testbed.nodes)} nodes and an orchestrator Job running "
        f"{testbed.name!r}.\n"
        f"#   kubectl label node MACHINE {ORCHESTRATOR_MACHINE_LABEL}=true, and for each node\n"
        f"#   the machine that holds it: {labels}\n"
        "#   kubectl apply -n NAMESPACE -f THIS_FILE\n"
    )
    return render(manifests(testbed, certs, storage), header)
