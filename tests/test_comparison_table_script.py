"""``scripts/comparison_table.py`` as the comparison page uses it: a study run in parts,
one of them from a later base seed (the study's later replicates), put back together. The
parts are real ``starling simulate`` runs of a small study; the script runs as a user runs
it, in its own process."""

from __future__ import annotations

import csv
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e

STUDY = {
    "study": "parts",
    "seeds": 2,
    "baseline": "D-SGLD",
    "base": {"seed": 1},
    "cells": [
        {
            "label": "linreg",
            "model": {"name": "linear_regression", "params": {"dim": 2}},
            "data": {"source": "synthetic", "total": 100, "seed": 3},
            "rounds": 40,
            "chains": 8,
            "faults": [],
        }
    ],
    "variants": [
        {
            "label": "D-SGLD",
            "algorithm": "d-sgld",
            "topology": {"kind": "ring", "nodes": 3},
            "hyperparameters": {"eta": 0.009},
        },
        {
            "label": "D-ULA",
            "algorithm": "d-ula",
            "topology": {"kind": "ring", "nodes": 3},
        },
    ],
}


def _part(tmp_path, name: str, seed: int, seeds: int):
    spec = {**STUDY, "base": {"seed": seed}, "seeds": seeds}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / name
    done = subprocess.run(
        [sys.executable, "-m", "starling.orchestrator.cli", "simulate", str(path)]
        + ["--out", str(out), "--quiet", "--no-report"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return out


def _table(tmp_path, *parts):
    study = tmp_path / "study.yaml"
    study.write_text(yaml.safe_dump(STUDY, sort_keys=False))
    return subprocess.run(
        [sys.executable, "scripts/comparison_table.py", str(study), *map(str, parts)]
        + ["--out", str(tmp_path / "table")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _seeds(folder) -> list[tuple[str, int]]:
    with open(folder / "seeds.csv", newline="") as handle:
        return [(row["variant"], int(float(row["seed"]))) for row in csv.DictReader(handle)]


def test_parts_from_later_seeds_make_the_whole_study(tmp_path):
    first = _part(tmp_path, "first", 1, 1)  # replicate 0: seed 1
    later = _part(tmp_path, "later", 2, 1)  # replicate 1: seed 2
    assert sorted(_seeds(first)) == [("D-SGLD", 1), ("D-ULA", 1)]
    assert sorted(_seeds(later)) == [("D-SGLD", 2), ("D-ULA", 2)]

    done = _table(tmp_path, first, later)
    assert done.returncode == 0, done.stderr
    assert "4 runs, 2 rows" in done.stdout
    rows = [
        line
        for line in (tmp_path / "table" / "table.md").read_text().splitlines()
        if line.startswith("| linreg")
    ]
    # Both replicates in every row: the figures carry a 95 % interval over the two seeds.
    assert len(rows) == 2 and all("/2 |" in row and "±" in row for row in rows), rows

    # The same part twice is the same replicate twice, taken once: one seed, no interval.
    again = _table(tmp_path, first, first)
    assert again.returncode == 0 and "2 runs, 2 rows" in again.stdout, again.stderr


def test_a_part_beyond_the_studys_replicates_is_refused_naming_it(tmp_path):
    beyond = _part(tmp_path, "beyond", 7, 1)  # seed 7: the study has seeds 1 and 2
    done = _table(tmp_path, beyond)
    assert done.returncode != 0
    line = done.stderr.strip()
    assert "\n" not in line and str(beyond) in line and "seed 7" in line, line
