"""Studies over K seeds: the interval code against known values, the counting rule, and a
tiny study run end to end in-process (``simulate``) with its tables."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from starling.node.params import ConfigError
from starling.orchestrator.config.study import load_study
from starling.orchestrator.evaluation.replicates import (
    first_iteration_below,
    interval,
    iteration_value,
)
from starling.orchestrator.execution.study import run_study
from starling.orchestrator.planning.plan import plan_study


def test_t_interval_of_a_fixed_vector():
    # 1..5: mean 3, s = sqrt(2.5); t(0.975, 4 df) = 2.776445105 (any t table), so the
    # half-width is 2.776445105 * sqrt(2.5) / sqrt(5) = 1.963243.
    got = interval([1.0, 2.0, 3.0, 4.0, 5.0])
    assert got.mean == 3.0 and got.n == got.of == 5
    assert got.half == pytest.approx(2.776445105 * math.sqrt(2.5) / math.sqrt(5), abs=1e-8)
    assert got.half == pytest.approx(1.963243, abs=1e-6)
    # Two values: t(0.975, 1) = 12.7062047; s = |a - b| / sqrt(2).
    two = interval([0.0, 2.0])
    assert two.half == pytest.approx(12.7062047 * math.sqrt(2) / math.sqrt(2), abs=1e-6)
    assert got.text(3) == "3.000 ± 1.963"


def test_missing_values_are_counted_not_averaged():
    got = interval([2.0, None, float("nan"), 4.0])
    assert (got.mean, got.n, got.of) == (3.0, 2, 4)
    assert got.text(2).endswith("(2/4 seeds)")
    one = interval([7.0, None])
    assert one.half is None and one.text(1) == "7.0 (1/2 seeds)"
    assert interval([None, None]) is None


def test_iteration_k_means_k_updates():
    # Round index 0 holds the state after one update: iteration 1.
    curve = [0.9, 0.5, 0.31, 0.29, 0.4, 0.2]
    assert first_iteration_below(curve, 0.3) == 4
    assert first_iteration_below(curve, 0.9) == 1
    assert first_iteration_below([np.nan, 0.1], 0.3) == 2  # a diverged round is not below
    assert first_iteration_below(curve, 0.01) is None
    assert iteration_value(curve, 1) == 0.9 and iteration_value(curve, 6) == 0.2
    assert iteration_value(curve, 7) is None and iteration_value(curve, 0) is None


def _study(**extra) -> dict:
    return {
        "study": "tiny-replicates",
        "seeds": 3,
        "threshold": 0.6,
        "report_at": [5],
        "figures": {"chains_seen": "chains"},
        "base": {
            "model": {"name": "linear_regression", "params": {"dim": 2}},
            "data": {"source": "synthetic", "size": 20, "seed": 1},
            "topology": {"kind": "ring", "nodes": 3},
            "rounds": 12,
            "chains": 20,
            "seed": 40,
        },
        "cells": [{"label": "ring"}],
        "variants": [
            {"label": "D-SGLD", "algorithm": "d-sgld", "hyperparameters": {"eta": 0.009}},
            {"label": "D-ADMMS", "algorithm": "d-admms", "hyperparameters": {"rho": 5.0}},
        ],
        **extra,
    }


def test_a_study_over_three_seeds(tmp_path):
    study = load_study(_study())
    assert [e.seed for *_, e in study.replicates] == [40, 41, 42, 40, 41, 42]
    assert {e.data.seed for *_, e in study.replicates} == {1}  # the data stays fixed
    rows = run_study(plan_study(study), tmp_path, "simulate", say=lambda _m: None)
    assert len(rows) == 6
    for variant in ("D-SGLD", "D-ADMMS"):
        for r in range(3):
            assert (tmp_path / "ring" / variant / f"seed-{r}" / "metrics.json").is_file()
    with open(tmp_path / "seeds.csv") as handle:
        seeds = list(csv.DictReader(handle))
    with open(tmp_path / "table.csv") as handle:
        table = {row["variant"]: row for row in csv.DictReader(handle)}
    with open(tmp_path / "curves.csv") as handle:
        curves = list(csv.DictReader(handle))
    for variant, summary in table.items():
        mine = [float(s["w2_agent"]) for s in seeds if s["variant"] == variant]
        assert len(set(mine)) == 3  # three different seeds, three different runs
        expected = interval(mine)
        assert float(summary["w2_agent"]) == pytest.approx(expected.mean, rel=1e-12)
        assert float(summary["w2_agent_ci"]) == pytest.approx(expected.half, rel=1e-12)
        assert summary["seeds"] == "3" and float(summary["chains_seen"]) == 20.0
        # W2 at iteration 5 is the curve's fifth row (iterations count from 1).
        for s in (s for s in seeds if s["variant"] == variant):
            at5 = next(
                c
                for c in curves
                if c["variant"] == variant
                and c["seed"] == s["seed_index"]
                and c["iteration"] == "5"
            )
            assert float(s["w2_agent_at_5"]) == pytest.approx(float(at5["w2_agent"]), rel=1e-5)
    assert min(int(c["iteration"]) for c in curves) == 1
    assert max(int(c["iteration"]) for c in curves) == 12
    text = (tmp_path / "table.md").read_text()
    assert "mean ± 95 % Student-t interval over 3 seeds" in text
    assert "Iteration k means k updates" in text and " ± " in text


def test_bad_replicate_settings_are_named():
    with pytest.raises(ConfigError, match=r"seeds"):
        load_study(_study(seeds=0))
    with pytest.raises(ConfigError, match=r"threshold"):
        load_study(_study(threshold=-1))


@pytest.mark.e2e
def test_a_study_over_two_seeds_on_real_nodes(tmp_path, starling_home):
    """``starling run`` of a replicated study: every seed's run is its own set of node
    processes, and gives the samples ``simulate`` gives for that seed."""
    raw = _study(seeds=2, report_at=[], figures={})
    raw["base"] = {**raw["base"], "rounds": 4, "chains": 3, "round_deadline": 10.0}
    raw["variants"] = raw["variants"][:1]
    study = load_study(raw)
    run_study(plan_study(study), tmp_path / "run", "run", say=lambda _m: None)
    run_study(plan_study(study), tmp_path / "sim", "simulate", say=lambda _m: None)
    for r in range(2):
        for node in ("0", "1", "2"):
            got = [
                np.load(
                    tmp_path
                    / mode
                    / "ring"
                    / "D-SGLD"
                    / f"seed-{r}"
                    / "samples"
                    / f"node-{node}.npz"
                )["samples"]
                for mode in ("run", "sim")
            ]
            assert got[0].tobytes() == got[1].tobytes(), (r, node)
    with open(tmp_path / "run" / "seeds.csv") as handle:
        assert [row["seed"] for row in csv.DictReader(handle)] == ["40", "41"]
