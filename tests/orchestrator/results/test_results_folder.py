"""Results folders are never destroyed, and say how their run ended.

Each test is a finding of issue 10 that failed on the old behaviour: ``--out DIR`` removed
``DIR/samples`` (user files included), a run that failed into an old folder left that
folder's ``metrics.json`` beside nothing, and ``simulate`` wrote into ``run``'s default folder.
The runs are the real command line (``starling.orchestrator.cli.main.main``) on real files.
"""

from __future__ import annotations

import json
import socket

import pytest
import yaml

from starling.orchestrator.cli.main import main
from tests.conftest import ROOT

QUICK = {**yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text()), "rounds": 4}


@pytest.fixture
def experiment(tmp_path, monkeypatch, starling_home):
    monkeypatch.chdir(tmp_path)  # the default results/ lands in the test's folder
    path = tmp_path / "quick.yaml"
    path.write_text(yaml.safe_dump(QUICK))
    return path


def _manifest(folder) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def test_a_user_file_in_the_results_folder_survives_an_overwrite(tmp_path, experiment):
    out = tmp_path / "p"
    assert main(["simulate", str(experiment), "--out", str(out)]) == 0
    (out / "samples" / "f.csv").write_text("mine\n")
    (out / "notes.txt").write_text("mine too\n")
    assert main(["simulate", str(experiment), "--out", str(out)]) == 2  # not empty: refused
    assert main(["simulate", str(experiment), "--out", str(out), "--overwrite"]) == 0
    assert (out / "samples" / "f.csv").read_text() == "mine\n"
    assert (out / "notes.txt").read_text() == "mine too\n"
    manifest = _manifest(out)
    assert manifest["status"] == "complete"
    assert "samples/node-0.npz" in manifest["files"] and "metrics.json" in manifest["files"]
    assert "samples/f.csv" not in manifest["files"]
    assert set(manifest["foreign"]) == {"samples/f.csv", "notes.txt"}
    # and the next overwrite still leaves them alone
    assert main(["simulate", str(experiment), "--out", str(out), "--overwrite"]) == 0
    assert (out / "samples" / "f.csv").read_text() == "mine\n"


def test_an_overwrite_removes_only_what_the_manifest_lists_inside_the_folder(tmp_path, experiment):
    out = tmp_path / "p"
    assert main(["simulate", str(experiment), "--out", str(out)]) == 0
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    manifest = _manifest(out)
    manifest["files"] += ["../outside.txt", str(outside)]
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert main(["simulate", str(experiment), "--out", str(out), "--overwrite"]) == 0
    assert outside.read_text() == "keep\n"


@pytest.mark.e2e
def test_a_run_that_fails_into_an_old_folder_leaves_nothing_stale(tmp_path, experiment):
    out = tmp_path / "p"
    assert main(["simulate", str(experiment), "--out", str(out)]) == 0
    assert (out / "w2_curve.csv").exists()
    with socket.socket() as taken:  # every node is told to listen where something already is
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        failing = tmp_path / "failing.yaml"
        failing.write_text(
            yaml.safe_dump(
                {
                    **QUICK,
                    "topology": {"kind": "ring", "nodes": 3},
                    "nodes": [
                        {"id": "a", "address": f"127.0.0.1:{port}"},
                        {"id": "b"},
                        {"id": "c"},
                    ],
                }
            )
        )
        code = main(["run", str(failing), "--out", str(out), "--overwrite"])
    assert code == 2
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "failed" and "node 'a'" in metrics["error"]
    assert (out / "summary.txt").read_text().startswith("status: failed — ")
    assert not (out / "w2_curve.csv").exists()
    assert not list(out.glob("samples/*.npz"))
    assert _manifest(out)["status"] == "failed"


def test_default_folders_are_new_each_time_and_latest_points_at_the_last(tmp_path, experiment):
    assert main(["simulate", str(experiment)]) == 0
    assert main(["simulate", str(experiment)]) == 0
    parent = tmp_path / "results" / "quickstart"
    runs = sorted(p for p in parent.iterdir() if not p.is_symlink())
    assert len(runs) == 2, runs
    assert (parent / "latest").resolve() == runs[-1].resolve()
    for folder in runs:
        assert _manifest(folder)["status"] == "complete"
        summary = (folder / "summary.txt").read_text().splitlines()
        assert summary[0].startswith("verdict: "), summary  # the verdict leads, then the status
        assert next(line for line in summary if line.startswith("status: ")) == "status: complete"
        assert json.loads((folder / "metrics.json").read_text())["status"] == "complete"
        assert not (folder / "run.json").exists() and not (folder / "nodes").exists()


def test_simulate_never_writes_into_a_folder_of_run(tmp_path, experiment):
    parent = tmp_path / "results" / "quickstart"
    parent.mkdir(parents=True)
    (parent / "run.json").write_text("{}")  # what the old default folder held after `run`
    (parent / "nodes").mkdir()
    assert main(["simulate", str(experiment)]) == 0
    latest = (parent / "latest").resolve()
    assert latest.parent == parent.resolve()
    assert sorted(p.name for p in latest.iterdir()) == [
        "experiment.yaml",
        "manifest.json",
        "metrics.json",
        "report.html",
        "samples",
        "summary.txt",
        "w2_curve.csv",
    ]
    assert (parent / "run.json").read_text() == "{}"
