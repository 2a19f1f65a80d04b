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
"""Multiply-adds one figure's error (or floor) may take: scoring a set of ``n`` draws in
``d`` dimensions costs about ``n d² + d³`` (the projection by the posterior's factor and
the eigenvalues). 50 sets fit up to about 1,000 draws at d = 300; at d = 1000 (0.15 s a
set on one core) the figure takes :data:`MIN_SETS`, and ``w2.se_sets`` says how many."""


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
    resampled; None with fewer than two chains or a set that is not finite."""
    window = np.asarray(window, dtype=float)
    rounds, chains, d = window.shape
    if chains < 2 or not np.all(np.isfinite(window)):
        return None
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xB007]))
    by_chain = np.transpose(window, (1, 0, 2))  # (chains, rounds, d)
    resamples = affordable_sets(resamples, rounds * chains, d)

    def sets():
        for count in _batches(resamples, rounds * chains * d * 8):
            picks = rng.integers(0, chains, size=(count, chains))
            yield by_chain[picks].reshape(count, chains * rounds, d)

    values = _scored(target, sets())
    values = values[np.isfinite(values)]
    return float(values.std(ddof=1)) if values.size >= 2 else None


def w2_floor(target: GaussianTarget, points: int, seed: int, draws: int = FLOOR_DRAWS) -> dict:
    """``{"points", "mean", "sd", "draws"}``: the W2 of ``points`` exact draws of the target,
    over ``draws`` seeded sets (module docstring)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xF100]))
    d = target.mean.shape[0]
    draws = affordable_sets(draws, points, d)
    root = _root(target.cov)

    def sets():
        for count in _batches(draws, points * d * 8):
            z = rng.standard_normal((count, points, d))
            yield target.mean + z @ root.T

    values = _scored(target, sets())
    return {
        "points": int(points),
        "mean": float(values.mean()),
        "sd": float(values.std(ddof=1)) if values.size > 1 else 0.0,
        "draws": int(values.size),
    }


def _root(cov: np.ndarray) -> np.ndarray:
    """``L`` with ``L Lᵀ = cov`` (symmetric root when ``cov`` is only semi-definite)."""
    cov = (np.asarray(cov, dtype=float) + np.asarray(cov, dtype=float).T) / 2.0
    try:
        return np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        values, vectors = np.linalg.eigh(cov)
        return (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T
