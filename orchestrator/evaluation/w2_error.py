"""How far a Gaussian-fit W2 can be trusted: its Monte Carlo error and its floor.

The W2 Starling reports against an exact Gaussian posterior is an *estimator*: the
2-Wasserstein distance from the Gaussian fitted to ``n`` draws (the sample mean and the
sample covariance of every chain over the last ``evaluation.window`` rounds, ``n = C ×
window``) to the posterior ([000] §6.2.3's metric;
:class:`~starling.orchestrator.evaluation.metrics.GaussianTarget`). Two figures say how
good it is:

* **Its standard error** (``w2.se``): a node's chains are independent of each other, so
  resampling them with replacement (:data:`BOOTSTRAP` times, each chain with all its window
  rounds) and fitting again shows how much the figure depends on which chains were drawn;
  the sd of those fits is the bootstrap standard error (Efron and Tibshirani 1993). The
  network average's chains are independent too (chain ``c`` of the average is the mean of
  every node's chain ``c``).
* **Its floor** (``w2.floor``): what ``n`` *exact* draws of the posterior score, the mean
  and sd over :data:`FLOOR_DRAWS` seeded sets. It is the estimator's bias at this chain
  count: even a perfect sampler scores it. For ``n`` independent draws in ``d`` dimensions
  with an isotropic posterior of variance ``σ²``, ``E W2² ≈ σ² (d / n + d (d + 1) /
  (4 (n − 1)))`` — the mean's error plus the covariance's, ``E‖Ŝ − Σ‖²_F / (4σ²)`` for
  a Wishart ``Ŝ`` — which the measured floor matches (``tests/orchestrator/evaluation/
  test_w2_error.py``). Draws of one chain in a window longer than one round are
  autocorrelated, so they count for fewer than ``n``: the floor is then a lower bound.
"""

from __future__ import annotations

import numpy as np

from starling.orchestrator.evaluation.metrics import GaussianTarget

__all__ = ["BOOTSTRAP", "FLOOR_DRAWS", "MIN_SETS", "affordable_sets", "bootstrap_se", "w2_floor"]

BOOTSTRAP = 50
"""Bootstrap resamples of the chains for one W2's standard error (fewer for large sets:
:func:`affordable_sets`)."""
FLOOR_DRAWS = 50
"""Sets of exact posterior draws for the floor (fewer for large sets, likewise)."""
MIN_SETS = 8
"""The fewest sets an error or a floor is ever estimated from: the sd of 8 draws is within
about 25 % of the true sd (its relative standard error is 1/sqrt(2 (8 − 1)) ≈ 0.27)."""
SET_BUDGET = 6e9
"""Multiply-adds one figure's error (or floor) may take, counted as scoring each set from
its points costs: about ``n d² + d³`` for ``n`` draws in ``d`` dimensions (the projection
by the posterior's factor and the eigenvalues). 50 sets fit up to about 1,000 draws at
d = 300; at d = 1000 the figure takes :data:`MIN_SETS`, and ``w2.se_sets`` says how many.
The resamples and the floor's draws are scored by cheaper routes when there are fewer
draws than dimensions (:func:`bootstrap_se`, :func:`w2_floor`), but their count is still
set by this cost, so that it, and the figure, do not depend on the route."""


def affordable_sets(requested: int, points: int, d: int) -> int:
    """How many of ``requested`` sets of ``points`` draws in ``d`` dimensions to score:
    all while they fit :data:`SET_BUDGET`, never fewer than :data:`MIN_SETS`."""
    cost = float(points) * d * d + float(d) ** 3
    return int(min(requested, max(MIN_SETS, SET_BUDGET // max(cost, 1.0))))


_BATCH_BYTES = 32 * 1024 * 1024
"""Resampled or exact sets are scored this many bytes at a time."""


def _scored(target: GaussianTarget, sets) -> np.ndarray:
    """W2 of every set the generator ``sets`` yields (each (b, n, d)), concatenated."""
    return np.concatenate([np.asarray(target.w2(batch), dtype=float) for batch in sets])


def _batches(total: int, one_set_bytes: int) -> list[int]:
    size = max(1, _BATCH_BYTES // max(one_set_bytes, 1))
    return [min(size, total - k) for k in range(0, total, size)]


def bootstrap_se(
    target: GaussianTarget, window: np.ndarray, seed: int, resamples: int = BOOTSTRAP
) -> float | None:
    """The bootstrap standard error of the W2 of ``window`` (rounds, chains, d), chains
    resampled; None with fewer than two chains or a set that is not finite.

    With fewer points than dimensions (:meth:`GaussianTarget.projects`) every resample is
    scored from one Gram matrix of the window's projected points (:func:`_resampled_w2`):
    the same figures as scoring each resampled set from its points, to rounding, for
    one projection instead of one per resample."""
    window = np.asarray(window, dtype=float)
    rounds, chains, d = window.shape
    if chains < 2 or not np.all(np.isfinite(window)):
        return None
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xB007]))
    by_chain = np.transpose(window, (1, 0, 2))  # (chains, rounds, d)
    resamples = affordable_sets(resamples, rounds * chains, d)
    # Drawn in the point route's batches, so that both routes resample the same chains.
    picks = (
        rng.integers(0, chains, size=(count, chains))
        for count in _batches(resamples, rounds * chains * d * 8)
    )
    if target.projects(rounds * chains):
        values = _resampled_w2(target, by_chain, np.concatenate(list(picks)))
    else:
        sets = (by_chain[chosen].reshape(len(chosen), chains * rounds, d) for chosen in picks)
        values = _scored(target, sets)
    values = values[np.isfinite(values)]
    return float(values.std(ddof=1)) if values.size >= 2 else None


def _resampled_w2(target: GaussianTarget, by_chain: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """W2 of each resample of whole chains, ``by_chain[picks[b]]``, without resampling a
    point: (chains, rounds, d) and (B, chains) -> (B,).

    A resample holds chain ``c`` ``w_c`` times, so its fitted Gaussian is the weighted one
    of the distinct chains' points: mean ``x̄_w = Σ w_r x_r / m`` and ``(m − 1) S1 =
    Σ w_r (x_r − x̄_w)(x_r − x̄_w)ᵀ`` (``m`` points in all, ``w_r`` the weight of point
    ``r``'s chain). With ``L`` the target's factor, ``Lᵀ S1 L`` has the eigenvalues of
    ``M / (m − 1)``, ``M = W^½ C K Cᵀ W^½``, where ``K = Z Zᵀ`` is the Gram matrix of the
    projected points ``Z = (X − x̄) L`` (computed once, for every resample), ``C`` takes
    away the weighted mean and ``W = diag(w)``. ``M`` annihilates ``√w``; the Householder
    reflection taking ``√(w / m)`` to ``−e₀`` moves that null direction to the first row
    and column, which are dropped, so no eigenvalue made of rounding is summed
    (:func:`~starling.orchestrator.evaluation.metrics._centred_rows` does the same for a
    point set). Each resample then costs an ``eigvalsh`` of its distinct points, about
    63 % of them: no ``n d²`` projection and no ``n² d`` Gram of its own."""
    chains, rounds, d = by_chain.shape
    points = by_chain.reshape(chains * rounds, d)
    centre = points.mean(axis=0)
    offsets = points - centre  # the Gram of centred points: no cancellation of large means
    projected = target.project(offsets)
    gram = projected @ projected.T
    norms = np.sum(np.square(offsets), axis=1)
    total = float(chains * rounds)
    values = np.empty(picks.shape[0])
    for index, pick in enumerate(picks):
        counts = np.bincount(pick, minlength=chains)
        distinct = np.flatnonzero(counts)
        rows = (distinct[:, None] * rounds + np.arange(rounds)).ravel()
        weights = np.repeat(counts[distinct], rounds).astype(float)
        shift = weights @ offsets[rows] / total  # x̄_w − x̄
        gap = float(np.sum(np.square(centre + shift - target.mean)))
        fitted_trace = (weights @ norms[rows] - total * float(shift @ shift)) / (total - 1.0)
        cross = _weighted_cross(gram[np.ix_(rows, rows)], weights, total)
        trace = max(fitted_trace + target.trace - 2.0 * cross, 0.0)
        values[index] = np.sqrt(max(gap + trace, 0.0))
    return values


def _weighted_cross(gram: np.ndarray, weights: np.ndarray, total: float) -> float:
    """``tr (Lᵀ S1 L)^½`` of the weighted set whose projected points have the Gram matrix
    ``gram`` (:func:`_resampled_w2`)."""
    pulled = gram @ weights / total  # K w / m
    centred = gram - pulled[:, None] - pulled[None, :] + float(weights @ pulled) / total
    root = np.sqrt(weights)
    moment = centred * root[:, None] * root[None, :]  # M
    householder = root / np.sqrt(total)
    householder[0] += 1.0  # v = √(w / m) + e₀: H √(w / m) = −e₀
    scale = 2.0 / float(householder @ householder)
    product = moment @ householder
    reflected = (
        moment
        - scale * np.outer(householder, product)
        - scale * np.outer(product, householder)
        + scale**2 * float(householder @ product) * np.outer(householder, householder)
    )[1:, 1:] / (total - 1.0)
    reflected = (reflected + reflected.T) / 2.0
    return float(np.sum(np.sqrt(np.clip(np.linalg.eigvalsh(reflected), 0.0, None))))


def w2_floor(target: GaussianTarget, points: int, seed: int, draws: int = FLOOR_DRAWS) -> dict:
    """``{"points", "mean", "sd", "draws"}``: the W2 of ``points`` exact draws of the target,
    over ``draws`` seeded sets (module docstring). The draws are made in the target's
    principal axes (:meth:`GaussianTarget.in_principal_axes`), where W2 has the same law
    and a draw and its projection cost ``n d`` rather than ``n d²``."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xF100]))
    d = target.mean.shape[0]
    draws = affordable_sets(draws, points, d)
    aligned = target.in_principal_axes()
    scales = aligned.axis_scales
    assert scales is not None

    def sets():
        for count in _batches(draws, points * d * 8):
            yield rng.standard_normal((count, points, d)) * scales

    values = _scored(aligned, sets())
    return {
        "points": int(points),
        "mean": float(values.mean()),
        "sd": float(values.std(ddof=1)) if values.size > 1 else 0.0,
        "draws": int(values.size),
    }
