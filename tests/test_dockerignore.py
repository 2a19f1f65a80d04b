"""The docker build context: what the images copy gets in, key material and everything else
stays out (``.dockerignore``). Read with the rules Docker applies (moby's patternmatcher):
each line a pattern over the path relative to the context, ``*`` within one path element,
``**`` across any number of them, a matching directory taking its contents with it, a ``!``
line letting back in what an earlier one left out, the last matching line deciding."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _rules() -> list[tuple[bool, re.Pattern[str]]]:
    rules = []
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keep = line.startswith("!")
        pattern = line[1:] if keep else line
        regex = ""
        k = 0
        while k < len(pattern):
            if pattern.startswith("**/", k):
                regex += "(?:.*/)?"
                k += 3
            elif pattern.startswith("**", k):
                regex += ".*"
                k += 2
            elif pattern[k] == "*":
                regex += "[^/]*"
                k += 1
            elif pattern[k] == "?":
                regex += "[^/]"
                k += 1
            else:
                regex += re.escape(pattern[k])
                k += 1
        rules.append((keep, re.compile(regex + "$")))
    return rules


def excluded(path: str) -> bool:
    """Whether Docker leaves ``path`` (relative, with /) out of the build context."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: k + 1]) for k in range(len(parts))]
    out = False
    for keep, pattern in _rules():
        if any(pattern.match(prefix) for prefix in prefixes):
            out = not keep
    return out


@pytest.mark.parametrize(
    "path",
    [
        "pyproject.toml",
        "setup.py",
        "README.md",
        "node/runtime/server.py",
        "node/protocol/starling/v1/control_pb2.py",
        "orchestrator/deploy/certs.py",
        "examples/quickstart.yaml",
        "docker/install.sh",
        "docker/node.yaml",
        "docker/entrypoint.sh",
        "docker/wheels/grpcio-1.85.3-cp311-cp311-manylinux_2_17_x86_64.whl",
    ],
)
def test_what_the_images_copy_is_in_the_context(path):
    assert not excluded(path), path


@pytest.mark.parametrize(
    "path",
    [
        "certs/ca.key",
        "certs/ca.pem",
        "node/certs/a.pem",
        "examples/certs/orchestrator.key",
        "examples/a.key",
        "docker/tls/node.pem",
        "orchestrator/ca.crt",
        "certs/backup-20260101T000000Z/a.key",
        "examples/backup-20260101T000000Z/crl.pem",
        "examples/token",
        "docker/master.token",
        "node/a.token",
        "results/quickstart/latest/metrics.json",
        ".venv/bin/python",
        ".git/config",
        "tests/node/test_trust.py",
        "benchmarks/results.json",
        "deploy/starling-node.service",
        "build/typecheck/x",
        "node/__pycache__/cli.cpython-311.pyc",
        "starling_mcmc.egg-info/PKG-INFO",
        ".env",
    ],
)
def test_key_material_and_what_no_image_needs_stay_out(path):
    assert excluded(path), path
