"""Docker tests: marked ``docker``; skipped (one line) where no engine answers, except
under ``CI=true``, where a missing engine, compose plugin or image is a failure — CI sets
them up (docker/ci-setup.sh) and must not pass by skipping."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from starling.orchestrator.config.experiment import load_experiment
from starling.orchestrator.execution.simulation import simulate_experiment
from starling.orchestrator.planning.plan import plan_run
from tests.conftest import ROOT, run_cli

QUICKSTART_TWINS = {"a": "0", "b": "1", "c": "2", "d": "3", "e": "4"}
"""Testbed node -> the quickstart's node holding the same shard (shards 0..4 of seed 1)."""


def _problem() -> str | None:
    """Why Docker tests cannot run here, or None."""
    if shutil.which("docker") is None:
        return "no docker command"
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    if info.returncode != 0:
        return "no Docker engine answers (start dockerd, or run docker/ci-setup.sh)"
    compose = subprocess.run(
        ["docker", "compose", "version"], capture_output=True, text=True, timeout=60
    )
    if compose.returncode != 0:
        return "no docker compose plugin (docker/ci-setup.sh installs one)"
    return None


@pytest.fixture(scope="session")
def docker_engine() -> None:
    problem = _problem()
    if problem is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {problem}", pytrace=False)
    pytest.skip(problem)


def assert_quickstart_w2(metrics: dict, workdir) -> None:
    """A testbed run of the quickstart gave exactly what ``starling simulate
    examples/quickstart.yaml`` gives in-process: the same W2 for every node and for the
    average, to 1e-12 (the samples are bit-identical; only float summation order in the
    evaluation could differ, and it does not)."""
    reference = simulate_experiment(
        plan_run(load_experiment(ROOT / "examples" / "quickstart.yaml")), workdir, quiet=True
    )
    assert metrics["w2"]["average"] == pytest.approx(reference["w2"]["average"], abs=1e-12)
    for node, twin in QUICKSTART_TWINS.items():
        assert metrics["w2"]["per_node"][node] == pytest.approx(
            reference["w2"]["per_node"][twin], abs=1e-12
        ), node


def generate_long_run(tmp_path: Path, name: str, rounds: int, out: Path, *target: str) -> None:
    """``starling deploy generate *target`` of the compose quickstart renamed ``name`` with
    ``rounds`` rounds (long enough to fault it mid-run), written to ``out``."""
    experiment = yaml.safe_load((ROOT / "examples" / "compose-quickstart.yaml").read_text())
    experiment.update(name=name, rounds=rounds)
    source = tmp_path / f"{name}.yaml"
    source.write_text(yaml.safe_dump(experiment))
    made = run_cli("deploy", "generate", *target, "--experiment", str(source), "--out", str(out))
    assert made.returncode == 0, made.stderr


def nft_tables(container: str) -> str:
    """The nft tables in a container's network namespace, as the helper image lists them."""
    listed = subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            f"container:{container}",
            "--cap-add",
            "NET_ADMIN",
            "starling-netfault:latest",
            "nft",
            "list",
            "tables",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return listed.stdout
