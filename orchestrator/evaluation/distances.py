"""Sinkhorn and sliced-W2 distances of every node's samples (and the network-average
iterate's) to reference samples of the posterior
(:mod:`starling.orchestrator.evaluation.reference`).

Final figures pool the last ``evaluation.window`` rounds of every chain; the curve scores
up to ``evaluation.transport.curve_points`` evenly spaced rounds, each from the same
trailing window of rounds up to it (so window 1 is the chains' law at that round, as the
W2 curve). Every set is cut by a seeded subsample to ``transport.points`` points for the
final figures and to at most :data:`CURVE_SUBSAMPLE` for each curve point (a Sinkhorn solve
costs ~n²: ten rounds × six series at 200 points take about a second here).
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

__all__ = ["CURVE_SUBSAMPLE", "distance_section"]

CURVE_SUBSAMPLE = 200


def _distances(points: np.ndarray, reference: np.ndarray, settings, rng, size: int) -> dict | None:
    if not np.all(np.isfinite(points)):
        return None
    mine = subsample(points, size, rng)
    reference = subsample(reference, size, rng)
    return {
        "sinkhorn": sinkhorn_distance(mine, reference, settings.reg),
        "sliced_w2": sliced_w2(mine, reference, settings.projections, int(rng.integers(2**31))),
    }


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
    target = subsample(samples, settings.points, rng)
    final: dict[str, dict | None] = {}
    rows: list[dict] = []
    for name, values in series.items():
        final[name] = _distances(values[-window:], target, settings, rng, settings.points)
        small = min(settings.points, CURVE_SUBSAMPLE)
        for t in curve_rounds(values.shape[0], settings.curve_points):
            found = _distances(values[max(0, t - window + 1) : t + 1], target, settings, rng, small)
            if found is not None:
                rows.append({"round": int(t), "node": name, **found})
    nodes = {n: v for n, v in final.items() if n != "average"}
    # What a perfect sampler would score: two disjoint draws of the reference itself.
    floor = None
    if len(samples) >= 2 * min(settings.points, len(samples) // 2) > 0:
        half = min(settings.points, len(samples) // 2)
        order = rng.permutation(len(samples))
        floor = _distances(
            samples[order[:half]], samples[order[half : 2 * half]], settings, rng, half
        )
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
        "node_mean": (
            {k: float(np.mean([v[k] for v in known])) for k in ("sinkhorn", "sliced_w2")}
            if known and len(known) == len(nodes)
            else None
        ),
    }
    return section, rows
