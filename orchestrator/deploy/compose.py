"""``starling compose generate``: a compose testbed of any size and graph, as one file.

    starling compose generate --nodes 8 --topology full > compose.gen.yml
    docker compose -f compose.gen.yml run --rm --build orchestrator

The output has the shape of the top-level ``docker-compose.yml`` — one service per node,
each with synthetic shard k of its own, its own volume and a gRPC healthcheck, and an
orchestrator that waits for them all — but the experiment travels inside the file (a
compose ``configs`` entry): the ``--experiment`` file or shipped example (default: the
shipped ``compose-quickstart``) with its node list, topology kind and inventory rewritten
for the generated nodes. Write it at the repository's top level: the build context is
``.``. ``--out`` never replaces an existing file unless ``--overwrite`` says so.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

import yaml

from starling.node.params import ConfigError
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.config.shipped import experiment_file
from starling.orchestrator.config.yaml_files import read_yaml_file

__all__ = ["DEFAULT_EXPERIMENT", "generate", "node_ids"]

PORT = 50051
METRICS_PORT = 9464
"""Where each node serves Prometheus metrics in the testbed (deploy/prometheus.yml)."""
ORCHESTRATOR_METRICS_PORT = 9465
DEFAULT_EXPERIMENT = "compose-quickstart"
"""The shipped example (:mod:`starling.orchestrator.config.shipped`) run by default."""


def node_ids(count: int) -> list[str]:
    """a, b, c, ... for up to 26 nodes (as docker-compose.yml names them), n0, n1, ... after."""
    if count <= 26:
        return list(string.ascii_lowercase[:count])
    return [f"n{k}" for k in range(count)]


def _experiment(base: Mapping[str, Any], ids: list[str], topology: str, ready: float) -> dict:
    raw = dict(base)
    raw["name"] = f"{raw.get('name', 'compose')}-{len(ids)}-{topology}"
    raw["nodes"] = [{"id": node} for node in ids]
    raw["topology"] = {"kind": topology}
    raw["data"] = {"source": "node"}
    raw["backend"] = {
        "kind": "inventory",
        "nodes": {node: f"node-{node}:{PORT}" for node in ids},
        "ready_timeout": ready,
    }
    parse_experiment(raw)  # a topology that cannot hold this many nodes fails here
    return raw


def generate(
    count: int,
    topology: str = "ring",
    experiment: Mapping[str, Any] | None = None,
    data_size: int = 50,
    data_seed: int = 1,
) -> str:
    """The compose file's text for ``count`` nodes on ``topology``."""
    if count < 1:
        raise ConfigError(f"--nodes: expected a positive number of nodes, got {count}")
    if data_size < 1:
        raise ConfigError(f"--data-size: expected a positive number of points, got {data_size}")
    if data_seed < 0:
        raise ConfigError(f"--data-seed: expected a seed of 0 or more, got {data_seed}")
    ids = node_ids(count)
    base = (
        experiment
        if experiment is not None
        else read_yaml_file(experiment_file(DEFAULT_EXPERIMENT))
    )
    raw = _experiment(base, ids, topology, ready=120.0)
    build = {
        "context": ".",
        "dockerfile": "docker/Dockerfile",
        "args": {"BASE_IMAGE": "${STARLING_BASE_IMAGE:-python:3.11-slim-bookworm}"},
    }
    services: dict[str, Any] = {}
    for shard, node in enumerate(ids):
        services[f"node-{node}"] = {
            "image": "starling-node:latest",
            "build": {**build, "target": "node"},
            "networks": ["testbed"],
            "command": [
                "--id",
                node,
                "--shard",
                str(shard),
                "--data-size",
                str(data_size),
                "--data-seed",
                str(data_seed),
                # A testbed on a private compose network: plain gRPC is allowed there
                # (the TLS overlay, compose.tls.yml, replaces this with certificates).
                "--insecure",
                # Prometheus metrics inside the compose network (no port published).
                "--metrics",
                f"0.0.0.0:{METRICS_PORT}",
            ],
            "volumes": [f"node-{node}:/var/lib/starling"],
            "healthcheck": {
                "test": ["CMD", "starling", "node", "health", f"127.0.0.1:{PORT}"],
                "interval": "3s",
                "timeout": "10s",
                "retries": 40,
                "start_period": "120s",
            },
            "stop_grace_period": "10s",
        }
    services["orchestrator"] = {
        "image": "starling-orchestrator:latest",
        "build": {**build, "target": "orchestrator"},
        "networks": ["testbed"],
        "user": "root",  # docker/entrypoint.sh drops to the owner of ./results
        # tini passes SIGTERM on; a stop gives the run time to collect and write results.
        "init": True,
        "stop_grace_period": "2m",
        "environment": {"STARLING_TESTBED": "compose"},
        "command": [
            "starling",
            "run",
            "/etc/starling/experiment.yaml",
            "--metrics",
            f"0.0.0.0:{ORCHESTRATOR_METRICS_PORT}",
        ],
        "configs": [{"source": "experiment", "target": "/etc/starling/experiment.yaml"}],
        "volumes": ["${STARLING_RESULTS:-./results}:/results"],
        "depends_on": {f"node-{n}": {"condition": "service_healthy"} for n in ids},
    }
    document = {
        "services": services,
        "networks": {"testbed": {}},
        "volumes": {f"node-{n}": {} for n in ids},
        "configs": {"experiment": {"content": yaml.safe_dump(raw, sort_keys=False)}},
    }
    header = (
        f"# Generated by `starling compose generate --nodes {count} --topology {topology}`:\n"
        f"# {count} Starling nodes and an orchestrator running {raw['name']!r}.\n"
    )
    return header + yaml.dump(document, Dumper=_Plain, sort_keys=False, width=100)


class _Plain(yaml.SafeDumper):
    """No ``&id001`` anchors for the build section every service shares."""

    def ignore_aliases(self, data: Any) -> bool:
        return True
