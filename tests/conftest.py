"""Shared fixtures: run the real ``starling`` command as a subprocess; keep process
starts to tests marked ``e2e``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.process_guard import forbid_processes

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _processes_only_in_e2e(request):
    """A test that starts a process must be marked e2e (see tests/process_guard.py)."""
    if request.node.get_closest_marker("e2e") is not None:
        yield
        return
    with forbid_processes(request.node.nodeid):
        yield


@pytest.fixture
def starling_home(tmp_path, monkeypatch):
    """A private registry of running experiments, so tests never see each other's runs."""
    home = tmp_path / "starling-home"
    monkeypatch.setenv("STARLING_HOME", str(home))
    return home


def run_cli(*args: str, env_home: Path | None = None, timeout: float = 600, cwd: Path = ROOT):
    """``starling ARGS`` in a fresh interpreter; returns the CompletedProcess."""
    env = dict(os.environ)
    if env_home is not None:
        env["STARLING_HOME"] = str(env_home)
    return subprocess.run(
        [sys.executable, "-m", "starling.orchestrator.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
