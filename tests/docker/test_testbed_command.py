"""``make testbed`` (docker/testbed.sh) when the base image cannot be pulled: it stops before
any build, with the offline route (docker/build-offline.sh, STARLING_BASE_IMAGE) as its
last lines, instead of a build failing on a registry error deep in its output."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]


def test_an_unpullable_base_gets_the_offline_route_at_once():
    # A name no registry holds, nor this engine: the pull fails with or without a registry.
    env = {**os.environ, "STARLING_BASE_IMAGE": "starling-test/no-such-base:never"}
    done = subprocess.run(
        ["make", "--no-print-directory", "testbed"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    said = done.stderr.splitlines()
    assert "testbed: cannot pull starling-test/no-such-base:never" in done.stderr, done.stderr
    route = [line for line in said if line.startswith("testbed:")][-3:]
    assert "docker/build-offline.sh" in route[1]
    assert route[2].endswith("STARLING_BASE_IMAGE=starling-base:bookworm make testbed")
    assert "docker compose" not in done.stdout + done.stderr  # nothing was built or started
