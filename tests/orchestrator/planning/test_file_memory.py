"""``limits.node_memory`` holds for file data too, checked before any node starts.

A shard of a file was sized only once a node read it, so a run whose chains × dim × rows
could never fit started every node and failed in them. Now the orchestrator reads the files
of the data plan (as its evaluation does), counts each node's rows as the node will deal
them out, and refuses the run in one line naming the bound and the figures, as it does for
synthetic data. The runs are the real command line, in-process, on real files.
"""

from __future__ import annotations

import pytest
import yaml

from starling.node.params import ConfigError
from starling.orchestrator.cli.main import main
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.planning.memory import check_file_data

ROWS = 1000


def _csv(tmp_path, name="rows.csv", rows=ROWS):
    path = tmp_path / name
    path.write_text("".join(f"{k % 7},{k % 3},{k % 2}\n" for k in range(rows)))
    return str(path)


def _raw(data, **fields):
    return {
        "name": "filemem",
        "algorithm": "d-ula",
        "hyperparameters": {"a": 0.01, "b": 0.1},
        "model": {"name": "logistic_regression", "params": {"features": 2}},
        "data": data,
        "topology": {"kind": "ring", "nodes": 4},
        "rounds": 3,
        "chains": 100,
        **fields,
    }


def _refused(tmp_path, capsys, raw, command="run") -> str:
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(raw))
    out = tmp_path / "out"
    assert main([command, str(path), "--out", str(out), "--quiet"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert not out.exists(), "refused before anything started"
    return lines[0]


@pytest.mark.parametrize("command", ["run", "simulate"])
def test_a_file_shard_over_the_node_memory_bound_is_refused_before_any_node_starts(
    tmp_path, capsys, starling_home, command
):
    # 1000 rows over 4 nodes: 250 each; 100 chains × 2 × 250 × 8 bytes = 400,000 bytes.
    raw = _raw({"source": "file", "path": _csv(tmp_path)}, limits={"node_memory": "300KiB"})
    line = _refused(tmp_path, capsys, raw, command)
    assert line.startswith("starling: chains × dim × rows of data.path: 100 × 2 × 250 "), line
    assert "would take 390.6 KiB per node, over limits.node_memory (300.0 KiB)" in line, line
    assert "node 0 holds 250 rows of" in line and "rows.csv" in line, line


def test_the_node_holding_the_most_rows_decides(tmp_path, capsys, starling_home):
    data = {
        "source": "file",
        "path": _csv(tmp_path),
        "partition": "random",
        "sizes": [100, 100, 700, 100],
    }
    line = _refused(tmp_path, capsys, _raw(data, limits={"node_memory": "1MiB"}))
    assert "100 × 2 × 700 " in line and "node 2 holds 700 rows" in line, line


def test_a_held_out_split_and_a_pooled_baseline_count_the_rows_the_nodes_hold(tmp_path):
    file = {"source": "file", "path": _csv(tmp_path)}
    split = _raw(
        file, evaluation={"test": {"split": 0.2, "seed": 1}}, limits={"node_memory": "1MiB"}
    )
    check_file_data(parse_experiment(split))  # 800 training rows, 200 each: 320,000 bytes
    with pytest.raises(ConfigError, match=r"× 200 float64s would take 312\.5 KiB"):
        check_file_data(parse_experiment({**split, "limits": {"node_memory": "300KiB"}}))
    pooled = _raw(
        {**file, "shards": 4},
        algorithm="ula",
        hyperparameters={"eta": 0.01},
        topology={"kind": "none", "nodes": 1},
        limits={"node_memory": "1MiB"},
    )
    with pytest.raises(ConfigError, match=r"100 × 2 × 1000 float64s .*node 0 holds 1000 rows"):
        check_file_data(parse_experiment(pooled))


def test_a_node_s_own_file_is_named_by_its_field_and_one_elsewhere_is_left_to_it(tmp_path):
    own = _csv(tmp_path, "own.csv", rows=5000)
    nodes = [{"id": "a"}, {"id": "b", "data": {"path": own}}, {"id": "c"}]
    raw = _raw(
        {"source": "file", "path": _csv(tmp_path)},
        nodes=nodes,
        topology={"kind": "path"},
        limits={"node_memory": "4MiB"},
    )
    with pytest.raises(
        ConfigError,
        match=r"^chains × dim × rows of nodes\[1\]\.data\.path: "
        r"100 × 2 × 5000 float64s",
    ):
        check_file_data(parse_experiment(raw))
    # A node's own file that is not on this machine (an inventory node's): the node sizes it.
    nodes[1] = {"id": "b", "data": {"path": "/on/the/node/only.csv"}}
    check_file_data(parse_experiment({**raw, "nodes": nodes}))


def test_a_shipped_data_set_is_sized_too(tmp_path, capsys, starling_home):
    # a9a: 32,561 rows over 4 nodes, 8,141 at most; 123 features.
    raw = _raw(
        {"source": "file", "path": "builtin:a9a"},
        chains=300,
        model={"name": "logistic_regression", "params": {"features": 123}},
    )
    line = _refused(tmp_path, capsys, raw, "simulate")
    assert "chains × dim × rows of data.path: 300 × 123 × 8141 float64s" in line, line
    assert "over limits.node_memory (2.0 GiB)" in line, line


def test_every_run_of_a_study_is_sized_before_the_first_starts(tmp_path, capsys, starling_home):
    study = {
        "study": "s",
        "base": _raw({"source": "file", "path": _csv(tmp_path)}, chains=10),
        "variants": [
            {"label": "small"},
            {"label": "big", "chains": 100, "limits": {"node_memory": "300KiB"}},
        ],
    }
    line = _refused(tmp_path, capsys, study, "simulate")
    assert line.startswith("starling: cell 'all', variant 'big': chains × dim × rows"), line
