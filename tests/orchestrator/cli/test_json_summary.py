"""``--log-format json``: the summary at the end of a run is an object whose fields are its
figures (status, W2 per node, the links' counters, the account's lines), not the text
table as one string a program would have to parse back."""

from __future__ import annotations

import json
import logging

import pytest
import yaml

from starling.orchestrator.cli.main import main
from starling.orchestrator.core import output
from tests.conftest import ROOT


@pytest.fixture
def process_output(monkeypatch):
    """``--log-format json`` sets this process's output and root log handler for good (a
    command runs once per process); put both back for the tests after this one."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    monkeypatch.setattr(output, "_format", ["text"])
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_the_json_summary_carries_the_figures_as_fields(
    tmp_path, capsys, starling_home, process_output
):
    raw = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({**raw, "rounds": 8, "chains": 4}))
    out = tmp_path / "out"
    argv = ["simulate", str(path), "--out", str(out), "--log-format", "json", "--no-report"]
    assert main(argv) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    summary = next(line for line in lines if line["event"] == "summary")
    metrics = json.loads((out / "metrics.json").read_text())
    figures = summary["figures"]
    assert figures["status"] == "complete" and figures["rounds"] == 8
    assert figures["w2"]["per_node"] == metrics["w2"]["per_node"]
    assert figures["samples_per_node"] == {str(n): 8 for n in range(5)}
    assert figures["account"] == metrics["account"]
    assert "\n" not in summary["message"]  # not the table
