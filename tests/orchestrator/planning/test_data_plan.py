"""Each node's data from the experiment (orchestrator/planning/data_plan.py): per-node overrides,
heterogeneous sizes, and a centralised baseline that pools exactly the decentralised shards."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from starling.node.data.shards import load_shard
from starling.node.models import build_model
from starling.node.params import ConfigError
from starling.node.protocol.convert import config_to_spec, spec_to_config
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.evaluation.evaluate import reference_data
from starling.orchestrator.planning.data_plan import data_specs
from starling.orchestrator.planning.node_specs import node_specs
from starling.orchestrator.planning.plan import plan_run

MODEL = {"name": "logistic_regression", "params": {"features": 2}}


def _experiment(**fields):
    raw = {
        "algorithm": "d-ula",
        "hyperparameters": {"a": 0.01, "b": 0.1},
        "model": MODEL,
        "data": {"source": "synthetic", "size": 30, "seed": 4},
        "topology": {"kind": "ring", "nodes": 4},
        "rounds": 2,
        **fields,
    }
    return parse_experiment(raw)


def _rows(experiment) -> dict[str, np.ndarray]:
    model = build_model(experiment.model)
    return {n: load_shard(d, model).X for n, d in data_specs(experiment).items()}


def _file(tmp_path: Path, rows: int = 97) -> str:
    path = tmp_path / "rows.csv"
    # Feature 0 is the row's index, so a shard's rows are read off its first column.
    path.write_text("".join(f"{k},{k % 5},{k % 2}\n" for k in range(rows)))
    return str(path)


def _ids(table: np.ndarray) -> list[int]:
    return sorted(table[:, 0].astype(int).tolist())


def test_per_node_sizes_and_shards_for_synthetic_data():
    experiment = _experiment(
        nodes=[
            {"id": "a", "data": {"size": 5}},
            {"id": "b"},
            {"id": "c", "data": {"size": 70, "shard": 3}},
            {"id": "d", "data": {"shard": 2}},
        ]
    )
    plan = data_specs(experiment)
    assert {n: (d.shard, d.size) for n, d in plan.items()} == {
        "a": (0, 5),
        "b": (1, 30),
        "c": (3, 70),
        "d": (2, 30),
    }
    assert {n: len(x) for n, x in _rows(experiment).items()} == {"a": 5, "b": 30, "c": 70, "d": 30}
    with pytest.raises(ConfigError, match=r"^nodes\[1\]\.data\.shard: shard 0 is already node 'a'"):
        plan_run(
            _experiment(
                nodes=[{"id": "a"}, {"id": "b", "data": {"shard": 0}}], topology={"kind": "path"}
            )
        )
    with pytest.raises(ConfigError, match=r"^data\.sizes: 3 sizes for 4 shards"):
        plan_run(_experiment(data={"size": 3, "sizes": [1, 2, 3]}))


def test_default_plan_is_what_nodes_were_always_told():
    specs = node_specs(_experiment())
    assert [(s.data.shard, s.data.num_shards, s.data.size, s.data.sizes) for s in specs] == [
        (k, 4, 30, ()) for k in range(4)
    ]


@pytest.mark.parametrize("source", ["synthetic", "file"])
def test_centralised_baseline_pools_exactly_the_decentralised_shards(tmp_path, source):
    data = {"source": source, "seed": 9, "sizes": [7, 20, 3, 11]}
    if source == "file":
        data.update(path=_file(tmp_path), partition="random")
    decentralised = _experiment(data=data)
    centralised = parse_experiment(
        {
            "algorithm": "ula",
            "hyperparameters": {"eta": 0.01},
            "model": MODEL,
            "data": {**data, "shards": 4},
            "topology": {"kind": "none", "nodes": 1},
            "rounds": 2,
        }
    )
    shards = _rows(decentralised)
    (pooled,) = _rows(centralised).values()
    assert np.array_equal(pooled, np.concatenate([shards[n] for n in "0123"]))
    assert len(pooled) == 41
    # And the reference posterior of either is computed from those same rows.
    model = build_model(decentralised.model)
    ref_d = np.concatenate([t.X for t in reference_data(plan_run(decentralised).evaluation, model)])
    ref_c = np.concatenate([t.X for t in reference_data(plan_run(centralised).evaluation, model)])
    assert np.array_equal(ref_d, ref_c) and np.array_equal(ref_c, pooled)


def test_file_partition_with_own_files_and_sizes(tmp_path):
    own = tmp_path / "own.csv"
    own.write_text("1000,1,1\n1001,2,0\n")
    experiment = _experiment(
        data={"source": "file", "path": _file(tmp_path), "partition": "random", "seed": 2},
        nodes=[
            {"id": "a", "data": {"size": 10}},
            {"id": "b"},
            {"id": "c", "data": {"path": str(own)}},
        ],
        topology={"kind": "ring"},
    )
    rows = _rows(experiment)
    assert len(rows["a"]) == 10 and len(rows["b"]) == 48  # the rest's even share: 97 // 2
    assert _ids(rows["c"]) == [1000, 1001]
    assert not set(_ids(rows["a"])) & set(_ids(rows["b"]))


def test_the_plan_crosses_the_wire_unchanged(tmp_path):
    experiment = parse_experiment(
        {
            "algorithm": "ula",
            "hyperparameters": {"eta": 0.01},
            "model": MODEL,
            "data": {
                "source": "file",
                "path": _file(tmp_path),
                "partition": "random",
                "sizes": [3, 4, 5],
                "shards": 3,
            },
            "topology": {"kind": "none", "nodes": 1},
            "rounds": 2,
        }
    )
    (spec,) = node_specs(experiment)
    assert spec.data.shards == (0, 1, 2) and spec.data.sizes == (3, 4, 5)
    assert config_to_spec(spec_to_config(spec)).data == spec.data


def test_bad_pools_are_refused_naming_the_field():
    with pytest.raises(ConfigError, match=r"^data\.shards: 5 shards for 4 data nodes"):
        plan_run(_experiment(data={"shards": 5}))


def test_one_synthetic_data_set_dealt_to_any_number_of_nodes():
    """``data.total``: the same points whether 1, 5 or 10 nodes share them ([004] §5.1)."""
    data = {"source": "synthetic", "total": 100, "partition": "random", "seed": 8}
    gmm = {"name": "gaussian_mixture"}
    rows = {}
    for n in (5, 10):
        experiment = _experiment(model=gmm, data=data, topology={"kind": "ring", "nodes": n})
        shards = _rows(experiment)
        assert [len(s) for s in shards.values()] == [100 // n] * n
        rows[n] = np.sort(np.concatenate(list(shards.values())), axis=0)
    single = parse_experiment(
        {
            "algorithm": "ula",
            "model": gmm,
            "data": data,
            "topology": {"kind": "none", "nodes": 1},
            "rounds": 2,
        }
    )
    rows[1] = np.sort(np.concatenate(list(_rows(single).values())), axis=0)
    assert np.array_equal(rows[1], rows[5]) and np.array_equal(rows[5], rows[10])
    assert len(np.unique(rows[1])) == 100


@pytest.mark.parametrize("partition", ["interleaved", "random"])
def test_held_out_rows_are_in_no_shard(tmp_path, partition):
    """A seeded test split (evaluation.test.split) and any partition: the orchestrator's
    test rows and the nodes' shards are disjoint and together the whole file."""
    from starling.orchestrator.evaluation.heldout import held_out_data

    experiment = _experiment(
        data={"source": "file", "path": _file(tmp_path, 200), "partition": partition, "seed": 6},
        evaluation={"test": {"split": 0.2, "seed": 3}},
    )
    shards = [set(_ids(x)) for x in _rows(experiment).values()]
    test, described = held_out_data(plan_run(experiment).evaluation, build_model(experiment.model))
    held = set(_ids(test.X))
    assert len(held) == 40 and described["rows"] == 40
    assert all(not (s & held) for s in shards)
    assert set().union(*shards) | held == set(range(200))
    assert sum(len(s) for s in shards) == 160  # disjoint shards
    # Heterogeneous sizes draw only from the training rows too.
    sized = _experiment(
        data={
            "source": "file",
            "path": _file(tmp_path, 200),
            "partition": "random",
            "seed": 6,
            "sizes": [100, 30, 20, 10],
        },
        evaluation={"test": {"split": 0.2, "seed": 3}},
    )
    rows = [set(_ids(x)) for x in _rows(sized).values()]
    assert [len(r) for r in rows] == [100, 30, 20, 10]
    assert not set().union(*rows) & held


@pytest.mark.e2e
def test_real_nodes_hold_the_planned_rows(tmp_path, starling_home):
    """Over gRPC each node loads exactly its planned rows: a run with a random partition,
    heterogeneous sizes and a node's own file gives the samples ``simulate`` gives."""
    from starling.node.engine import simulate
    from starling.orchestrator.execution.runner import run_experiment

    (tmp_path / "own").mkdir()
    own = tmp_path / "own" / "c.csv"
    own.write_text("".join(f"{k},{k % 3},{k % 2}\n" for k in range(1000, 1030)))
    experiment = _experiment(
        algorithm="d-sgld",
        hyperparameters={"eta": 0.001},
        data={
            "source": "file",
            "path": _file(tmp_path),
            "partition": "random",
            "seed": 4,
            "sizes": [40, 7],
        },
        nodes=[{"id": "a"}, {"id": "b"}, {"id": "c", "data": {"path": str(own)}}],
        topology={"kind": "ring"},
        rounds=3,
        chains=2,
        round_deadline=10.0,
    )
    run_experiment(plan_run(experiment), tmp_path / "run", say=lambda _m: None)
    expected = simulate(node_specs(experiment))
    for node, values in expected.items():
        with np.load(tmp_path / "run" / "samples" / f"node-{node}.npz") as data:
            assert data["samples"].tobytes() == values.tobytes(), node


@pytest.mark.parametrize("partition", ["interleaved", "random"])
def test_a_synthetic_total_too_small_for_the_nodes_is_refused(partition):
    # Found by trying total: 2 on 4 nodes: two nodes silently held no data at all, where a
    # file of too few rows is refused.
    data = {"source": "synthetic", "total": 3, "partition": partition, "seed": 8}
    with pytest.raises(ConfigError, match=r"^data\.total: 3 points, too few for 4 nodes"):
        data_specs(_experiment(data=data))
    data_specs(_experiment(data={**data, "total": 4}))
