"""The committed gRPC stubs are exactly what ``protos/generate.py`` makes from the protos."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "node" / "protocol" / "starling"


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.mark.skipif(
    importlib.util.find_spec("grpc_tools") is None,
    reason="grpc_tools is not installed (pip install grpcio-tools==1.85.1) - cannot regenerate",
)
@pytest.mark.e2e
def test_committed_stubs_match_the_protos(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "protos" / "generate.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    fresh, committed = _files(tmp_path / "starling"), _files(COMMITTED)
    assert sorted(fresh) == sorted(committed), "stub files added or removed"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"stale stubs {stale}: run `python protos/generate.py` and commit"


def test_stubs_import_from_inside_the_node_package():
    from starling.node.protocol.starling.v1 import control_pb2, peer_pb2

    assert control_pb2.DESCRIPTOR.package == "starling.v1"
    assert peer_pb2.DESCRIPTOR.services_by_name["Peer"].methods_by_name["Exchange"]
