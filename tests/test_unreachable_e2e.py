"""A node that answers no health check because of its certificates is named with the reason
(:mod:`starling.node.unreachable`), not as if it were down: ``starling run --inventory`` and
``starling node health`` against a real mutual-TLS node, with a CA of another testbed, the
node listed under other ids (an inventory listing one address twice), no TLS at all, and a
port nothing listens on. Each is one line on stderr, with none of gRPC's own log lines."""

from __future__ import annotations

import pytest
import yaml

from starling.orchestrator.deploy.certs import init_certs
from tests.conftest import run_cli
from tests.node.test_runtime_harness import Cluster
from tests.test_inventory_e2e import cluster_free_port

pytestmark = pytest.mark.e2e

NODES = ("a", "b", "c")


def _files(folder, who: str) -> dict[str, str]:
    return {
        "ca": str(folder / "ca.pem"),
        "cert": str(folder / f"{who}.pem"),
        "key": str(folder / f"{who}.key"),
    }


def _flags(folder, who: str) -> list[str]:
    files = _files(folder, who)
    return ["--tls-ca", files["ca"], "--tls-cert", files["cert"], "--tls-key", files["key"]]


def _experiment(path) -> str:
    path.write_text(
        yaml.safe_dump(
            {
                "name": "unreachable",
                "algorithm": "d-sgld",
                "hyperparameters": {"eta": 0.01},
                "model": {"name": "linear_regression", "params": {"dim": 2}},
                "data": {"source": "node"},
                "nodes": [{"id": n} for n in NODES],
                "topology": {"kind": "ring"},
                "rounds": 5,
                "chains": 2,
                "seed": 2,
            }
        )
    )
    return str(path)


def _run(tmp_path, home, name: str, nodes: dict, tls: dict | None) -> str:
    """``starling run`` on this inventory; its one stderr line (asserted one, exit 2)."""
    inventory = {"nodes": nodes, "ready_timeout": 2, **({"tls": tls} if tls else {})}
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(inventory))
    done = run_cli(
        "run",
        _experiment(tmp_path / "exp.yaml"),
        "--inventory",
        str(tmp_path / f"{name}.yaml"),
        "--out",
        str(tmp_path / f"out-{name}"),
        env_home=home,
        timeout=120,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, (name, done.stderr)
    return lines[0]


def test_a_node_unreachable_for_its_certificates_is_named_with_the_reason(tmp_path, starling_home):
    certs, stranger = tmp_path / "certs", tmp_path / "other-ca"
    init_certs(certs, NODES)
    init_certs(stranger, NODES)  # the same names under another CA: another testbed's files
    with Cluster(tmp_path) as cluster:
        a, b, c = (
            cluster.ready(cluster.launch(n, extra=["--id", n, *_flags(certs, n)])) for n in NODES
        )
        with cluster_free_port() as nowhere:
            pass

        line = _run(
            tmp_path,
            starling_home,
            "other-ca",
            {"a": a.address, "b": b.address, "c": c.address},
            _files(stranger, "orchestrator"),
        )
        assert (
            f"a at {a.address} (unavailable: TLS: the node's certificate is not signed by "
            "the CA given (tls.ca))" in line
        ), line
        assert "one CA for every party" in line and "is it running" not in line, line

        # Addresses swapped (a copied line, say): the certificate there names the other node.
        line = _run(
            tmp_path,
            starling_home,
            "swapped",
            {"a": b.address, "b": a.address, "c": nowhere},
            _files(certs, "orchestrator"),
        )
        assert line.startswith("starling: inventory: no healthy node after 2 s: a at "), line
        assert "its TLS certificate does not name node 'a'" in line, line
        assert "its TLS certificate does not name node 'b'" in line, line
        assert f"c at {nowhere} (unavailable: connection refused" in line, line
        assert line.endswith("is it running (starling node serve) and reachable?"), line

        line = _run(
            tmp_path, starling_home, "plain", {"a": a.address, "b": b.address, "c": c.address}, None
        )
        assert "does it want TLS" in line and "the nodes want TLS" in line, line

        # The same from `starling node health`, as docs/deployment/devices.md checks a device.
        checked = run_cli(
            "node", "health", a.address, "--id", "a", *_flags(stranger, "orchestrator"), timeout=60
        )
        assert checked.returncode == 1
        assert checked.stderr.strip() == (
            f"starling-node: {a.address}: unavailable: TLS: the node's certificate is not "
            "signed by the CA given (tls.ca)"
        ), checked.stderr
        checked = run_cli(
            "node", "health", a.address, "--id", "b", *_flags(certs, "orchestrator"), timeout=60
        )
        assert checked.returncode == 1
        assert "its TLS certificate does not name node 'b'" in checked.stderr, checked.stderr
        assert a.process.poll() is None, a.log()
