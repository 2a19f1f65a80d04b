"""A study's ``summary`` field picks which W2 its table against x and its plot show."""

from __future__ import annotations

import csv

import pytest

from starling.node.params import ConfigError
from starling.orchestrator.study import load_study, run_study


def _raw(summary: str | None) -> dict:
    raw = {
        "study": "summary-pick",
        "x_label": "p",
        "base": {
            "algorithm": "d-sgld",
            "model": {"name": "linear_regression", "params": {"dim": 2}},
            "data": {"source": "synthetic", "size": 20, "seed": 1},
            "topology": {"kind": "ring", "nodes": 3},
            "rounds": 30,
            "chains": 10,
            "seed": 2,
        },
        "cells": [
            {"label": "p=0", "x": 0.0},
            {"label": "p=0.2", "x": 0.2, "faults": [{"link": "all", "drop": 0.2}]},
        ],
        "variants": [{"label": "D-SGLD"}],
    }
    if summary is not None:
        raw["summary"] = summary
    return raw


@pytest.mark.parametrize("summary", ["average", "agent"])
def test_the_pivot_shows_the_chosen_w2(tmp_path, summary):
    run_study(load_study(_raw(summary)), tmp_path, "simulate", say=lambda _m: None)
    with open(tmp_path / "table.csv") as handle:
        rows = {row["cell"]: row for row in csv.DictReader(handle)}
    table = (tmp_path / "table.md").read_text()
    heading = "W2 of the agent average" if summary == "average" else "W2 of agent 0"
    assert f"{heading} / consensus error, by p:" in table
    pivot = table.split("by p:")[1]
    for cell in ("p=0", "p=0.2"):
        assert f"{float(rows[cell][f'w2_{summary}']):.4f} / " in pivot, (cell, pivot)


def test_an_unknown_summary_is_named():
    with pytest.raises(ConfigError, match="summary: expected one of average, agent"):
        load_study(_raw("median"))
