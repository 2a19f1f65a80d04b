"""The catalogue of algorithms is discovered, and what each algorithm declares holds.

A new sampler is one module in ``node/samplers`` (plus its test): the catalogue must equal
what the modules of that folder declare, read straight from the files, and a module dropped
into a package is found without an edit anywhere else.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import numpy as np
import pytest

import starling.node.samplers
from starling.node.assemble import build_program, node_rng
from starling.node.samplers import ALGORITHMS
from starling.node.samplers.dsgld import DSGLD, DSGLDParams
from starling.node.samplers.registry import AlgorithmInfo, discover
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.planning.node_specs import node_specs
from starling.orchestrator.topology import hub_role

FOLDER = Path(starling.node.samplers.__file__).parent


def test_the_catalogue_is_every_module_s_algorithms():
    declared: dict[str, AlgorithmInfo] = {}
    modules_with_algorithms = set()
    for path in sorted(FOLDER.glob("*.py")):
        if path.stem == "__init__":
            continue
        module = importlib.import_module(f"starling.node.samplers.{path.stem}")
        for info in getattr(module, "ALGORITHMS", ()):
            assert info.name not in declared, info.name
            declared[info.name] = info
            modules_with_algorithms.add(path.stem)
    assert declared == ALGORITHMS
    assert list(ALGORITHMS) == sorted(ALGORITHMS)
    assert len(modules_with_algorithms) >= 8  # every paper's sampler, not an empty scan


TOY = """
from starling.node.samplers.dsgld import DSGLD, DSGLDParams
from starling.node.samplers.registry import AlgorithmInfo

ALGORITHMS = (
    AlgorithmInfo(name="toy", summary="", source="", graph="undirected",
                  params=DSGLDParams, programs={"peer": DSGLD}),
)
"""


def test_a_new_module_is_found_without_an_edit_elsewhere(tmp_path, monkeypatch):
    package = tmp_path / "toy_samplers"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("VALUE = 1\n")  # a module without ALGORITHMS
    (package / "toy.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    found = discover("toy_samplers")
    assert list(found) == ["toy"]
    assert found["toy"].programs == {"peer": DSGLD}
    (package / "twin.py").write_text(TOY)
    with pytest.raises(RuntimeError, match="'toy' is registered twice"):
        discover("toy_samplers")


def test_star_algorithms_declare_their_hub_and_the_topology_reads_it():
    for info in ALGORITHMS.values():
        if info.graph == "star":
            assert info.hub_role in info.roles, info.name
            assert info.hub_role not in info.data_roles, info.name
        else:
            assert info.hub_role is None, info.name
        assert hub_role(info) == info.hub_role
    # The role's name plays no part: a hub called anything is the hub.
    odd = AlgorithmInfo(
        name="odd",
        summary="",
        source="",
        graph="star",
        params=DSGLDParams,
        programs={"leaf": DSGLD, "middle": DSGLD},
        hub_role="middle",
    )
    assert hub_role(odd) == "middle"


def test_batching_is_declared_exactly_where_the_params_carry_a_batch_size():
    for info in ALGORITHMS.values():
        fields = {f.name for f in dataclasses.fields(info.params)}
        assert info.batching == ("batch_size" in fields), info.name
    with pytest.raises(ValueError, match="batching needs a batch_size"):
        AlgorithmInfo(
            name="bad",
            summary="",
            source="",
            graph="none",
            params=type("P", (), {"__dataclass_fields__": {}}),
            batching=True,
        )
    with pytest.raises(ValueError, match="hub_role 'boss' is not one of its roles"):
        AlgorithmInfo(
            name="bad",
            summary="",
            source="",
            graph="star",
            params=DSGLDParams,
            programs={"peer": DSGLD},
            hub_role="boss",
        )


def _specs(algorithm: str):
    topology = {
        "undirected": {"kind": "ring", "nodes": 3},
        "directed": {"kind": "directed_ring", "nodes": 3},
        "star": {"kind": "star", "nodes": 3},
        "none": {"kind": "none", "nodes": 1},
    }[ALGORITHMS[algorithm].graph]
    experiment = parse_experiment(
        {
            "name": f"state-{algorithm}",
            "algorithm": algorithm,
            "model": {"name": "linear_regression", "params": {"dim": 2}},
            "data": {"source": "synthetic", "size": 12, "seed": 4},
            "topology": topology,
            "rounds": 3,
            "chains": 2,
            "seed": 5,
        }
    )
    return node_specs(experiment)


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_program_checkpoints_its_typed_state_by_value(algorithm):
    for spec in _specs(algorithm):
        program = build_program(spec, node_rng(spec))
        state = program.state()
        assert tuple(state) == type(program.current)._fields
        fresh = build_program(spec, np.random.default_rng(99))  # different initial draws
        fresh.restore(state)
        assert type(fresh.current) is type(program.current)
        for restored, saved in zip(fresh.current, program.current, strict=True):
            np.testing.assert_array_equal(restored, saved)
            assert restored is not saved  # a copy: the checkpoint cannot alias the run
        first = type(program.current)._fields[0]
        partial = {k: v for k, v in state.items() if k != first}
        with pytest.raises(KeyError, match=f"no '{first}'"):
            fresh.restore(partial)
