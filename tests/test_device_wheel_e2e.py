"""The device route of docs/deployment/devices.md: ``make wheel`` builds one pure-Python
wheel whose base requirements are the node's alone (the orchestrator's heavy packages only
behind extras), and a fresh venv installs it with ``pip --no-index`` from a wheelhouse,
pulling none of those packages, then serves a node that answers its health check.

The wheelhouse is docker/wheels/ (docker/wheelhouse.sh; CI fetches it in docker/ci-setup.sh),
which holds the orchestrator's wheels too: an install that took them would show it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e

NODE_REQUIREMENTS = {
    "grpcio",
    "grpcio-health-checking",
    "grpcio-reflection",
    "prometheus-client",
    "protobuf",
    "numpy",
    "scipy",
    "pyyaml",
    "pydantic",
    "xxhash",  # the checksum of every stored sample and resume point
}
HEAVY = {
    "matplotlib",
    "pot",
    "arviz",
    "h5netcdf",
    "h5py",
    "xarray",
    "pandas",
    "cryptography",
    "rich",
    "docker",
}
"""What the orchestrator's extras bring and a node never needs."""


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    done = subprocess.run(
        ["make", "--no-print-directory", "wheel"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stdout.splitlines() if line.startswith("wheel: ")]
    assert said, done.stdout  # make wheel says where the wheel is
    path = ROOT / said[-1].removeprefix("wheel: ")
    assert path.name.endswith("-py3-none-any.whl"), path  # one file for every device
    return path


def test_the_wheel_requires_only_what_a_node_needs(wheel):
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        lines = archive.read(metadata).decode().splitlines()
    required = [
        line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")
    ]
    base = {_name(r) for r in required if "extra ==" not in r}
    behind_extras = {_name(r) for r in required if "extra ==" in r}
    assert base == NODE_REQUIREMENTS
    assert not base & HEAVY
    assert {"matplotlib", "pot", "arviz", "cryptography", "docker"} <= behind_extras


def test_a_fresh_venv_installs_it_with_no_index_and_serves_a_node(wheel, tmp_path):
    wheels = ROOT / "docker" / "wheels"
    if not any(wheels.glob("*.whl")):
        message = "no wheelhouse in docker/wheels (docker/wheelhouse.sh fetches it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    venv = tmp_path / "device"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    installed = subprocess.run(
        [*pip, "install", "--no-index", "--find-links", str(wheels), str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    listed = subprocess.run(
        [*pip, "list", "--format", "freeze"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    names = {_name(line) for line in listed.stdout.splitlines()}
    assert not names & HEAVY, names & HEAVY
    assert NODE_REQUIREMENTS <= names
    starling = str(venv / "bin" / "starling")
    node = subprocess.Popen(
        [
            starling,
            "node",
            "serve",
            "--id",
            "a",
            "--listen",
            "127.0.0.1:0",
            "--store",
            str(tmp_path / "store"),
            "--shard",
            "0",
            "--data-size",
            "20",
            "--data-seed",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        address = ""
        deadline = time.monotonic() + 60  # a cold interpreter on a loaded machine
        while not address and time.monotonic() < deadline:
            line = node.stdout.readline() if node.stdout else ""
            found = re.search(r"127\.0\.0\.1:(\d+)", line)
            address = found.group(0) if found else ""
        assert address, "the node never said where it listens"
        health = subprocess.run(
            [starling, "node", "health", address], capture_output=True, text=True, timeout=60
        )
        assert health.returncode == 0 and "serving" in health.stdout, health
    finally:
        node.terminate()
        node.wait(timeout=30)
        if node.stdout is not None:
            node.stdout.close()
