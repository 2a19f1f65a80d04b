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
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from tests.conftest import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.e2e, pytest.mark.usefixtures("docker_engine")]

ROUNDS = 30
NODES = 4


def _labelled(kind: str) -> list[str]:
    listed = subprocess.run(
        ["docker", kind, "ls", "-q", *(["-a"] if kind == "container" else []),
         "--filter", "label=starling.run"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return listed.stdout.split()


def _image_present(image: str) -> None:
    found = subprocess.run(["docker", "image", "inspect", image], capture_output=True)
    if found.returncode != 0:
        pytest.fail(f"no {image} image: build it with docker/build-offline.sh", pytrace=False)


def test_docker_backend_kill_pause_disconnect_and_cut_then_nothing_left(tmp_path):
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
        "kernel_faults": [
            {"pause": "1", "at_round": 4, "for_rounds": 3},
            {"cut": ["0", "3"], "at_round": 15, "for_rounds": 4},
            {"disconnect": "3", "at_round": 24, "for_rounds": 2},
        ],
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
    kernel = {f["kind"]: f for f in metrics["faults"]["kernel"]}
    assert set(kernel) == {"pause", "cut", "disconnect"}, metrics["faults"]["kernel"]
    assert all(f["started"] for f in kernel.values())
    # Paused, node 1 sent nothing: its neighbours went on without some of its messages.
    paused = kernel["pause"]["links"]
    assert paused["1->0"]["missing"] + paused["1->2"]["missing"] > 0, paused
    # The packet filter took out node 0's messages to node 3 (lost or resent late), and
    # only those: 3's messages to 0 travel on 3's own connection.
    cut = kernel["cut"]["links"]["0->3"]
    assert cut["missing"] + cut["late"] > 0, cut
    # Off the network, node 3 neither sent to nor heard from its ring neighbours.
    off = kernel["disconnect"]["links"]
    assert sum(link["missing"] + link["late"] for link in off.values()) > 0, off
    for kind in ("container", "network", "volume"):
        assert set(_labelled(kind)) <= before[kind], f"a labelled {kind} outlived the run"


def test_delay_needs_netem_or_says_why(tmp_path):
    """Delay is ``tc netem``: where the kernel has it the run delays the link; where it
    does not (this machine), the run refuses with one line naming the reason, and this
    test skips with that line."""
    _image_present("starling-node:latest")
    raw = {
        "name": "docker-delay",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.01},
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "data": {"source": "synthetic", "size": 20, "seed": 5},
        "topology": {"kind": "ring", "nodes": 3},
        "rounds": 10,
        "chains": 2,
        "round_deadline": 1.0,
        "kernel_faults": [{"delay": ["0", "1"], "ms": 50, "at_round": 2, "for_rounds": 2}],
        "backend": {"kind": "docker", "ready_timeout": 90},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    run = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "run", str(path), "--out",
         str(tmp_path / "out")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "Traceback" not in run.stderr, run.stderr
    assert not _labelled("container"), "a refused run left containers behind"
    if run.returncode != 0:
        lines = [ln for ln in run.stderr.splitlines() if "netem" in ln]
        assert len(lines) == 1, run.stderr
        pytest.skip(lines[0])
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert [f["kind"] for f in metrics["faults"]["kernel"]] == ["delay"]


def test_cleanup_removes_what_a_crashed_run_left(tmp_path):
    """A run killed outright leaves its labelled objects; ``starling docker cleanup --run``
    removes exactly those."""
    run_id = f"test-crashed-{tmp_path.name[-8:]}"
    label = f"starling.run={run_id}"
    subprocess.run(["docker", "network", "create", "--label", label, f"starling-{run_id}"],
                   check=True, capture_output=True)  # fmt: skip
    subprocess.run(["docker", "volume", "create", "--label", label, f"starling-{run_id}-a"],
                   check=True, capture_output=True)  # fmt: skip
    subprocess.run(["docker", "create", "--label", label, "--name", f"starling-{run_id}-a",
                    "starling-node:latest"], check=True, capture_output=True)  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "docker", "cleanup", "--run", run_id,
         "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    removed = json.loads(done.stdout)
    assert removed == {
        "containers": [f"starling-{run_id}-a"],
        "networks": [f"starling-{run_id}"],
        "volumes": [f"starling-{run_id}-a"],
    }
    for kind in ("container", "network", "volume"):
        listed = subprocess.run(["docker", kind, "ls", "-aq" if kind == "container" else "-q",
                                 "--filter", f"label={label}"],
                                capture_output=True, text=True, check=True)  # fmt: skip
        assert not listed.stdout.split(), f"{kind} of {run_id} still there"


def test_ctrl_c_mid_run_removes_everything_and_live_pause_works(tmp_path):
    """``starling nodes pause/unpause`` act on a running docker run's container (and are
    recorded), and SIGINT mid-run still removes every labelled container, network, volume."""
    _image_present("starling-node:latest")
    before = {kind: set(_labelled(kind)) for kind in ("container", "network", "volume")}
    raw = {
        "name": "docker-interrupt",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.01},
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "data": {"source": "synthetic", "size": 20, "seed": 5},
        "topology": {"kind": "ring", "nodes": 3},
        "rounds": 100000,
        "chains": 2,
        "round_deadline": 1.0,
        "backend": {"kind": "docker", "ready_timeout": 90},
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    out = tmp_path / "out"
    env = {**os.environ, "STARLING_HOME": str(tmp_path / "home")}
    run = subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "run", str(path), "--out", str(out)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (out / "run.json").exists():
            assert run.poll() is None, run.communicate()
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.1)
        for action in ("pause", "unpause"):
            done = subprocess.run(
                [sys.executable, "-m", "orchestrator.cli", "nodes", action, "1", "--run",
                 str(out)],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert f"node 1: {action} done" in done.stdout
        run.send_signal(signal.SIGINT)
        stdout, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert "Traceback" not in stderr, stderr
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["interrupted"] is True
    live = [(f["kind"], f["node"]) for f in metrics["faults"]["kernel"] if f.get("live")]
    assert live == [("pause", "1"), ("unpause", "1")], metrics["faults"]["kernel"]
    for kind in ("container", "network", "volume"):
        assert set(_labelled(kind)) <= before[kind], f"a labelled {kind} outlived Ctrl-C"
