"""Sinkhorn and sliced-W2 distances of every node's samples (and the network-average
iterate's) to reference samples of the posterior
(:mod:`starling.orchestrator.evaluation.reference`).

Final figures pool the last ``evaluation.window`` rounds of every chain; the curve scores
up to ``evaluation.transport.curve_points`` evenly spaced rounds, each from the same
trailing window of rounds up to it (so window 1 is the chains' law at that round, as the
W2 curve). Every set is cut by a seeded subsample to ``transport.points`` points for the
final figures and to at most :data:`CURVE_SUBSAMPLE` for each curve point (a Sinkhorn solve
costs ~n²: ten rounds × six series at 200 points take about a second here).

**Each final figure carries its Monte Carlo error.** A distance between two subsamples
moves with the subsamples drawn (±0.04 for a 500-point Sinkhorn on [004]'s mixture), so
a final figure is the mean over ``transport.repeats`` (default 10) independent pairs of
subsamples — a fresh ``points`` of the series' pooled draws and a fresh ``points`` of the
reference each time — and ``<figure>_se`` is its standard error, the sd over the repeats
over √repeats. It is the error from which points were compared (of the series and of the
reference); the sampler's own randomness, another seed, is what a study's interval over
seeds adds. The mean over repeats estimates the distance *at ``points`` points*: an
entropic or sliced distance between finite sets has a positive bias that shrinks with the
points (``reference_floor``, two disjoint halves of the reference, scored the same way,
shows it), so figures are compared at equal ``points``. Cost: ``repeats`` solves per series
instead of one, ~0.05 s each at 500 points here (``docs/guides/data-and-evaluation.md``
gives the measured totals). The curve's points are single subsamples (their error is
about the final figure's ``se`` × √repeats × √(points / 200)).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from starling.orchestrator.evaluation.optimal_transport import (
    sinkhorn_distance,
    sliced_w2,
    subsample,
)
from starling.orchestrator.evaluation.predictive import curve_rounds

__all__ = ["CURVE_SUBSAMPLE", "FIGURES", "distance_section", "repeated_distances"]

CURVE_SUBSAMPLE = 200
FIGURES = ("sinkhorn", "sliced_w2")


def _distances(points: np.ndarray, reference: np.ndarray, settings, rng, size: int) -> dict | None:
    if not np.all(np.isfinite(points)):
        return None
    mine = subsample(points, size, rng)
    reference = subsample(reference, size, rng)
    return {
        "sinkhorn": sinkhorn_distance(mine, reference, settings.reg),
        "sliced_w2": sliced_w2(mine, reference, settings.projections, int(rng.integers(2**31))),
    }


def repeated_distances(
    points: np.ndarray, reference: np.ndarray, settings, rng, size: int, repeats: int
) -> dict | None:
    """Each figure of :data:`FIGURES` as the mean over ``repeats`` fresh pairs of
    subsamples (``size`` points of ``points`` and of ``reference``), with ``<figure>_se``,
    the standard error of that mean (None for one repeat); None if ``points`` left the
    floats."""
    if not np.all(np.isfinite(points)):
        return None
    found = [_distances(points, reference, settings, rng, size) for _ in range(max(repeats, 1))]
    return _mean_and_se([f for f in found if f is not None])


def _mean_and_se(found: list[dict]) -> dict:
    """The mean of each figure over ``found`` (one dict a repeat) and its standard error."""
    out: dict[str, float | int | None] = {"repeats": len(found)}
    for key in FIGURES:
        values = np.array([f[key] for f in found], dtype=float)
        out[key] = float(values.mean())
        out[f"{key}_se"] = (
            float(values.std(ddof=1) / np.sqrt(values.size)) if values.size > 1 else None
        )
    return out


def distance_section(
    series: Mapping[str, np.ndarray],
    reference: tuple[np.ndarray, dict],
    window: int,
    settings,
    seed: int,
) -> tuple[dict, list[dict]]:
    """``metrics.json``'s ``distances`` and the curve's rows; ``series``: name -> samples
    (rounds, chains, d), ``"average"`` the network-average iterate."""
    samples, described = reference
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5D15]))
    repeats = settings.repeats
    final: dict[str, dict | None] = {}
    rows: list[dict] = []
    for name, values in series.items():
        final[name] = repeated_distances(
            values[-window:], samples, settings, rng, settings.points, repeats
        )
        small = min(settings.points, CURVE_SUBSAMPLE)
        target = subsample(samples, small, rng)
        for t in curve_rounds(values.shape[0], settings.curve_points):
            found = _distances(values[max(0, t - window + 1) : t + 1], target, settings, rng, small)
            if found is not None:
                rows.append({"round": int(t), "node": name, **found})
    nodes = {n: v for n, v in final.items() if n != "average"}
    # What a perfect sampler would score: two disjoint draws of the reference itself, as
    # many times over as every figure (a fresh split of the reference each time).
    floor = None
    half = min(settings.points, len(samples) // 2)
    if half > 0:
        splits = [rng.permutation(len(samples)) for _ in range(max(repeats, 1))]
        pairs = [(samples[o[:half]], samples[o[half : 2 * half]]) for o in splits]
        scored = [_distances(a, b, settings, rng, half) for a, b in pairs]
        floor = _mean_and_se([f for f in scored if f is not None])
    known = [v for v in nodes.values() if v is not None]
    section = {
        "reference": {**described, "size": len(samples)},
        "window": window,
        "points": settings.points,
        "reg": settings.reg,
        "projections": settings.projections,
        "metric": "Sinkhorn: <P_eps, M> with M the Euclidean distance (Cuturi 2013); sliced W2",
        "reference_floor": floor,
        "average": final.get("average"),
        "per_node": nodes,
        "repeats": repeats,
        "node_mean": _node_mean(known) if known and len(known) == len(nodes) else None,
    }
    return section, rows


def _node_mean(known: list[dict]) -> dict:
    """Each figure's mean over nodes, with the standard error of that mean (each node's
    repeats are independent of the others')."""
    out: dict = {}
    for key in FIGURES:
        out[key] = float(np.mean([v[key] for v in known]))
        errors = [v.get(f"{key}_se") for v in known]
        known_errors = [float(e) for e in errors if e is not None]
        out[f"{key}_se"] = (
            float(np.sqrt(np.sum(np.square(known_errors))) / len(known))
            if len(known_errors) == len(errors)
            else None
        )
    return out
