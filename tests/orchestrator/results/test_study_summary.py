"""A study's ``summary`` field picks which W2 its table against x and its plot show."""

from __future__ import annotations

import csv

import pytest

from starling.node.params import ConfigError
from starling.orchestrator.config.study import load_study
from starling.orchestrator.execution.study import run_study
from starling.orchestrator.planning.plan import plan_study


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
    run_study(plan_study(load_study(_raw(summary))), tmp_path, "simulate", say=lambda _m: None)
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


@pytest.mark.parametrize("name", ["w2_node_mean", "first_below", "w2_agent_at_10", "seed"])
def test_a_figure_may_not_take_a_column_the_study_writes(name):
    """Such a figure showed twice in the tables, or not at all: it is refused, named."""
    raw = {**_raw(None), "figures": {name: "w2.node_mean"}}
    with pytest.raises(ConfigError, match=rf"figures: '{name}' is a column every study writes"):
        load_study(raw)


def test_a_figure_of_its_own_name_is_tabulated(tmp_path):
    raw = {**_raw(None), "cells": [{"label": "all"}], "figures": {"spread": "w2.node_mean"}}
    run_study(plan_study(load_study(raw)), tmp_path, "simulate", say=lambda _m: None)
    with open(tmp_path / "seeds.csv") as handle:
        row = next(csv.DictReader(handle))
    assert row["spread"] == row["w2_node_mean"] != ""
