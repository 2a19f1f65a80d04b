"""The swarm target of ``starling deploy generate``: a stack file for ``docker stack deploy``.

    starling deploy generate --target swarm --out testbed/ [--tls certs/]
    docker stack deploy --compose-file testbed/stack.yml starling

Two files go into the folder: ``stack.yml`` and the experiment it runs (``experiment.yaml``,
a swarm config; ``docker stack deploy`` takes a config from a file only). The stack:

* an attachable overlay network, ``testbed``, that spans the swarm's devices;
* one service per node, pinned by a placement constraint to the device labelled
  ``starling.node.<id>=true`` (``docker node update --label-add starling.node.a=true DEV``),
  so that its named volume (its store: samples, checkpoints) is made on that device and stays
  there across restarts. One label per node id, not one ``starling.node=<id>`` value, so that
  one device can hold several nodes (a single-node swarm holds them all);
* ``endpoint_mode: dnsrr``: a node's service name resolves to its task's own address, with no
  virtual IP in between (gRPC keeps one connection per peer, and kernels without IPVS cannot
  route a virtual IP at all);
* with ``--tls DIR`` (a ``starling certs init`` folder whose certificates name ``node-<id>``
  too), the CA's certificate and each party's certificate and key as swarm secrets, mounted
  under ``/run/secrets`` of that party's containers only: never in an image, never in the
  stack's folder. Without it the nodes speak plain gRPC on the overlay (``--insecure``);
* the orchestrator as a one-shot service (restart condition ``none``), pinned to the device
  labelled ``starling.orchestrator=true``, writing to ``${STARLING_RESULTS:-./results}``
  there (a folder that must exist on that device).

Images are not built by a stack: build ``starling-node`` and ``starling-orchestrator`` on
every device (or push them to a registry the devices reach). Node tasks that die are started
again on their device (restart condition ``on-failure``), resuming from their store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starling.node.security import ORCHESTRATOR_ID
from starling.orchestrator.deploy.compose import dump, healthcheck
from starling.orchestrator.deploy.testbed import (
    EXPERIMENT_PATH,
    NETWORK,
    NODE_IMAGE,
    ORCHESTRATOR_IMAGE,
    STORE,
    Testbed,
    party_files,
)

__all__ = [
    "EXPERIMENT_FILE",
    "NODE_LABEL",
    "ORCHESTRATOR_LABEL",
    "SECRETS_AT",
    "STACK_FILE",
    "generate",
    "node_label",
]

STACK_FILE = "stack.yml"
EXPERIMENT_FILE = "experiment.yaml"
SECRETS_AT = "/run/secrets"
"""Where swarm mounts a service's secrets: ``certs_at`` of a swarm testbed with TLS."""
NODE_LABEL = "starling.node"
ORCHESTRATOR_LABEL = "starling.orchestrator"
IMAGE_USER = "10001"
"""The images' user ``starling`` (docker/Dockerfile), which must read its key."""


def node_label(node: str) -> str:
    """The device label that places node ``node``: ``starling.node.<id>``."""
    return f"{NODE_LABEL}.{node}"


def _secret(name: str, mode: int) -> dict[str, Any]:
    return {"source": name, "target": name, "uid": IMAGE_USER, "gid": IMAGE_USER, "mode": mode}


def _secrets_of(party: str, key_mode: int) -> list[dict[str, Any]]:
    ca, certificate, key = party_files(party)
    return [_secret(ca, 0o444), _secret(certificate, 0o444), _secret(key, key_mode)]


def generate(testbed: Testbed, certs: Path | None = None) -> dict[str, str]:
    """File name -> text of the stack's folder; ``certs``: the folder (absolute) holding the
    TLS files the secrets are made of, when ``testbed`` uses TLS (``certs_at`` is
    :data:`SECRETS_AT`)."""
    services: dict[str, Any] = {}
    for node in testbed.nodes:
        service: dict[str, Any] = {
            "image": NODE_IMAGE,
            "command": testbed.node_args(node),
            "networks": [NETWORK],
            "volumes": [f"{node.service}:{STORE}"],
            "healthcheck": healthcheck(testbed, node),
            "stop_grace_period": "10s",
            "deploy": {
                "endpoint_mode": "dnsrr",
                "placement": {"constraints": [f"node.labels.{node_label(node.id)} == true"]},
                "restart_policy": {"condition": "on-failure", "delay": "2s"},
            },
        }
        if certs is not None:
            service["secrets"] = _secrets_of(node.id, 0o400)
        services[node.service] = service
    orchestrator: dict[str, Any] = {
        "image": ORCHESTRATOR_IMAGE,
        "user": "root",  # docker/entrypoint.sh drops to the owner of the results folder
        "command": testbed.orchestrator_command(),
        "networks": [NETWORK],
        "configs": [{"source": "experiment", "target": EXPERIMENT_PATH}],
        "volumes": [
            {"type": "bind", "source": "${STARLING_RESULTS:-./results}", "target": "/results"}
        ],
        "deploy": {
            "endpoint_mode": "dnsrr",
            "placement": {"constraints": [f"node.labels.{ORCHESTRATOR_LABEL} == true"]},
            "restart_policy": {"condition": "none"},
        },
    }
    if certs is not None:
        # Readable by whichever user the entrypoint drops to (the results folder's owner):
        # the files live in this one-shot container's own tmpfs and nowhere else.
        orchestrator["secrets"] = _secrets_of(ORCHESTRATOR_ID, 0o444)
    services["orchestrator"] = orchestrator
    document: dict[str, Any] = {
        # `docker stack deploy` reads the compose file format 3 and wants its version said.
        "version": "3.8",
        "services": services,
        "networks": {NETWORK: {"driver": "overlay", "attachable": True}},
        "volumes": {n.service: {} for n in testbed.nodes},
        "configs": {"experiment": {"file": f"./{EXPERIMENT_FILE}"}},
    }
    if certs is not None:
        document["secrets"] = {name: {"file": str(certs / name)} for name in testbed.tls_files()}
    labels = " ".join(f"{node_label(n)}=true" for n in testbed.ids)
    header = (
        f"# A Starling swarm stack: {len(testbed.nodes)} nodes and an orchestrator running "
        f"{testbed.name!r}.\n"
        f"#   docker node update --label-add {ORCHESTRATOR_LABEL}=true DEVICE, and for each\n"
        f"#   node the device that holds it: {labels}\n"
        "#   docker stack deploy --compose-file stack.yml NAME      (from this folder)\n"
    )
    return {STACK_FILE: header + dump(document), EXPERIMENT_FILE: testbed.experiment_yaml()}
