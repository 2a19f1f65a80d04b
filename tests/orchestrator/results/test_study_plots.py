"""A study's per-cell plots are drawn on one reused figure (making a figure and its ticks
is a quarter of the time): each cell's PNG must be, pixel for pixel, the one a fresh
figure draws for that cell alone — no line, band, colour, legend or axis limit of an
earlier cell left behind."""

from __future__ import annotations

import numpy as np
import pytest

from starling.orchestrator.config.study import load_study
from starling.orchestrator.results.study_plots import plot_curves
from starling.orchestrator.results.study_tables import Curve

pytest.importorskip("matplotlib")


def _study(seeds: int):
    return load_study(
        {
            "study": "reuse",
            "seeds": seeds,
            "base": {
                "algorithm": "d-sgld",
                "model": {"name": "linear_regression", "params": {"dim": 2}},
                "data": {"source": "synthetic", "size": 20, "seed": 1},
                "topology": {"kind": "ring", "nodes": 3},
                "rounds": 30,
                "chains": 10,
            },
            "cells": [{"label": "wide"}, {"label": "narrow"}],
            "variants": [{"label": "A"}, {"label": "B"}, {"label": "C"}],
        }
    )


def _curves(seeds: int) -> list[Curve]:
    """Cell "wide" spans five decades over 60 iterations with three variants; "narrow"
    one decade over 20 with two: every limit and the legend differ between them."""
    rng = np.random.default_rng(3)
    out = []
    for cell, length, scale, variants in (("wide", 60, 1e4, "ABC"), ("narrow", 20, 10, "AB")):
        for variant in variants:
            for seed in range(seeds):
                decay = np.geomspace(scale, 1.0, length) * (1 + 0.2 * rng.random(length))
                out.append(Curve(cell, variant, seed, decay, 0.5 * decay))
    return out


@pytest.mark.parametrize("seeds", [1, 3])
def test_each_cell_is_drawn_as_on_a_fresh_figure(tmp_path, seeds):
    from matplotlib.image import imread

    study, curves = _study(seeds), _curves(seeds)
    for folder in ("together", "wide", "narrow"):
        (tmp_path / folder).mkdir()
    together = plot_curves(tmp_path / "together", study, curves)
    assert [p.name for p in together] == ["w2-wide.png", "w2-narrow.png"]
    for path in together:
        cell = path.stem.removeprefix("w2-")
        alone = plot_curves(tmp_path / cell, study, [c for c in curves if c.cell == cell])
        assert np.array_equal(imread(path), imread(alone[0])), f"{cell} differs"
