"""Exit codes tell the truth, through the real ``starling`` command, in both engines.

0 a complete run; 1 a node failed (its round loop raised); 2 a usage or configuration error;
3 a node diverged (its values left the floats); 130 interrupted (``test_run_interrupt.py``).
The account names the node, the round and the cause.

The failure: push-sum with ``b: 1.0e-200`` and ``gamma: 2.0`` passes the parser (both are
positive and finite), but its step ``a / (b + t)^gamma`` divides by a ``b^gamma`` that
underflowed to 0, and the node raises ZeroDivisionError in round 0. (It was ``rho:
1.0e+308`` until D-ADMMS refused a ρ that large with the experiment.) The divergence:
D-SGLD with ``eta: 1000`` overshoots by a factor of ~1000 per round, past 1e150 by round ~45.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from starling.orchestrator.cli.run import (
    EXIT_DIVERGED,
    EXIT_FAILED,
    EXIT_NODE_DOWN,
    EXIT_NOT_CONVERGED,
    exit_code,
)
from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.e2e


def _experiment(tmp_path: Path, name: str, **fields) -> Path:
    raw = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    raw.update(name=name, rounds=60, chains=10, **fields)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.mark.parametrize("command", ["simulate", "run"])
def test_a_failed_node_exits_1_and_the_account_names_node_round_and_cause(
    command, tmp_path, starling_home
):
    # A program that raises in its first round (the module docstring says how).
    path = _experiment(
        tmp_path,
        "fails",
        algorithm="push-sum",
        hyperparameters={"b": 1.0e-200, "gamma": 2.0},
        topology={"kind": "directed_ring", "nodes": 5},
    )
    out = tmp_path / "out"
    done = run_cli(command, str(path), "--out", str(out), env_home=starling_home, timeout=300)
    assert done.returncode == EXIT_FAILED, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("starling: node ") and "ZeroDivisionError" in last, last
    assert last.endswith("exit 1"), last
    metrics = json.loads((out / "metrics.json").read_text())
    failed = [e for e in metrics["faults"]["nodes"] if e["event"] == "failed"]
    assert failed, metrics["faults"]
    for event in failed:
        assert event["round"] == 0 and "ZeroDivisionError" in event["error"], event
    line = next(line for line in metrics["account"] if "failed" in line)
    assert f"node {failed[0]['node']}: failed: round 0: ZeroDivisionError" in line, line


@pytest.mark.parametrize("command", ["simulate", "run"])
def test_a_diverged_run_exits_3_naming_node_and_round(command, tmp_path, starling_home):
    path = _experiment(tmp_path, "explodes", algorithm="d-sgld", hyperparameters={"eta": 1000})
    out = tmp_path / "out"
    done = run_cli(command, str(path), "--out", str(out), env_home=starling_home, timeout=300)
    assert done.returncode == EXIT_DIVERGED, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    diverged = metrics["diverged"]
    assert sorted(diverged) == ["0", "1", "2", "3", "4"]
    # Detected from the values: every sample before the first diverged round is a float
    # below 1e150 and the one at it is not (evaluation.diverged_rounds), not from links.
    for node, first in diverged.items():
        assert 0 < first < 60
        assert f"node {node}: diverged at round {first}: its samples ran away" in " ".join(
            metrics["account"]
        )
    assert done.stderr.strip().splitlines()[-1].endswith("; exit 3")


def test_exit_codes_rank_interrupted_then_failed_then_diverged_then_node_down(capsys):
    failed = {"faults": {"nodes": [{"node": "1", "event": "failed", "error": "round 4: E"}]}}
    diverged = {"diverged": {"2": 7}}
    down = {"down_at_end": {"nodes": ["3"], "line": "node 3 down at the end"}}
    assert exit_code({}) == 0
    assert exit_code(down) == EXIT_NODE_DOWN
    assert exit_code({**diverged, **down}) == 3
    assert exit_code(diverged) == 3
    assert exit_code({**failed, **diverged}) == 1
    assert exit_code({**failed, **diverged, "interrupted": True}) == 130
    assert "node 1 failed (round 4: E)" in capsys.readouterr().err


def test_not_converged_exits_4_only_with_strict_and_after_a_node_down(capsys):
    # The verdict is a judgement of the samples; a node down at the end is a fact about the
    # run's machines, so it keeps its own code 5 under --strict too.
    drifted = {"verdict": {"run": "not converged", "reasons": ["node 0: R-hat 2.9 > 1.1"]}}
    down = {"down_at_end": {"nodes": ["3"], "line": "node 3 down at the end"}}
    assert exit_code(drifted) == 0
    assert exit_code(drifted, strict=True) == EXIT_NOT_CONVERGED == 4
    assert exit_code({**drifted, **down}, strict=True) == EXIT_NODE_DOWN == 5
    assert exit_code({"verdict": {"run": "converged"}}, strict=True) == 0
    assert "the run did not converge (node 0: R-hat 2.9 > 1.1); exit 4" in capsys.readouterr().err
