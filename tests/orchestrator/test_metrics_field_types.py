"""A metrics.json whose fields were edited to another JSON type is refused in one line
naming the file and the field: ``"status": ["x"]`` made ``starling report`` end in a
traceback (AttributeError in html.escape)."""

from __future__ import annotations

import json

import pytest

from starling.node.params import ConfigError
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
