"""How the orchestrator is put together: ``simulate`` needs no network stack, the orchestrator
never opens a node's store, and backends are chosen through one registry of kinds, each asked
what it can do rather than compared by name."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from starling.node.params import ConfigError
from starling.orchestrator.config.backends import BACKENDS, backend_settings
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.execution.backends import backend_class, make_backend
from starling.orchestrator.execution.backends.base import Backend
from starling.orchestrator.planning.plan import plan_run

ROOT = Path(__file__).resolve().parents[2]
ORCHESTRATOR = ROOT / "orchestrator"


@pytest.mark.e2e
def test_simulate_runs_without_importing_grpc(tmp_path):
    """``starling simulate`` end to end in a fresh interpreter; grpc is never imported."""
    script = (
        "import sys\n"
        "from starling.orchestrator.cli.main import main\n"
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


def test_every_kind_has_a_backend_of_that_kind_with_its_settings_model():
    for kind, model in BACKENDS.items():
        cls = backend_class(kind)
        assert issubclass(cls, Backend) and cls.kind == kind
        assert cls.settings_model is model
        assert cls.settings_model.capabilities is model.capabilities


def test_every_backend_module_is_a_kind():
    """A module in execution/backends/ that is not a kind is a support module, named here."""
    support = {"base", "netfault"}
    modules = {p.stem for p in (ORCHESTRATOR / "execution" / "backends").glob("*.py")}
    assert modules - {"__init__"} - support == set(BACKENDS)


def test_backend_kind_goes_through_the_registry(tmp_path):
    experiment = _experiment("local")
    backend = make_backend(experiment.backend, tmp_path, plan_run(experiment))
    assert isinstance(backend, Backend)
    assert backend.kind == "local" and backend.capabilities.local_stores
    assert backend.base_port == 7000 and backend.workdir == tmp_path
    assert backend.addresses() == {}


def test_an_unknown_backend_kind_is_named():
    with pytest.raises(ConfigError, match=r"^backend\.kind: unknown backend 'carrier-pigeon'"):
        backend_settings({"kind": "carrier-pigeon"})
    with pytest.raises(ConfigError, match=r"^backend\.kind: unknown backend 'carrier-pigeon'"):
        backend_class("carrier-pigeon")


def test_a_field_of_another_kind_is_refused_naming_its_kind():
    with pytest.raises(ConfigError, match=r"^backend\.image: only read by backend kind docker"):
        backend_settings({"kind": "local", "image": "x"})


def test_no_module_compares_a_backend_kind_by_name():
    """What a backend can do is asked of its capabilities (config/backends.py), never decided
    by comparing ``kind`` with a name; the kinds' own modules and the registry may name them."""
    allowed = {ORCHESTRATOR / "config" / "backends.py"}
    offenders = []
    for path in ORCHESTRATOR.rglob("*.py"):
        if path in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                text = ast.unparse(node)
                if "kind" in text and any(f"'{k}'" in text for k in BACKENDS):
                    offenders.append(f"{path.relative_to(ROOT)}: {text}")
    assert not offenders, offenders
