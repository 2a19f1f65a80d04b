"""No secret in any log, in either format: a token run and a mutual-TLS run of real node
processes (DEBUG level, one node in text, two in JSON) driven by ``starling run`` (JSON
and text), then every byte they wrote — node logs, the orchestrator's stdout and stderr,
the results folder — is searched for the token, the private keys' PEM bodies and anything
shaped like the run's peer secret (43 URL-safe characters, ``secrets.token_urlsafe(32)``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from starling.node.tokens import NODE_TOKEN_PREFIX, node_token
from starling.orchestrator.deploy.certs import init_certs
from tests.conftest import run_cli
from tests.node.test_runtime_harness import Cluster

pytestmark = pytest.mark.e2e

NODES = ("a", "b", "c")
PEER_SECRET_SHAPE = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])")


def _experiment() -> dict:
    return {
        "name": "secretive",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.01},
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "data": {"source": "node"},
        "nodes": [{"id": n} for n in NODES],
        "topology": {"kind": "ring"},
        "rounds": 20,
        "chains": 2,
        "seed": 2,
        "round_deadline": 5.0,
    }


EMBEDDED_IMAGE = re.compile(r"base64,[A-Za-z0-9+/=]+")
"""A figure embedded in report.html: base64 of PNG bytes, whose runs between ``+`` and ``/``
can have a secret's shape by chance (it is not text anyone wrote)."""


def _written(*roots: Path) -> str:
    """Every file under ``roots``, as text (embedded images left out)."""
    texts = []
    for root in roots:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        texts += [p.read_bytes().decode("utf-8", errors="replace") for p in files]
    return EMBEDDED_IMAGE.sub("base64,<image>", "\n".join(texts))


def _run(tmp_path: Path, home: Path, name: str, access: dict, flags) -> str:
    """Three nodes started with ``flags(node)``, one run over them; all they wrote."""
    work = tmp_path / name
    work.mkdir()
    with Cluster(work) as cluster:
        procs = {
            node: cluster.launch(
                node,
                extra=[
                    "--id",
                    node,
                    "--shard",
                    str(k),
                    "--data-seed",
                    "5",
                    "--data-size",
                    "20",
                    "--log-level",
                    "DEBUG",
                    "--log-format",
                    "text" if node == "a" else "json",
                    *flags(node),
                ],
            )
            for k, node in enumerate(NODES)
        }
        addresses = {n: cluster.ready(p).address for n, p in procs.items()}
        inventory = work / "nodes.yaml"
        inventory.write_text(yaml.safe_dump({"nodes": addresses, **access}))
        experiment = work / "exp.yaml"
        experiment.write_text(yaml.safe_dump(_experiment()))
        said = []
        for fmt in ("json", "text"):
            out = work / f"out-{fmt}"
            done = run_cli(
                "run",
                str(experiment),
                "--inventory",
                str(inventory),
                "--out",
                str(out),
                "--log-format",
                fmt,
                env_home=home,
                timeout=300,
            )
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
            said.append(done.stdout + done.stderr)
            status = run_cli("status", "--format", "json", env_home=home, timeout=60)
            said.append(status.stdout + status.stderr)
    logs = "\n".join(proc.log() for proc in cluster.procs)
    assert "configured secretive/" in logs and '"event": "configured"' in logs
    return logs + "\n".join(said) + _written(work / "out-json", work / "out-text")


def _pem_bodies(folder: Path) -> list[str]:
    """The base64 lines of every private key in ``folder``."""
    return [
        line
        for key in sorted(folder.glob("*.key"))
        for line in key.read_text().splitlines()
        if line and not line.startswith("-----")
    ]


def test_no_token_key_or_peer_secret_in_any_log(tmp_path, starling_home):
    master_file = tmp_path / "master.token"
    master = "starling-test-master-7c1e9b2a4d6f"
    master_file.write_text(master + "\n")
    master_file.chmod(0o600)
    for node in NODES:
        (tmp_path / f"{node}.token").write_text(node_token(master, node) + "\n")
        (tmp_path / f"{node}.token").chmod(0o600)
    written = _run(
        tmp_path,
        starling_home,
        "token",
        {"token_file": str(master_file)},
        lambda node: ["--token-file", str(tmp_path / f"{node}.token")],
    )
    assert master not in written
    for node in NODES:
        assert node_token(master, node) not in written
        assert node_token(master, node)[len(NODE_TOKEN_PREFIX) :] not in written
    assert not PEER_SECRET_SHAPE.findall(written)

    certs = tmp_path / "certs"
    init_certs(certs, NODES)
    mine = {k: str(certs / f"orchestrator.{e}") for k, e in (("cert", "pem"), ("key", "key"))}
    written = _run(
        tmp_path,
        starling_home,
        "tls",
        {"tls": {"ca": str(certs / "ca.pem"), **mine}},
        lambda node: [
            "--tls-ca",
            str(certs / "ca.pem"),
            "--tls-cert",
            str(certs / f"{node}.pem"),
            "--tls-key",
            str(certs / f"{node}.key"),
        ],
    )
    bodies = _pem_bodies(certs)
    assert len(bodies) >= 4 * 3  # four keys, several lines each
    leaked = [line for line in bodies if line in written]
    assert not leaked, f"{len(leaked)} lines of private keys in the logs"
    assert "PRIVATE KEY" not in written
    assert not PEER_SECRET_SHAPE.findall(written)
