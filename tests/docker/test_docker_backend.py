"""The docker backend end to end: ``starling run`` with ``backend: {kind: docker}`` creates a
network and one container per node from ``starling-node:latest``, carries out a scheduled
kill (SIGKILL to the container) and restart (the same container on its volume), and removes
everything it labelled when the run ends.

What must hold: the run exits 0, every node that stayed up stored every round's sample, the
killed node resumed from its checkpoint and finished too, ``metrics.json`` records the kill
and the restart, and afterwards no container, network or volume labelled ``starling.run``
of this run remains.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.e2e, pytest.mark.usefixtures("docker_engine")]

ROUNDS = 30
NODES = 4


def _labelled(kind: str) -> list[str]:
    listed = subprocess.run(
        ["docker", kind, "ls", "-q", "--filter", "label=starling.run"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return listed.stdout.split()


def _image_present(image: str) -> None:
    found = subprocess.run(["docker", "image", "inspect", image], capture_output=True)
    if found.returncode != 0:
        pytest.fail(f"no {image} image: build it with docker/build-offline.sh", pytrace=False)


def test_docker_backend_kills_and_restarts_a_container_and_cleans_up(tmp_path):
    _image_present("starling-node:latest")
    before = {kind: set(_labelled(kind)) for kind in ("container", "network", "volume")}
    raw = {
        "name": "docker-kill",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.01},
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "data": {"source": "synthetic", "size": 20, "seed": 5},
        "topology": {"kind": "ring", "nodes": NODES},
        "rounds": ROUNDS,
        "chains": 2,
        "seed": 11,
        "round_deadline": 1.0,
        "checkpoint_every": 1,
        "faults": [{"node": "2", "kill_at_round": 10, "restart_after_rounds": 3}],
        "backend": {"kind": "docker", "image": "starling-node:latest", "ready_timeout": 90},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "run", str(path), "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["backend"] == "docker" or metrics.get("backend", {}).get("kind") == "docker"
    for node in ("0", "1", "3"):
        assert metrics["samples_per_node"][node] == ROUNDS, metrics["samples_per_node"]
    assert metrics["samples_per_node"]["2"] == ROUNDS  # resumed from its checkpoint
    events = [e["event"] for e in metrics["faults"]["nodes"] if e["node"] == "2"]
    assert "killed" in events and "restarted" in events, metrics["faults"]["nodes"]
    for kind in ("container", "network", "volume"):
        assert set(_labelled(kind)) <= before[kind], f"a labelled {kind} outlived the run"
