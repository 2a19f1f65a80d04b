"""A run's output is Starling's own: no library's notice about itself among the summary.

ArviZ prints a FutureWarning about its coming refactor once a day per user cache, so every
run in a fresh container (the compose testbed's orchestrator, whose HOME is new each time)
printed five lines of it amid the results. A fresh cache folder here stands for that."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e


def test_a_run_in_a_fresh_home_prints_no_arviz_notice(tmp_path):
    env = {
        **os.environ,
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "STARLING_HOME": str(tmp_path / "starling"),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "starling.orchestrator.cli",
            "simulate",
            str(ROOT / "examples" / "quickstart.yaml"),
            "--out",
            str(tmp_path / "out"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "ESS bulk" in done.stdout  # the diagnostics ArviZ computes were printed
    said = done.stdout + done.stderr
    assert "ArviZ is undergoing" not in said and "FutureWarning" not in said, said[-2000:]
