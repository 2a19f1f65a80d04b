"""The shipped monitoring files agree with the testbed: deploy/prometheus.yml is a valid
Prometheus configuration (``promtool check config``) that scrapes every node of the
compose testbed on its metrics port and the orchestrator on its own, the ports the
compose files pass to ``--metrics``."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from starling.orchestrator.deploy.testbed import METRICS_PORT, ORCHESTRATOR_METRICS_PORT
from tests.conftest import ROOT
from tests.operating import need

pytestmark = pytest.mark.e2e  # runs promtool


def test_scrape_config_is_valid_and_covers_the_testbed():
    config = ROOT / "deploy" / "prometheus.yml"
    done = subprocess.run(
        [need("promtool"), "check", "config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    jobs = {job["job_name"]: job for job in yaml.safe_load(config.read_text())["scrape_configs"]}
    targets = {
        name: [t for group in job["static_configs"] for t in group["targets"]]
        for name, job in jobs.items()
    }
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    nodes = sorted(s for s in compose if s.startswith("node-"))
    assert targets["starling-nodes"] == [f"{s}:{METRICS_PORT}" for s in nodes]
    assert targets["starling-orchestrator"] == [f"orchestrator:{ORCHESTRATOR_METRICS_PORT}"]
    for service in nodes:
        command = compose[service]["command"]
        assert command[command.index("--metrics") + 1] == f"0.0.0.0:{METRICS_PORT}"
    command = compose["orchestrator"]["command"]
    assert command[command.index("--metrics") + 1] == f"0.0.0.0:{ORCHESTRATOR_METRICS_PORT}"
    tls = yaml.safe_load((ROOT / "compose.tls.yml").read_text())["services"]
    for service in nodes:
        assert f"0.0.0.0:{METRICS_PORT}" in tls[service]["command"]
