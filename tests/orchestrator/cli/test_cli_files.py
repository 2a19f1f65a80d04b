"""The files the command line reads and writes besides an experiment: ``export``'s and
``compose generate``'s output file, ``examples --copy``'s folder, and damaged results
folders (``report``, ``export``, ``collect``). Every mistake is one line naming the option
or the file, exit 2, no traceback, and nothing of the user's replaced unasked.

The results folders are written by the real command line (``simulate`` in-process, no
process started); every command runs in-process through ``main``.
"""

from __future__ import annotations

import json
import warnings

import pytest
import yaml

from starling.orchestrator.cli.main import main
from starling.orchestrator.config.shipped import experiment_file
from starling.orchestrator.config.yaml_files import read_yaml_file
from starling.orchestrator.deploy.testbed import make_testbed

EXPERIMENT = {
    "name": "files",
    "algorithm": "d-sgld",
    "hyperparameters": {"eta": 0.009},
    "model": {
        "name": "linear_regression",
        "params": {"dim": 2, "noise_std": 4.0, "prior_var": 10.0},
    },
    "data": {"source": "synthetic", "size": 20, "seed": 3},
    "topology": {"kind": "ring", "nodes": 3},
    "rounds": 6,
    "chains": 12,  # more chains than rounds: ArviZ's "More chains than draws" heuristic
    "seed": 5,
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A finished simulation's results folder (module-wide: tests copy it to damage it)."""
    folder = tmp_path_factory.mktemp("run")
    path = folder / "files.yaml"
    path.write_text(yaml.safe_dump(EXPERIMENT, sort_keys=False))
    out = folder / "out"
    assert main(["simulate", str(path), "--out", str(out), "--quiet", "--no-report"]) == 0
    return out


@pytest.fixture
def run_copy(results, tmp_path):
    import shutil

    return shutil.copytree(results, tmp_path / "copy")


def _refused(capsys, argv: list[str], *needles: str) -> str:
    """``starling ARGV`` exits 2 with one line on stderr holding every needle."""
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("starling: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return err


# --- starling export --out


def test_export_refuses_an_existing_file_unless_overwrite(run_copy, tmp_path, capsys):
    pytest.importorskip("arviz")
    target = tmp_path / "mine.nc"
    target.write_text("the user's own file")
    _refused(capsys, ["export", str(run_copy), "--out", str(target)], str(target), "--overwrite")
    assert target.read_text() == "the user's own file"
    assert main(["export", str(run_copy), "--out", str(target), "--overwrite"]) == 0
    assert target.read_bytes()[:4] == b"\x89HDF"


def test_export_refuses_its_own_earlier_default_file_unless_overwrite(run_copy, capsys):
    pytest.importorskip("arviz")
    assert main(["export", str(run_copy)]) == 0
    _refused(capsys, ["export", str(run_copy)], "posterior.nc", "already exists")
    assert main(["export", str(run_copy), "--overwrite"]) == 0


@pytest.mark.parametrize("inside", ["samples/node-0.npz", "samples/new.nc", "metrics.json"])
def test_export_never_writes_over_the_runs_own_files(run_copy, capsys, inside):
    before = {p: p.read_bytes() for p in run_copy.rglob("*") if p.is_file()}
    target = run_copy / inside
    _refused(capsys, ["export", str(run_copy), "--out", str(target), "--overwrite"], str(target))
    assert {p: p.read_bytes() for p in run_copy.rglob("*") if p.is_file()} == before


def test_export_refuses_a_folder_and_a_missing_folder(run_copy, tmp_path, capsys):
    _refused(capsys, ["export", str(run_copy), "--out", str(tmp_path)], "--out", "is a folder")
    missing = tmp_path / "nonexist" / "dir" / "x.nc"
    _refused(capsys, ["export", str(run_copy), "--out", str(missing)], "does not exist")
    assert not (tmp_path / "nonexist").exists()
    _refused(capsys, ["export", str(run_copy), "--out", ""], "--out")


def test_export_documents_overwrite(capsys):
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    assert "--overwrite" in capsys.readouterr().out


def test_export_shows_no_arviz_warning(run_copy, tmp_path):
    pytest.importorskip("arviz")
    from starling.orchestrator.report.export import to_inference_data

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = to_inference_data(run_copy)
    assert not [w for w in caught if "chains" in str(w.message)], [str(w.message) for w in caught]
    assert data.posterior["x"].shape == (12, 6, 3, 2)  # (chain, draw, node, param)


# --- starling run --inventory


def test_run_with_a_directory_as_inventory_says_it_is_one(tmp_path, capsys):
    """A directory given as --inventory was reported as 'no such file'."""
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(yaml.safe_dump(EXPERIMENT))
    folder = tmp_path / "inventory"
    folder.mkdir()
    argv = ["run", str(experiment), "--inventory", str(folder), "--out", str(tmp_path / "out")]
    err = _refused(capsys, argv, "--inventory", repr(str(folder)), "is a directory")
    assert "no such file" not in err
    _refused(
        capsys, [*argv[:3], str(tmp_path / "none.yaml"), *argv[4:]], "--inventory", "no such file"
    )
    assert not (tmp_path / "out").exists()


# --- starling examples --copy


def test_examples_copy_into_a_file_is_refused(tmp_path, capsys):
    target = tmp_path / "afile"
    target.write_text("mine")
    _refused(capsys, ["examples", "--copy", str(target)], str(target), "not a folder")
    assert target.read_text() == "mine"


def test_examples_copy_where_no_folder_can_be_made_is_refused(capsys):
    _refused(capsys, ["examples", "--copy", "/proc/starling-no-such/dir"], "--copy", "/proc")


def test_examples_copy_into_nothing_is_refused(capsys):
    _refused(capsys, ["examples", "--copy", ""], "--copy")


# --- starling compose generate


def test_compose_default_and_shipped_name_work_from_any_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["compose", "generate", "--nodes", "2"]) == 0
    default = capsys.readouterr().out
    assert "compose-quickstart-2-ring" in default
    argv = ["compose", "generate", "--nodes", "2", "--experiment", "compose-quickstart"]
    assert main(argv) == 0
    assert capsys.readouterr().out == default


def test_compose_out_is_a_file_never_replaced_unasked(tmp_path, capsys):
    _refused(capsys, ["compose", "generate", "--out", str(tmp_path)], "--out", "is a folder")
    target = tmp_path / "compose.gen.yml"
    target.write_text("mine")
    _refused(capsys, ["compose", "generate", "--out", str(target)], str(target), "--overwrite")
    assert target.read_text() == "mine"
    assert main(["compose", "generate", "--out", str(target), "--overwrite"]) == 0
    assert "services" in yaml.safe_load(target.read_text())
    missing = tmp_path / "nope" / "c.yml"
    _refused(capsys, ["compose", "generate", "--out", str(missing)], "does not exist")
    assert not missing.parent.exists()


@pytest.mark.parametrize("size", ["-5", "0"])
def test_compose_refuses_a_non_positive_data_size(capsys, size):
    _refused(capsys, ["compose", "generate", "--data-size", size], "--data-size")


def test_compose_generate_checks_its_numbers():
    from starling.node.params import ConfigError

    with pytest.raises(ConfigError, match="--data-seed"):
        make_testbed(read_yaml_file(experiment_file("compose-quickstart")), 3, data_seed=-1)


# --- damaged results folders


def test_report_names_a_truncated_metrics_file(run_copy, capsys):
    metrics = run_copy / "metrics.json"
    metrics.write_text(metrics.read_text()[:100])
    _refused(capsys, ["report", str(run_copy)], str(metrics), "not valid JSON")
    assert not (run_copy / "report.html").exists()


def test_report_names_a_metrics_file_that_is_not_an_object(run_copy, capsys):
    (run_copy / "metrics.json").write_text("[1, 2]\n")
    _refused(capsys, ["report", str(run_copy)], "metrics.json", "JSON object")


@pytest.mark.parametrize("content", [b"garbage\n", b"", b"PK\x03\x04truncated"])
@pytest.mark.parametrize("command", ["report", "export"])
def test_a_damaged_samples_file_is_named(run_copy, capsys, command, content):
    if command == "report":
        pytest.importorskip("matplotlib")
    damaged = run_copy / "samples" / "node-1.npz"
    damaged.write_bytes(content)
    argv = [command, str(run_copy)]
    if command == "export":
        argv += ["--out", str(run_copy.parent / "x.nc")]
    err = _refused(capsys, argv, str(damaged))
    assert "pickled" not in err


def test_report_names_a_damaged_study_file(tmp_path, capsys):
    (tmp_path / "study.yaml").write_text("study: [unclosed\n")
    (tmp_path / "table.csv").write_text("cell,variant\n")
    _refused(capsys, ["report", str(tmp_path)], "study.yaml", "not valid YAML")


def _crashed_run(folder, start) -> None:
    """A results folder whose orchestrator died after writing ``start``."""
    folder.mkdir()
    (folder / "manifest.json").write_text(
        json.dumps({"status": "running", "files": [], "foreign": []})
    )
    (folder / "experiment.yaml").write_text(yaml.safe_dump(EXPERIMENT, sort_keys=False))
    (folder / "start.json").write_text(start if isinstance(start, str) else json.dumps(start))


NODE = {"address": "127.0.0.1:1", "pid": None, "state_dir": None, "stored_run": ["files", "0"]}


@pytest.mark.parametrize(
    "start, needle",
    [
        ([1, 2], "expected a JSON object"),
        ({"nodes": {}}, "experiment"),
        ({"experiment": "files", "backend": "inventory", "nodes": [1]}, "nodes"),
        ({"experiment": "files", "backend": "local", "nodes": {"0": {}}}, "nodes.0.stored_run"),
        (
            {"experiment": "files", "backend": "inventory", "nodes": {"0": {**NODE, "address": 5}}},
            "nodes.0.address",
        ),
        (
            {"experiment": "files", "backend": "local", "nodes": {"0": {**NODE, "pid": "12"}}},
            "nodes.0.pid",
        ),
        ('{"experiment": ', "unreadable"),
    ],
)
def test_collect_names_a_damaged_start_file(tmp_path, capsys, start, needle):
    folder = tmp_path / "crashed"
    _crashed_run(folder, start)
    _refused(capsys, ["collect", str(folder)], str(folder / "start.json"), needle)
