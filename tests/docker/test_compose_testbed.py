"""The compose testbed end to end: ``docker compose run --rm --build orchestrator`` with five
node containers
and the orchestrator, then the results on the host; and the same with the mutual-TLS overlay
(``-f compose.tls.yml``), run from a copy of the files in a temporary folder.

The example is the quickstart with each node holding its own shard (``data: {source:
node}``, shards 0..4 of seed 1): the containers must give exactly what ``starling
simulate examples/quickstart.yaml`` gives in-process — the same W2 for every node and for
the average, to 1e-12 (the samples are bit-identical; only float summation order in the
evaluation could differ, and it does not).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.docker.conftest import QUICKSTART_TWINS, assert_quickstart_w2

pytestmark = [pytest.mark.e2e, pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]

NODES = QUICKSTART_TWINS


def _base_image() -> str | None:
    """The offline base when it exists here (no registry in CI), else the file's default."""
    if os.environ.get("STARLING_BASE_IMAGE"):
        return os.environ["STARLING_BASE_IMAGE"]
    found = subprocess.run(
        ["docker", "image", "inspect", "starling-base:bookworm"], capture_output=True
    )
    return "starling-base:bookworm" if found.returncode == 0 else None


def _fetch_wheelhouse() -> None:
    """Offline, the build installs from the wheelhouse docker/wheels/, which lives in the
    checkout: a fresh clone on a machine that has the base fetches it first (on the host,
    which can reach the package index where the build cannot)."""
    if any((ROOT / "docker" / "wheels").glob("*.whl")):
        return
    fetched = subprocess.run(
        ["bash", str(ROOT / "docker" / "wheelhouse.sh")],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert fetched.returncode == 0, fetched.stderr[-4000:]


def test_compose_up_runs_the_quickstart_on_five_containers(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    project = f"starling-test-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "STARLING_RESULTS": str(results)}
    base = _base_image()
    if base:
        _fetch_wheelhouse()
        env["STARLING_BASE_IMAGE"] = base
    compose = [
        "docker",
        "compose",
        "--project-name",
        project,
        "--file",
        str(ROOT / "docker-compose.yml"),
    ]
    try:
        up = subprocess.run(
            [*compose, "run", "--rm", "--build", "orchestrator"],  # the documented command
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-4000:]
    finally:
        subprocess.run(
            [*compose, "down", "--volumes", "--remove-orphans"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            timeout=300,
        )

    parent = results / "compose-quickstart"
    out = (
        parent / "latest"
    ).resolve()  # the run's own new folder (starling.orchestrator.results.folder)
    assert out.parent == parent.resolve(), out
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["backend"] == "inventory"
    assert metrics["samples_per_node"] == dict.fromkeys(NODES, 100)
    assert_quickstart_w2(metrics, tmp_path / "sim")
    # Written as the owner of the results folder, so the host user can read and delete it;
    # a root-owned folder gets files anyone may read and write (docker/entrypoint.sh).
    for path in out.rglob("*"):
        if os.getuid() != 0:
            assert path.stat().st_uid == os.getuid(), path
        else:
            assert path.stat().st_mode & 0o666 == 0o666, path
    for path in sorted(out.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    out.rmdir()
    (parent / "latest").unlink()
    parent.rmdir()


TESTBED_FILES = (
    "docker-compose.yml",
    "compose.tls.yml",
    "examples",
    "docker",
    "node",
    "orchestrator",
    "pyproject.toml",
    "README.md",
)
"""What ``docker compose`` reads from the folder: the compose files, the examples the
orchestrator mounts, and the build context in case an image has to be built."""


def _copy_testbed(where: Path) -> Path:
    where.mkdir()
    for name in TESTBED_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, where / name, ignore=shutil.ignore_patterns("__pycache__", "*.whl", ".venv")
            )
        else:
            shutil.copy2(source, where / name)
    return where


def _mounted_volumes(project: str, service: str, compose: list[str], folder: Path) -> list[str]:
    """The named volumes a container of ``service`` mounts, but its store: read from the
    (stopped) container, or — for the orchestrator, whose ``run --rm`` container is gone —
    from the compose configuration it was created from."""
    labels = [
        "--filter",
        f"label=com.docker.compose.project={project}",
        "--filter",
        f"label=com.docker.compose.service={service}",
    ]
    ids = subprocess.run(["docker", "ps", "-aq", *labels], capture_output=True, text=True)
    if ids.stdout.split():
        (container,) = ids.stdout.split()
        inspected = subprocess.run(
            ["docker", "inspect", "-f", "{{json .Mounts}}", container],
            capture_output=True,
            text=True,
            check=True,
        )
        return [
            m["Name"]
            for m in json.loads(inspected.stdout)
            if m["Type"] == "volume" and m["Destination"] != "/var/lib/starling"
        ]
    config = subprocess.run(
        [*compose, "config", "--format", "json"], cwd=folder, capture_output=True, text=True
    )
    volumes = json.loads(config.stdout)["services"][service].get("volumes", [])
    return [f"{project}_{v['source']}" for v in volumes if v["type"] == "volume"]


def _certs_seen_by(project: str, service: str, compose: list[str], folder: Path) -> set[str]:
    """The files in the volumes a container of ``service`` mounted, but its store."""
    seen: set[str] = set()
    for volume in _mounted_volumes(project, service, compose, folder):
        listed = subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                "-v",
                f"{volume}:/v:ro",
                "--entrypoint",
                "ls",
                "starling-node:latest",
                "-A",
                "/v",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        seen |= set(listed.stdout.split())
    return seen


def test_compose_with_the_tls_overlay_runs_the_quickstart_over_mutual_tls(tmp_path):
    """``docker compose -f docker-compose.yml -f compose.tls.yml run --rm orchestrator`` in a
    fresh copy: the overlay's certs service makes the
    certificates (``starling certs init``), the nodes serve only mutual TLS (no
    ``--insecure``), the orchestrator drives them with its own certificate, and the command
    exits 0 with the quickstart's results in ./results on the host."""
    for image in ("starling-node:latest", "starling-orchestrator:latest"):
        found = subprocess.run(["docker", "image", "inspect", image], capture_output=True)
        if found.returncode != 0:
            pytest.fail(f"no {image} image: build it with docker/build-offline.sh", pytrace=False)
    folder = _copy_testbed(tmp_path / "testbed")
    (folder / "results").mkdir()
    project = f"starling-tls-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STARLING_")}
    compose = [
        "docker",
        "compose",
        "--project-name",
        project,
        "-f",
        "docker-compose.yml",
        "-f",
        "compose.tls.yml",
    ]
    try:
        up = subprocess.run(
            [*compose, "run", "--rm", "orchestrator"],  # the documented command, built already
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        log = up.stdout[-4000:] + up.stderr[-4000:]
        assert up.returncode == 0, log
        logs = subprocess.run(
            [*compose, "logs", "--no-color"], cwd=folder, env=env, capture_output=True, text=True
        )
        said = (logs.stdout + logs.stderr).splitlines()  # the containers' logs, prefixed
        tls_lines = [ln for ln in said if "mutual TLS (cert /certs/" in ln]
        assert len({ln.split("|")[0] for ln in tls_lines}) == len(NODES), log  # every node
        # Each party sees its own key only, and nobody but the certs service the CA's: every
        # node mounted one volume with every key and the CA's, all owned by the nodes' user.
        for who in [*NODES, "orchestrator"]:
            service = "orchestrator" if who == "orchestrator" else f"node-{who}"
            seen = _certs_seen_by(project, service, compose, folder)
            assert seen == {"ca.pem", f"{who}.pem", f"{who}.key"}, (service, seen)
    finally:
        subprocess.run(
            [*compose, "down", "--volumes", "--remove-orphans"],
            cwd=folder,
            env=env,
            capture_output=True,
            timeout=300,
        )
    out = (folder / "results" / "compose-quickstart" / "latest").resolve()
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["backend"] == "inventory" and metrics["status"] == "complete", metrics
    assert metrics["samples_per_node"] == dict.fromkeys(NODES, 100)
    assert_quickstart_w2(metrics, tmp_path / "sim")
    # The run's record names the orchestrator's certificate it reached the nodes with.
    record = json.loads((out / "run.json").read_text())
    # (beside the run's id, which names the run in every Control call)
    assert record["access"]["tls"] == {
        "ca": "/certs/ca.pem",
        "cert": "/certs/orchestrator.pem",
        "key": "/certs/orchestrator.key",
    }
    label = f"label=com.docker.compose.project={project}"
    listed = subprocess.run(
        ["docker", "ps", "-aq", "--filter", label], capture_output=True, text=True
    )
    assert not listed.stdout.split(), "a container of the TLS testbed outlived down"
