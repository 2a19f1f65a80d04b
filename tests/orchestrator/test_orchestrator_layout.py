"""How the orchestrator is put together: ``simulate`` needs no network stack, the orchestrator
never opens a node's store, and backends are chosen through one registry."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from starling.node.params import ConfigError
from starling.orchestrator.backends import backend_factory, backend_kinds, make_backend
from starling.orchestrator.backends.base import Backend
from starling.orchestrator.experiment import parse_experiment

ROOT = Path(__file__).resolve().parents[2]
ORCHESTRATOR = ROOT / "orchestrator"


@pytest.mark.e2e
def test_simulate_runs_without_importing_grpc(tmp_path):
    """``starling simulate`` end to end in a fresh interpreter; grpc is never imported."""
    script = (
        "import sys\n"
        "from starling.orchestrator.cli import main\n"
        f"code = main(['simulate', 'examples/quickstart.yaml', '--out', {str(tmp_path)!r}])\n"
        "assert code == 0, code\n"
        "loaded = sorted(m for m in sys.modules if m == 'grpc' or m.startswith('grpc.'))\n"
        "print('GRPC', loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "GRPC []" in done.stdout, done.stdout
    assert (tmp_path / "metrics.json").is_file()


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_orchestrator_module_reads_node_files_directly():
    """Nodes are reached over gRPC only: no import of the node's store or state layout."""
    forbidden = (
        "starling.node.runtime.store",
        "starling.node.runtime.archive",
        "starling.node.runtime.checkpoint",
    )
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            name for name in _imports(path) if name.startswith(forbidden)
        )
        for path in ORCHESTRATOR.rglob("*.py")
    }
    assert not {k: v for k, v in offenders.items() if v}


def _experiment(kind: str):
    return parse_experiment(
        {
            "name": "registry",
            "algorithm": "d-sgld",
            "hyperparameters": {"eta": 0.01},
            "model": {"name": "linear_regression", "params": {"dim": 2}},
            "topology": {"kind": "ring", "nodes": 3},
            "rounds": 2,
            "backend": {"kind": kind, "base_port": 7000},
        }
    )


def test_every_backend_module_names_a_backend_of_its_kind():
    for kind in backend_kinds():
        factory = backend_factory(kind)
        assert factory.__self__.kind == kind  # type: ignore[attr-defined]
        assert isinstance(factory.__self__, type)  # type: ignore[attr-defined]


def test_backend_kind_goes_through_the_registry(tmp_path):
    assert "local" in backend_kinds()
    backend = make_backend(_experiment("local"), tmp_path)
    assert isinstance(backend, Backend)
    assert backend.kind == "local"
    assert backend.base_port == 7000 and backend.workdir == tmp_path
    assert backend.addresses() == {}


def test_an_unknown_backend_kind_is_named(tmp_path):
    # The parser refuses such a file; a kind it allows but nobody registered ends the same.
    experiment = _experiment("local")
    backend = experiment.backend.model_copy(update={"kind": "carrier-pigeon"})
    strange = dataclasses.replace(experiment, backend=backend)
    with pytest.raises(ConfigError, match=r"^backend\.kind: unknown backend 'carrier-pigeon'"):
        make_backend(strange, tmp_path)
