"""Shared fixtures: run the real ``starling`` command as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
        [sys.executable, "-m", "orchestrator.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
