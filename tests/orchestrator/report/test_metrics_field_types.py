"""A metrics.json whose fields were edited to another JSON type is refused in one line
naming the file and the field: ``"status": ["x"]`` made ``starling report`` end in a
traceback (AttributeError in html.escape); so did nested fields (``"w2": {"window": "x"}``,
``"faults": {"nodes": [1]}``, ``"account": [1]``), and ``"w2": {"average": "x"}`` was shown
as if it were a figure."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from starling.node.params import ConfigError
from starling.orchestrator.cli.main import main
from starling.orchestrator.report import write_report
from starling.orchestrator.report.loading import read_metrics


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("status", ["x"], "a string"),
        ("experiment", 3, "a string"),
        ("rounds", "ten", "an integer"),
        ("account", {"a": 1}, "a JSON list"),
        ("w2", [1.0], "a JSON object"),
        ("faults", "none", "a JSON object"),
    ],
)
def test_a_field_of_the_wrong_type_is_named(tmp_path, field, value, expected):
    metrics = {"status": "complete", "experiment": "t", "rounds": 3, field: value}
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    message = (
        f"results: {tmp_path / 'metrics.json'}: {field}: expected {expected}, "
        f"got {type(value).__name__}"
    )
    with pytest.raises(ConfigError) as caught:
        write_report(tmp_path)
    assert str(caught.value) == message


def test_null_fields_and_unknown_fields_are_left_alone(tmp_path):
    metrics = {"status": "failed", "w2": None, "something_new": [1]}
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    assert read_metrics(tmp_path) == metrics


RUN = {
    "name": "typed",
    "algorithm": "d-sgld",
    "hyperparameters": {"eta": 0.009},
    "model": {"name": "linear_regression", "params": {"dim": 2}},
    "data": {"source": "synthetic", "size": 20, "seed": 3},
    "topology": {"kind": "ring", "nodes": 4},
    "rounds": 12,
    "chains": 4,
    "seed": 5,
    "faults": [
        {"link": [0, 1], "rounds": [2, 5]},
        {"link": "all", "drop": 0.2, "rounds": [5, 8]},
        {"node": 2, "kill_at_round": 4, "restart_after_rounds": 2},
    ],
}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A results folder as ``starling simulate`` writes it (in-process), with faults."""
    folder = tmp_path_factory.mktemp("typed")
    (folder / "run.yaml").write_text(yaml.safe_dump(RUN))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STARLING_HOME", str(folder / "home"))
        code = main(
            [
                "simulate",
                str(folder / "run.yaml"),
                "--out",
                str(folder / "out"),
                "--quiet",
                "--no-report",
            ]
        )
    assert code == 0
    return folder / "out"


def test_every_nested_field_of_a_written_file_passes(written):
    metrics = read_metrics(written)
    assert metrics["w2"]["per_node"] and metrics["faults"]["scheduled_nodes"] and metrics["links"]


def _set(path: str, value):
    """An edit of ``metrics`` at a dotted ``path`` (``[k]`` for a list item)."""

    def edit(metrics: dict) -> None:
        *parents, last = path.replace("[", ".[").split(".")
        here = metrics
        for part in parents:
            here = here[int(part[1:-1])] if part.startswith("[") else here[part]
        if last.startswith("["):
            here[int(last[1:-1])] = value
        else:
            here[last] = value

    return edit


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("w2.average", "x", "expected a number, got str"),
        ("w2.per_node.1", [0.5], "expected a number, got list"),
        ("w2.per_node", [1], "expected a JSON object, got list"),
        ("w2.window", "x", "expected an integer, got str"),
        ("w2.window", True, "expected an integer, got bool"),
        ("posterior.std[0]", "x", "expected a number, got str"),
        ("samples_per_node.0", "12", "expected an integer, got str"),
        ("links.0->1", [1], "expected a JSON object, got list"),
        ("links.0->1.sent", "x", "expected an integer, got str"),
        ("links.0->1.sent", None, "expected an integer, got null"),
        ("faults.nodes", "x", "expected a JSON list, got str"),
        ("faults.nodes[0]", 1, "expected a JSON object, got int"),
        ("faults.nodes[0].round", "x", "expected an integer, got str"),
        ("faults.scheduled_links[0].rounds", [1, 2, 3], "expected a JSON list of 2, got 3 items"),
        ("faults.scheduled_nodes[0].kill_at_round", None, "expected an integer, got null"),
        ("account[0]", 1, "expected a string, got int"),
        ("program_metrics.0", [1], "expected a JSON object, got list"),
        ("consensus_error", "small", "expected a number, got str"),
        ("predictive", [1], "expected a JSON object, got list"),
    ],
)
def test_a_nested_field_of_the_wrong_type_is_named(
    written, tmp_path, capsys, field, value, expected
):
    folder = tmp_path / "run"
    shutil.copytree(written, folder)
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics.setdefault("program_metrics", {"0": {}})
    metrics.setdefault("predictive", {})
    metrics["faults"]["nodes"] = [{"node": "2", "event": "killed", "round": 4}]  # as `run` writes
    _set(field, value)(metrics)
    (folder / "metrics.json").write_text(json.dumps(metrics))
    assert main(["report", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err == f"starling: results: {folder / 'metrics.json'}: {field}: {expected}\n"
    assert not (folder / "report.html").exists()


def test_a_required_field_of_a_fault_record_is_named_when_missing(written, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(written, folder)
    metrics = json.loads((folder / "metrics.json").read_text())
    del metrics["faults"]["scheduled_nodes"][0]["kill_at_round"]
    (folder / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(ConfigError) as caught:
        read_metrics(folder)
    where = folder / "metrics.json"
    assert (
        str(caught.value) == f"results: {where}: faults.scheduled_nodes[0].kill_at_round: missing"
    )


def _rename_link(metrics: dict) -> None:
    metrics["links"]["ab"] = metrics["links"].pop("0->1")


def _drop_link(metrics: dict) -> None:
    del metrics["faults"]["scheduled_links"][0]["link"]


def _no_senders(metrics: dict) -> None:
    metrics["faults"]["scheduled_links"][1]["senders"] = []


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (_rename_link, "links.ab: expected a key SENDER->RECEIVER"),
        (_set("links.->1", {"sent": 1}), "links.->1: expected a key SENDER->RECEIVER"),
        (_drop_link, "faults.scheduled_links[0].link: missing"),
        (
            _set("faults.scheduled_links[0].link", None),
            "faults.scheduled_links[0].link: expected a JSON list of 2, got null",
        ),
        (
            _no_senders,
            "faults.scheduled_links[1].senders: expected a JSON list of 1 or more, got 0 items",
        ),
        (
            _set("faults.scheduled_links[0].rounds", None),
            "faults.scheduled_links[0].rounds: expected a JSON list of 2, got null",
        ),
        (
            _set("faults.scheduled_links[0].drop", None),
            "faults.scheduled_links[0].drop: expected a number, got null",
        ),
    ],
)
@pytest.mark.parametrize("experiment_file", [True, False])
def test_a_link_the_report_cannot_split_or_draw_is_named(
    written, tmp_path, capsys, edit, expected, experiment_file
):
    """A links key without '->' (drawn from when experiment.yaml is gone), or a scheduled
    link fault with no link (or, for every link out of a node, no sender), ended starling
    report in a traceback (ValueError, KeyError, IndexError)."""
    folder = tmp_path / "run"
    shutil.copytree(written, folder)
    if not experiment_file:
        (folder / "experiment.yaml").unlink()
    metrics = json.loads((folder / "metrics.json").read_text())
    edit(metrics)
    (folder / "metrics.json").write_text(json.dumps(metrics))
    assert main(["report", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err == f"starling: results: {folder / 'metrics.json'}: {expected}\n"
    assert not (folder / "report.html").exists()
