"""Ctrl-C during ``starling run`` stops every node process and keeps what was sampled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import yaml

from starling.orchestrator.execution.client import NodeClient
from tests.conftest import ROOT
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e


def test_ctrl_c_leaves_no_process_and_writes_partial_results(tmp_path, starling_home):
    config = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    # A long run, so that the interrupt lands mid-way.
    config.update(name="interrupted", rounds=100000, chains=2)
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(config))
    out = tmp_path / "out"
    env = {**os.environ, "STARLING_HOME": str(starling_home)}
    orchestrator = subprocess.Popen(
        [sys.executable, "-m", "starling.orchestrator.cli", "run", str(path), "--out", str(out)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: (out / "run.json").exists(), 60, "the run to start")
        addresses = json.loads((out / "run.json").read_text())["addresses"]
        clients = [NodeClient(address, timeout=5) for address in addresses.values()]
        # Interrupt mid-way: once every node has stored a few rounds.
        wait_until(lambda: all(c.status().round >= 3 for c in clients), 60, "some rounds")
        orchestrator.send_signal(signal.SIGINT)
        stdout, stderr = orchestrator.communicate(timeout=60)
    finally:
        if orchestrator.poll() is None:
            orchestrator.kill()
    assert orchestrator.returncode == 130, stderr
    assert "Traceback" not in stderr
    record = json.loads((out / "run.json").read_text())
    for pid in record["pids"].values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["interrupted"] is True
    assert metrics["status"] == "interrupted"
    summary = (out / "summary.txt").read_text().splitlines()
    assert next(line for line in summary if line.startswith("status: ")) == "status: interrupted"
    assert json.loads((out / "manifest.json").read_text())["status"] == "interrupted"
    with np.load(out / "samples" / "node-0.npz") as data:
        kept = data["samples"].shape[0]
    assert 0 < kept < 100000
