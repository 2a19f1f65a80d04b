"""A node process running the quickstart's model loads only what that model needs.

Issue 15 (node RSS <= 64 MB): pydantic (7 MB of a node's memory when it checked parameters)
is the orchestrator's alone, and scipy belongs to the models that need it, not to the linear
regression. Checked on real node processes of the local backend, configured, run and still
alive: a shared library that was imported is mapped in ``/proc/PID/maps``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/maps"),
]


def _quickstart(nodes: int, rounds: int):
    from starling.orchestrator.config.experiment import parse_experiment

    raw = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    raw["topology"]["nodes"] = nodes
    raw["rounds"] = rounds
    return parse_experiment(raw, default_name=raw["name"])


def test_a_quickstart_node_maps_no_pydantic_and_no_scipy(tmp_path):
    from starling.orchestrator.execution.backends.local import LocalBackend
    from starling.orchestrator.execution.client import NodeClient
    from starling.orchestrator.planning.node_specs import node_specs

    experiment = _quickstart(nodes=2, rounds=5)
    with LocalBackend("127.0.0.1", 0, tmp_path, ready_timeout=120.0) as backend:
        addresses = backend.start(list(experiment.node_ids))
        clients = {node: NodeClient(address) for node, address in addresses.items()}
        try:
            for client in clients.values():
                client.wait_ready(timeout=120.0)
            specs = {s.node_id: s for s in node_specs(experiment, addresses)}
            for node, client in clients.items():
                client.configure(specs[node], fresh=True)
            for client in clients.values():
                client.start()
            deadline = time.monotonic() + 120.0
            while {c.status().state for c in clients.values()} != {"done"}:
                assert "failed" not in {c.status().state for c in clients.values()}
                assert time.monotonic() < deadline, "the nodes did not finish in 120 s"
                time.sleep(0.05)
            for node, pid in backend.pids().items():
                maps = Path(f"/proc/{pid}/maps").read_text()
                assert "_multiarray_umath" in maps, "the check reads the node's own maps"
                assert "pydantic" not in maps, f"node {node} loaded pydantic"
                assert "/scipy/" not in maps, f"node {node} loaded scipy"
        finally:
            for client in clients.values():
                client.close()


def test_starling_node_serve_loads_what_python_m_starling_node_does(tmp_path):
    """The systemd unit of a device runs ``starling node serve``: the orchestrator's command
    used to import its live-run module (and through it most of the orchestrator) before it
    dispatched to the node, 12 MB more resident and 0.5 s more start-up than ``python -m
    starling.node``. A serving node started that way maps no pydantic and no scipy."""
    import subprocess

    starling = Path(sys.executable).with_name("starling")
    proc = subprocess.Popen(
        [
            str(starling),
            "node",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--id",
            "a",
            "--state-dir",
            str(tmp_path / "state"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "serving on" in line:
                break
        maps = Path(f"/proc/{proc.pid}/maps").read_text()
        assert "_multiarray_umath" in maps, "the check reads the node's own maps"
        assert "pydantic" not in maps and "/scipy/" not in maps
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
