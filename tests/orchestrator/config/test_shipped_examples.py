"""The example experiments ship with Starling: listed, runnable by name, copyable, and
inside the wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

import pytest

from starling.orchestrator.cli.main import main
from starling.orchestrator.config.shipped import copy_examples, example_path, list_examples
from tests.conftest import ROOT


def test_every_top_level_example_is_listed_with_its_summary(capsys):
    names = [name for name, _ in list_examples()]
    assert names == sorted(p.stem for p in (ROOT / "examples").glob("*.yaml"))
    assert main(["examples"]) == 0
    shown = capsys.readouterr().out
    assert "quickstart" in shown and "link-failure-study" in shown


def test_an_example_is_found_by_name_and_nothing_else_is():
    assert example_path("quickstart") == (ROOT / "examples" / "quickstart.yaml").resolve()
    assert example_path("quickstart.yaml") == example_path("quickstart")
    assert example_path("../README.md") is None
    assert example_path("no-such-example") is None


def test_starling_simulate_runs_a_shipped_example_by_name(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["simulate", "quickstart", "--out", str(out)]) == 0
    assert (out / "metrics.json").is_file()
    assert "quickstart" in (out / "experiment.yaml").read_text()


def test_an_unknown_name_is_still_a_missing_file(capsys):
    assert main(["simulate", "no-such-example"]) == 2
    assert "experiment file 'no-such-example' does not exist" in capsys.readouterr().err


def test_copy_never_overwrites(tmp_path, capsys):
    copied = copy_examples(tmp_path / "mine")
    assert {p.name for p in copied} == {p.name for p in (ROOT / "examples").glob("*.yaml")}
    (tmp_path / "mine" / "quickstart.yaml").write_text("edited")
    assert main(["examples", "--copy", str(tmp_path / "mine")]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (tmp_path / "mine" / "quickstart.yaml").read_text() == "edited"


@pytest.mark.e2e
def test_the_wheel_carries_the_examples_and_finds_them_installed(tmp_path):
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        inside = {n for n in archive.namelist() if n.startswith("starling/orchestrator/examples/")}
        data = {n for n in archive.namelist() if n.startswith("starling/node/models/datasets/")}
        archive.extractall(tmp_path / "site")
    assert {
        "starling/node/models/datasets/a9a.gz",
        "starling/node/models/datasets/a9a.t.gz",
        "starling/node/models/datasets/README.md",
    } <= data
    assert inside == {
        f"starling/orchestrator/examples/{p.name}" for p in (ROOT / "examples").glob("*.yaml")
    }
    # Imported from the unpacked wheel (no checkout around it), the examples are its own.
    found = subprocess.run(
        [
            sys.executable,
            "-c",
            "from starling.orchestrator.config.shipped import example_path; "
            "print(example_path('quickstart'))",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.returncode == 0, found.stderr
    expected = tmp_path / "site" / "starling" / "orchestrator" / "examples" / "quickstart.yaml"
    assert found.stdout.strip() == str(expected.resolve())
    # The a9a the examples name loads from the unpacked wheel, its checksum verified.
    a9a = subprocess.run(
        [
            sys.executable,
            "-c",
            "import starling.node.data.files as f; print(f.__file__, "
            "len(f.load_builtin('a9a.t', 123)))",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert a9a.returncode == 0, a9a.stderr
    where, rows = a9a.stdout.split()
    assert where.startswith(str(tmp_path / "site")) and rows == "16281"
