"""SIGTERM or Ctrl-C during ``starling simulate`` ends it as it ends ``starling run``: exit 130,
``interrupted``, and nothing already sampled is lost.

The simulation runs every node in lockstep, so what is kept is the rounds every node
completed, the same number on every node, and they are the rounds a shorter simulation of
the same experiment produces, to the bit.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from starling.orchestrator.cli.run import EXIT_INTERRUPTED
from tests.conftest import ROOT, run_cli, start_cli
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

NODES = ["0", "1", "2", "3", "4"]  # the quickstart's ring


def _experiment(tmp_path: Path, name: str, rounds: int) -> Path:
    raw = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    raw.update(name="interrupted-simulation", rounds=rounds, chains=4)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def _samples(out: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    kept = {}
    for path in sorted((out / "samples").glob("node-*.npz")):
        with np.load(path) as data:
            kept[path.stem.removeprefix("node-")] = (data["samples"], data["rounds"])
    return kept


def _default_sigint() -> None:  # in the child: Ctrl-C even if this run ignores it
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_an_interrupted_simulation_keeps_every_completed_round(signum, tmp_path, starling_home):
    long = _experiment(tmp_path, "long", rounds=10_000_000)
    out = tmp_path / "out"
    simulation = start_cli(
        "simulate",
        str(long),
        "--out",
        str(out),
        "--no-report",
        env_home=starling_home,
        preexec_fn=_default_sigint,
    )
    # Both pipes are read by threads of their own until the child closes them (never by
    # communicate() as well: two readers of one pipe race, and one finds it closed).
    lines: list[str] = []
    errors: list[str] = []
    readers = [
        threading.Thread(target=lines.extend, args=(simulation.stdout,), daemon=True),
        threading.Thread(target=errors.extend, args=(simulation.stderr,), daemon=True),
    ]
    for reader in readers:
        reader.start()
    try:
        # Its first progress line ("rounds 1 of 10000000") comes once round 0 is done on
        # every node: from then on there is something to keep.
        wait_until(
            lambda: any(line.startswith("rounds ") for line in lines),
            300,
            "the first round of the simulation",
        )
        simulation.send_signal(signum)
        simulation.wait(timeout=600)
    finally:
        if simulation.poll() is None:
            simulation.kill()
            simulation.wait()
    for reader in readers:
        reader.join(timeout=60)
    for pipe in (simulation.stdout, simulation.stderr):
        if pipe is not None:
            pipe.close()
    stderr = "".join(errors)
    shown = "".join(lines)[-2000:] + stderr[-2000:]
    assert simulation.returncode == EXIT_INTERRUPTED, shown
    assert "Traceback" not in stderr, shown

    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "interrupted" and metrics["interrupted"] is True
    summary = (out / "summary.txt").read_text().splitlines()
    assert next(line for line in summary if line.startswith("status: ")) == "status: interrupted"
    assert json.loads((out / "manifest.json").read_text())["status"] == "interrupted"

    kept = _samples(out)
    assert sorted(kept) == NODES
    k = kept["0"][0].shape[0]
    assert 1 <= k < 10_000_000
    for node, (values, rounds) in kept.items():
        assert values.shape[0] == k, f"node {node} kept {values.shape[0]} rounds, node 0 {k}"
        assert np.array_equal(rounds, np.arange(k)), node
    assert metrics["samples_per_node"] == dict.fromkeys(NODES, k)
    assert any(f"{k} rounds done on every node" in line for line in metrics["account"])
    # The links carried the rounds played, not the ten million scheduled.
    assert {c["sent"] for c in metrics["links"].values()} == {k}

    # Evaluated like any partial run: the same rounds in a simulation that stops at k.
    short = _experiment(tmp_path, "short", rounds=k)
    expected_out = tmp_path / "expected"
    done = run_cli(
        "simulate",
        str(short),
        "--out",
        str(expected_out),
        "--no-report",
        env_home=starling_home,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    expected = _samples(expected_out)
    assert sorted(expected) == NODES
    for node in NODES:
        values, rounds = kept[node]
        assert values.dtype == expected[node][0].dtype
        assert values.tobytes() == expected[node][0].tobytes(), f"node {node} differs"
        assert np.array_equal(rounds, expected[node][1])
    complete = json.loads((expected_out / "metrics.json").read_text())
    assert complete["status"] == "complete"
    # Scored on the rounds its nodes recorded, as the shorter run is: every node stopped
    # at the same round, so all of them make the network average, the same figure.
    assert metrics["w2"]["per_node"] == complete["w2"]["per_node"]
    assert metrics["w2"]["average"] is not None
    assert metrics["w2"]["average"] == complete["w2"]["average"]


def test_an_interrupted_study_keeps_its_finished_runs_and_says_which_run_it_stopped(
    tmp_path, starling_home
):
    """SIGTERM during a study's second run: exit 130, the first run's row in seeds.csv and
    the tables, and a last line naming the run it stopped in (before, the line named the
    phase of the run before it, long over: "while the results were being written")."""
    quick = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    cell = {k: quick[k] for k in ("model", "data", "topology")}
    study = {
        "study": "interrupted-study",
        "base": {"algorithm": quick["algorithm"], "chains": 4, "seed": 1, **cell},
        "cells": [{"label": "short", "rounds": 20}, {"label": "endless", "rounds": 10_000_000}],
        "variants": [{"label": "as shipped", "hyperparameters": quick["hyperparameters"]}],
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    out = tmp_path / "out"
    simulation = start_cli(
        "simulate",
        str(path),
        *("--out", str(out), "--no-report", "--quiet"),  # --quiet: no pipe fills unread
        env_home=starling_home,
    )
    try:
        # The first run's metrics are its last file; the second run then begins at once,
        # and two seconds later it is well inside its ten million rounds.
        first = out / "short" / "as-shipped" / "metrics.json"
        wait_until(
            lambda: first.is_file() or simulation.poll() is not None,
            300,
            "the study's first run to end",
        )
        time.sleep(2.0)
        simulation.send_signal(signal.SIGTERM)
        said, errors = simulation.communicate(timeout=600)
    finally:
        if simulation.poll() is None:
            simulation.kill()
            simulation.wait()
    shown = said[-2000:] + errors[-2000:]
    assert simulation.returncode == EXIT_INTERRUPTED, shown
    assert "Traceback" not in errors, shown
    last = errors.strip().splitlines()[-1]
    assert "interrupted during endless / as shipped" in last and str(out) in last, shown
    assert "while the results were being written" not in errors, shown
    with open(out / "seeds.csv") as handle:
        assert [line.split(",")[0] for line in handle.read().splitlines()[1:]] == ["short"]
