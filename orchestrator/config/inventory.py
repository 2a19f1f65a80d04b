"""An inventory file: the nodes that already run, as an experiment's ``backend`` section.

``starling run EXP.yaml --inventory nodes.yaml`` drives nodes that already run (devices, the
compose testbed) in place of the experiment's backend. The file is that section without
``kind``::

    nodes: {a: "10.0.0.5:50051", b: "10.0.0.6:50051"}
    ready_timeout: 60        # optional
    tls: {ca: ca.pem, cert: orchestrator.pem, key: orchestrator.key}   # optional
    token_file: token        # optional

Paths in it are relative to the file, so an inventory and its certificates travel together.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from starling.node.params import ConfigError, existing_file
from starling.node.yaml_input import read_yaml

__all__ = ["load_inventory", "with_inventory"]


def load_inventory(path: str | Path) -> dict[str, Any]:
    """An inventory file as a ``backend`` section (``kind: inventory`` added)."""
    file = existing_file(path, "--inventory")
    raw = read_yaml(file, "--inventory")  # a key given twice is refused here, named
    if not isinstance(raw, Mapping) or not isinstance(raw.get("nodes"), Mapping):
        raise ConfigError(f"{file}: expected 'nodes:' mapping node ids to host:port")
    if not raw["nodes"]:
        raise ConfigError(f"{file}: nodes: expected at least one node id: host:port")
    known = {"nodes", "ready_timeout", "tls", "token_file"}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(
            f"{file}: {unknown[0]}: unknown field (known: {', '.join(sorted(known))})"
        )
    raw = dict(raw)
    base = file.resolve().parent
    # Paths in the file are relative to it, so an inventory and its certs travel together.
    for name in ("ca", "cert", "key"):
        if isinstance(raw.get("tls"), Mapping) and isinstance(raw["tls"].get(name), str):
            raw["tls"] = {**raw["tls"], name: str(base / raw["tls"][name])}
    if isinstance(raw.get("token_file"), str) and raw["token_file"]:
        raw["token_file"] = str(base / raw["token_file"])
    return {"kind": "inventory", **raw}


def with_inventory(raw_experiment: Any, section: Mapping[str, Any]) -> Any:
    """The experiment's raw mapping with its ``backend`` replaced by the inventory."""
    if not isinstance(raw_experiment, Mapping):
        return raw_experiment  # the parser reports it
    return {**raw_experiment, "backend": dict(section)}
