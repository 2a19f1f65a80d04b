"""A study with ``evaluation.hpd`` gathers every run's HPD curve ([003] Fig. 3, "during the
sampling procedure") into ``hpd_curves.csv`` and plots it per cell, the x axis the share of
each run done, so variants with different numbers of rounds line up."""

from __future__ import annotations

import csv
import json

import pytest

from starling.orchestrator.config.study import load_study
from starling.orchestrator.execution.study import run_study
from starling.orchestrator.planning.plan import plan_study


def _raw() -> dict:
    return {
        "study": "hpd-curves",
        "seeds": 2,
        "agent": "1",
        "base": {
            "model": {"name": "linear_regression", "params": {"dim": 2}},
            "data": {"source": "synthetic", "size": 20, "seed": 1},
            "topology": {"kind": "ring", "nodes": 3},
            "chains": 10,
            "seed": 5,
            "evaluation": {"hpd": 0.1, "window": 20, "curve_points": 5},
        },
        "cells": [{"label": "ring 3"}],
        "variants": [
            {
                "label": "short",
                "algorithm": "d-sgld",
                "hyperparameters": {"eta": 0.01},
                "rounds": 30,
            },
            {"label": "long", "algorithm": "d-ula", "rounds": 60},
        ],
    }


def test_every_runs_hpd_curve_is_gathered_and_plotted(tmp_path):
    run_study(plan_study(load_study(_raw())), tmp_path, "simulate", say=lambda _m: None)
    with open(tmp_path / "hpd_curves.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    runs = {(r["variant"], r["seed"]) for r in rows}
    assert runs == {("short", "0"), ("short", "1"), ("long", "0"), ("long", "1")}
    for variant, rounds in (("short", 30), ("long", 60)):
        for seed in ("0", "1"):
            for series, key in (("agent", "1"), ("average", None)):
                mine = [
                    r
                    for r in rows
                    if (r["variant"], r["seed"], r["series"]) == (variant, seed, series)
                ]
                assert len(mine) == 5, (variant, seed, series)
                # The curve spans the run: from round 0 to its last round.
                assert int(mine[0]["round"]) == 0
                assert float(mine[-1]["share"]) == 1.0
                assert all(
                    float(r["share"]) == pytest.approx((int(r["round"]) + 1) / rounds, rel=1e-5)
                    for r in mine
                )
                metrics = json.loads(
                    (tmp_path / "ring-3" / variant / f"seed-{seed}" / "metrics.json").read_text()
                )
                final = metrics["hpd"]["excess"]
                expected = final["per_node"][key] if key else final["average"]
                assert float(mine[-1]["excess_error"]) == pytest.approx(expected, rel=1e-5)
    pytest.importorskip("matplotlib")
    assert (tmp_path / "hpd-ring-3.png").stat().st_size > 0


def test_a_study_without_hpd_writes_no_hpd_curves(tmp_path):
    raw = _raw()
    del raw["base"]["evaluation"]["hpd"]
    raw["seeds"] = 1
    run_study(plan_study(load_study(raw)), tmp_path, "simulate", say=lambda _m: None)
    assert not (tmp_path / "hpd_curves.csv").exists()
    assert not list(tmp_path.glob("hpd-*.png"))
