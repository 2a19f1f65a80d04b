"""``start.json``: what ``starling collect`` needs should a run's orchestrator die.

Written once the nodes have started (:func:`write_start`): which node ran where — its address,
process id, state dir and the (experiment, node id) its store is kept under — beside
``experiment.yaml``, the experiment as run. Sealed with the user's key
(:mod:`starling.orchestrator.core.seals`) and read back, checked field by field as the input it
is, by :func:`read_start`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

import yaml

from starling.node.params import ConfigError
from starling.node.spec import NodeSpec
from starling.orchestrator.config.backends import BACKENDS, capabilities_of
from starling.orchestrator.core.seals import check_seal, sealed
from starling.orchestrator.planning.plan import RunPlan

__all__ = ["START", "check_experiment_file", "read_start", "write_start"]

START = "start.json"


def write_start(
    out_dir: Path,
    plan: RunPlan,
    specs: Mapping[str, NodeSpec],
    addresses: Mapping[str, str],
    pids: Mapping[str, int | None],
    state_dirs: Mapping[str, Path],
) -> None:
    """What ``collect`` needs if this run's orchestrator dies, written once the nodes
    started: their ``addresses``, process ids and state dirs on this machine (where the
    backend keeps them), and each node's stored run."""
    out_dir = Path(out_dir)
    nodes = {}
    for node, spec in specs.items():
        state = state_dirs.get(node)
        nodes[node] = {
            "address": addresses.get(node),
            "pid": pids.get(node),
            "state_dir": os.path.relpath(state, out_dir) if state is not None else None,
            "stored_run": [spec.experiment, spec.node_id],
        }
    body = {
        "experiment": plan.name,
        "backend": plan.backend.kind,
        "orchestrator_pid": os.getpid(),
        "nodes": nodes,
    }
    text = yaml.safe_dump(dict(plan.evaluation.source), sort_keys=False)
    (out_dir / "experiment.yaml").write_text(text)
    body["experiment_sha256"] = hashlib.sha256(text.encode()).hexdigest()  # sealed with it
    (out_dir / START).write_text(json.dumps(sealed(body), indent=2) + "\n")


def check_experiment_file(out: Path, start: dict) -> None:
    """``experiment.yaml`` as the run wrote it (its digest is sealed in ``start.json``):
    its backend section says which credentials reach the nodes."""
    path = out / "experiment.yaml"
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise ConfigError(f"collect: {path}: unreadable ({exc.strerror or exc})") from None
    if digest != start.get("experiment_sha256"):
        raise ConfigError(
            f"collect: {path}: changed since the run wrote it (its digest is not the one "
            f"{START} holds), so it is not trusted to say which credentials reach the nodes"
        )


def read_start(out: Path) -> dict:
    """``start.json`` as written by :func:`write_start`; anything else is one line naming
    the file and the field."""
    path = out / START
    try:
        start = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"collect: {out} has no {START}: the run stopped before its nodes "
            "started, so nothing was stored"
        ) from None
    except OSError as exc:
        raise ConfigError(f"collect: {path}: unreadable ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ConfigError(f"collect: {path}: unreadable ({exc})") from None

    def damaged(field: str, expected: str, got: object) -> ConfigError:
        shown = repr(got) if len(repr(got)) <= 60 else repr(got)[:57] + "..."
        return ConfigError(
            f"collect: {path}: {field}: expected {expected}, got {shown} (the file is damaged)"
        )

    if not isinstance(start, dict):
        raise ConfigError(
            f"collect: {path}: expected a JSON object, got a "
            f"{type(start).__name__} (the file is damaged)"
        )
    for key in ("experiment", "backend"):
        if not isinstance(start.get(key), str) or not start[key]:
            raise damaged(key, "a name", start.get(key))
    if start["backend"] not in BACKENDS:
        raise damaged("backend", f"one of {', '.join(sorted(BACKENDS))}", start["backend"])
    nodes = start.get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        raise damaged("nodes", "a mapping of node ids", nodes)
    # Nodes whose stores are on this machine are started again on them: no address needed.
    local = capabilities_of(start["backend"]).local_stores
    for node, entry in nodes.items():
        _check_node(node, entry, local, damaged)
    check_seal(start, path, "collect from the nodes it names with your credentials")
    return start


def _check_node(node: str, entry: object, local: bool, damaged) -> None:
    """One node's entry of ``start.json``; ``damaged(field, expected, got)`` makes the error."""
    if not isinstance(entry, dict):
        raise damaged(f"nodes.{node}", "a mapping", entry)
    stored = entry.get("stored_run")
    if not (
        isinstance(stored, list)
        and len(stored) == 2
        and all(isinstance(v, str) and v for v in stored)
    ):
        raise damaged(f"nodes.{node}.stored_run", "[experiment, node id]", stored)
    address = entry.get("address")
    if not (isinstance(address, str) and address) and not (local and address is None):
        raise damaged(f"nodes.{node}.address", "host:port", address)
    pid = entry.get("pid")
    if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int)):
        raise damaged(f"nodes.{node}.pid", "a process id", pid)
    state_dir = entry.get("state_dir")
    if state_dir is not None and not isinstance(state_dir, str):
        raise damaged(f"nodes.{node}.state_dir", "a folder", state_dir)
