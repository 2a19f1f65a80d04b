"""The comparison no paper has (``examples/compare-samplers.yaml``), in a quick version: the
shipped file itself, cut to its linear-regression cells (every sampler family, no fault,
30 % loss, node 4 dead from the middle) over 200 rounds and two seeds, run as
``starling simulate`` runs it. The full grid's measured table is in
docs/reproductions/comparison.md.

What is checked is what the table must carry and what does not depend on the seed: a
verdict for every run, stationary W2 with intervals, paired differences against D-ADMMS,
ESS priced per second, message and byte, and the failure modes that are the sampler's own
(exact for these fixed seeds: the node that dies stops, push-sum-RS keeps its mass under
loss).
"""

from __future__ import annotations

import csv

import numpy as np
import pytest

from starling.orchestrator.config.study import load_study, slug
from starling.orchestrator.config.yaml_files import read_yaml_file
from starling.orchestrator.execution.study import run_study
from starling.orchestrator.planning.plan import plan_study
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

FAMILIES = [
    "D-ADMMS",
    "D-SGLD",
    "D-SGHMC",
    "D-ULA",
    "push-sum-RS",
    "DG-LMC",
    "EC-SGHMC",
    "Async SGHMC",
]


def _quick() -> dict:
    raw = dict(read_yaml_file(ROOT / "examples" / "compare-samplers.yaml"))
    cells = []
    for cell in raw["cells"]:
        if not cell["label"].startswith("linreg"):
            continue
        cell = {**cell, "rounds": 200, "chains": 30}
        if cell["faults"] and "node" in cell["faults"][0]:
            cell["faults"] = [{**cell["faults"][0], "kill_at_round": 100}]
        cells.append(cell)
    kept = {cell["label"] for cell in cells}
    # A variant's per_cell settings for the cells left out go too: a study refuses settings
    # for a cell it does not have.
    variants = [
        {**v, "per_cell": {c: s for c, s in v["per_cell"].items() if c in kept}}
        if "per_cell" in v
        else v
        for v in raw["variants"]
    ]
    return {**raw, "seeds": 2, "cells": cells, "variants": variants}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    rows = run_study(plan_study(load_study(_quick())), out, "simulate", say=lambda _m: None)
    return out, rows


def _read(path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_shipped_grid_is_every_family_on_four_problems_and_three_fault_schedules():
    study = load_study(read_yaml_file(ROOT / "examples" / "compare-samplers.yaml"))
    assert [v["label"] for v in study.variants] == FAMILIES
    problems = {c["label"].split(" / ")[0] for c in study.cells}
    faults = {c["label"].split(" / ")[1] for c in study.cells}
    assert problems == {"linreg", "gmm", "a9a", "digits"}
    assert faults == {"none", "30% loss", "node dead"}
    assert len(study.replicates) == 4 * 3 * 8 * study.seeds
    # One problem's data and rounds in every cell and variant of it: the same posterior.
    for problem in problems:
        mine = [e for c, _, e in study.runs if c.startswith(problem)]
        assert len({(e.data.seed, e.data.total, e.data.path, e.rounds) for e in mine}) == 1


def test_every_run_has_a_verdict_and_its_efficiency(quick):
    out, rows = quick
    assert len(rows) == 3 * len(FAMILIES) * 2
    assert {r["verdict"] for r in rows} <= {"converged", "not converged", "diverged"}
    for row in rows:
        if row["verdict"] == "diverged":
            continue
        assert row["w2_stationary_agent"] is not None and row["ess"] > 0, row
        assert row["ess_per_second"] > 0 and row["ess_per_message"] > 0, row
        assert row["ess_per_kilobyte"] > 0, row
    table = (out / "table.md").read_text()
    assert table.count("converged |") >= 3 * len(FAMILIES)
    assert "W2 stationary agent" in table and "ess_per_kilobyte" in table
    assert (out / "bars.png").is_file()


def test_differences_are_paired_against_dadmms(quick):
    out, _ = quick
    paired = _read(out / "paired.csv")
    against = {(p["cell"], p["variant"]) for p in paired if p["kind"] == "variant"}
    cells = {"linreg / none", "linreg / 30% loss", "linreg / node dead"}
    assert against == {(c, v) for c in cells for v in FAMILIES[1:]}
    assert all(p["paired"] == "True" for p in paired)  # every run shares its seeds
    assert {p["minus"] for p in paired if p["kind"] == "variant"} == {"D-ADMMS"}
    # And each fault schedule against none, for the same sampler and seed.
    assert {p["minus"] for p in paired if p["kind"] == "cell"} == {"linreg / none"}


def test_a_dead_node_stops_and_the_others_finish(quick):
    out, _ = quick
    for family in FAMILIES:
        samples = out / "linreg-node-dead" / slug(family) / "seed-0" / "samples"
        # Node 4, killed for good at round 100, keeps only its rounds before the kill (a
        # DG-LMC or Async SGHMC worker records none at all: the master or server holds θ);
        # every other node that records samples has all 200.
        if family not in ("DG-LMC", "Async SGHMC"):
            with np.load(samples / "node-4.npz") as data:
                assert len(data["rounds"]) == 100, family
        for other in samples.glob("node-*.npz"):
            if other.name != "node-4.npz":
                with np.load(other) as data:
                    assert len(data["rounds"]) == 200, (family, other.name)
