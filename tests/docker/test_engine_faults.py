"""``starling nodes ... --compose PROJECT`` and ``starling links ... --kernel --compose
PROJECT`` on a generated compose testbed in the middle of a run: pause and unpause freeze
and thaw the container, kill leaves it down until restart (then it resumes from its volume),
disconnect and reconnect take it off its network and back, a kernel cut puts a table in the
receiver's namespace and restore removes it, and the run still completes with every node's
every sample. (The same commands with ``--swarm`` are tested in test_swarm_stack.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import pytest

from tests.conftest import ROOT, run_cli
from tests.docker.conftest import generate_long_run, nft_tables

pytestmark = [pytest.mark.e2e, pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]

ROUNDS = 1000


def _docker(*args: str) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"docker {' '.join(args)}: {done.stderr.strip()}"
    return done.stdout.strip()


def _container(project: str, service: str) -> str:
    (found,) = _docker(
        "ps",
        "-aq",
        "--filter",
        f"label=com.docker.compose.project={project}",
        "--filter",
        f"label=com.docker.compose.service={service}",
    ).split()
    return found


def _logs(container: str) -> str:
    done = subprocess.run(["docker", "logs", container], capture_output=True, text=True)
    return done.stdout + done.stderr


def _status(container: str) -> str:
    return _docker("inspect", "-f", "{{.State.Status}}", container)


def test_node_and_kernel_faults_through_the_engine_on_a_compose_project(tmp_path):
    for image in (
        "starling-node:latest",
        "starling-orchestrator:latest",
        "starling-netfault:latest",
    ):
        if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode:
            pytest.fail(f"no {image} image: build it with docker/build-offline.sh", pytrace=False)
    compose_file = tmp_path / "compose.yml"
    generate_long_run(tmp_path, "compose-faults", ROUNDS, compose_file)
    results = tmp_path / "results"
    results.mkdir()
    project = f"starling-faults-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "STARLING_RESULTS": str(results)}
    compose = [
        "docker",
        "compose",
        "--project-name",
        project,
        "--project-directory",
        str(ROOT),
        "-f",
        str(compose_file),
    ]

    def starling(*words: str):
        return run_cli(*words, "--compose", project, timeout=120)

    try:
        up = subprocess.run(
            [*compose, "up", "--detach", "--wait", *[f"node-{n}" for n in "abcde"]],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert up.returncode == 0, up.stderr[-3000:]
        started = subprocess.run(
            [*compose, "up", "--detach", "--no-deps", "orchestrator"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert started.returncode == 0, started.stderr[-3000:]
        orchestrator = _container(project, "orchestrator")
        # Faults once the rounds run: a node lost while being configured fails the run.
        deadline = time.monotonic() + 300
        while "\nrounds " not in "\n" + _logs(orchestrator):
            assert time.monotonic() < deadline, _logs(orchestrator)
            time.sleep(1)

        c = _container(project, "node-c")
        assert starling("nodes", "pause", "c").returncode == 0
        assert _status(c) == "paused"
        assert starling("nodes", "unpause", "c").returncode == 0
        assert _status(c) == "running"

        b = _container(project, "node-b")
        assert starling("links", "cut", "a", "b", "--kernel").returncode == 0
        assert "starling_from_a" in nft_tables(b)
        assert starling("links", "restore", "a", "b", "--kernel").returncode == 0
        assert "starling_from_a" not in nft_tables(b)

        done = starling("nodes", "kill", "d")
        assert done.returncode == 0 and "stays down" in done.stdout, done
        time.sleep(2)
        assert _status(_container(project, "node-d")) == "exited"
        assert starling("nodes", "restart", "d").returncode == 0
        assert _status(_container(project, "node-d")) == "running"

        assert starling("nodes", "disconnect", "e").returncode == 0
        assert starling("nodes", "reconnect", "e").returncode == 0
        # Back under the names its peers dial (the engine's reconnect gives none of them).
        networks = subprocess.run(
            [
                "docker",
                "inspect",
                _container(project, "node-e"),
                "--format",
                "{{json .NetworkSettings.Networks}}",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (aliases,) = [v.get("Aliases") or [] for v in json.loads(networks).values()]
        assert "node-e" in aliases, aliases

        waited = subprocess.run(
            ["docker", "wait", orchestrator], capture_output=True, text=True, timeout=900
        )
        assert waited.stdout.strip() == "0", _logs(orchestrator)[-4000:]
    finally:
        subprocess.run([*compose, "down", "--volumes"], env=env, capture_output=True, timeout=300)
    out = results / "compose-faults" / "latest"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "complete", (out / "summary.txt").read_text()
    assert metrics["samples_per_node"] == dict.fromkeys("abcde", ROUNDS)
