"""Sinkhorn and sliced-W2 figures carry their Monte Carlo error, and the error is honest: the
same figure computed again, on fresh subsamples, spreads as its stated standard error says
(``evaluation/distances.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from starling.orchestrator.evaluation.distances import FIGURES, repeated_distances


def test_repeated_figures_spread_as_their_standard_error_says():
    # A sampler's pooled draws (250 rounds × 50 chains, off the target: scaled 1.2, moved
    # 0.3) against 2,000 reference draws, 100 points a subsample, 10 repeats a figure. Over
    # 100 seeds the sd of the figure and the mean of its stated se agreed to 5-8 % (and to
    # 7-11 % over 200 other seeds). The sd of 100 values has a relative error of 7 %, the
    # mean of 100 se's (each from 9 degrees of freedom) of 2.5 %: [0.75, 1.33] is over
    # three of those errors either side.
    rng = np.random.default_rng(5)
    reference = rng.normal(size=(2000, 2))
    mine = rng.normal(size=(250, 50, 2)) * 1.2 + 0.3
    settings = SimpleNamespace(reg=0.1, projections=50)
    found = [
        repeated_distances(mine, reference, settings, np.random.default_rng(1000 + s), 100, 10)
        for s in range(100)
    ]
    for key in FIGURES:
        values = np.array([f[key] for f in found])
        errors = np.array([f[f"{key}_se"] for f in found])
        ratio = values.std(ddof=1) / errors.mean()
        assert 0.75 < ratio < 1.33, (key, ratio)


def test_one_repeat_has_no_error_and_a_set_off_the_floats_no_figure():
    rng = np.random.default_rng(6)
    settings = SimpleNamespace(reg=0.1, projections=20)
    reference = rng.normal(size=(300, 2))
    one = repeated_distances(rng.normal(size=(50, 2)), reference, settings, rng, 50, 1)
    assert one is not None and one["repeats"] == 1 and one["sinkhorn_se"] is None
    broken = np.full((10, 2), np.nan)
    assert repeated_distances(broken, reference, settings, rng, 50, 5) is None
