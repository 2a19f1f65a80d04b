"""[003] §5.2's HPD relative error: how well samples place the highest-posterior-density region.

For ``α ∈ (0, 1)`` the HPD region is ``C_α = {θ : U(θ) ≤ η_α}`` with ``U = −log π`` up to a
constant and ``η_α`` chosen so that ``C_α`` holds ``1 − α`` of the posterior mass. From
samples, ``η̂_α`` is the ``1 − α`` quantile of ``U`` over them; [003] reports
``|η̂_α − η_α| / η_α``.

``U`` here is the model's own potential over all the experiment's data (every node's
shard, :func:`starling.orchestrator.evaluation.evaluate.reference_data`, the whole prior once), as
the models compute it: without normalising constants, so the figure compares runs of one Starling
model, not numbers across codes (an added constant changes it).

Where ``η_α`` comes from (``eta_source`` in the section):

* ``exact`` — the posterior is an exact Gaussian and ``U`` its quadratic (linear
  regression, the conjugate Gaussian): ``U(θ) = U(μ) + ½ (θ − μ)ᵀ Σ⁻¹ (θ − μ)``, so
  ``η_α = U(μ) + ½ χ²_d(1 − α)``; the mode is μ.
* ``mala`` (or ``grid``) — no closed form (logistic regression): as [003] §5.2 does, ``η_α``
  is the ``1 − α`` quantile of ``U`` over the reference samples of the full posterior
  (:mod:`starling.orchestrator.evaluation.reference`, ``evaluation.reference``). Its Monte-Carlo
  error
  ``eta_se`` is a batch-means standard error: the reference samples, in the order the chains
  produced them, are cut into :data:`BATCHES` consecutive stretches of time (every chain in
  each), the quantile is taken in each, and ``eta_se = sd(batch quantiles) / √BATCHES``.
  That holds when a stretch is longer than the chains' autocorrelation; a reference too
  short for that shows it as batch quantiles that disagree, i.e. a large ``eta_se``. The
  mode is a MAP found by L-BFGS on ``U`` from the reference sample of lowest ``U``
  (``mode_potential`` is ``U`` there; never above the best reference point's).

Because ``U`` carries the log-likelihood of every observation, ``η_α`` is of the order of
the number of observations while an HPD level's sampling error is of the order of the
dimension, so the paper's ratio is tiny for any sampler on large data. Starling also
reports ``excess``: the same error relative to the region's height above the mode,
``|η̂_α − η_α| / (η_α − U(mode))`` (``½ χ²_d(1 − α)`` in the Gaussian case), which no
constant in ``U`` changes. ``eta_se`` is reported on both scales (``relative_se``,
``excess_se``) so a figure can be read against the reference's own error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from starling.node.models.base import Dataset, GaussianPosterior
from starling.orchestrator.evaluation.predictive import curve_rounds

__all__ = ["BATCHES", "POINTS", "hpd_section", "mode_level", "reference_level", "true_level"]

BATCHES = 20
"""Consecutive batches of the reference for the batch-means error of its ``η_α``."""

CURVE_POINTS = 12_500
"""At most about this many samples of a series enter its curve (``hpd_curve.csv``), all
its points together: half the figure's own budget, on a coarser grid of rounds."""

POINTS = 25_000
"""At most about this many samples of a series enter its ``η̂_α``: beyond it, every k-th
round of the window (all its chains). ``U`` over all the data costs n·d per sample, and a
long window of autocorrelated rounds holds little more information than its thinning."""


def _potential(model, data: Sequence[Dataset]):
    pooled = Dataset(X=np.concatenate([d.X for d in data]), y=np.concatenate([d.y for d in data]))
    return model.local_potential(pooled, prior_share=1.0)


def _levels(potential, samples: np.ndarray, chunk: int = 1000) -> np.ndarray:
    """``U`` at every sample, ``chunk`` at a time: one call holds samples × n margins (1.3 GB
    for 20,000 samples of 8,000 rows at once)."""
    parts = [potential.value(samples[k : k + chunk]) for k in range(0, len(samples), chunk)]
    return np.concatenate(parts) if parts else np.empty(0)


def true_level(model, data: Sequence[Dataset], posterior: GaussianPosterior, alpha: float) -> float:
    """``η_α`` of an exact Gaussian posterior whose ``U`` is its quadratic (see above)."""
    from scipy.stats import chi2

    potential = _potential(model, data)
    at_mean = float(potential.value(np.asarray(posterior.mean, dtype=float)[None])[0])
    return at_mean + 0.5 * float(chi2.ppf(1.0 - alpha, df=len(posterior.mean)))


def reference_level(
    levels: np.ndarray, alpha: float, batches: int = BATCHES
) -> tuple[float, float]:
    """``(η̂_α, batch-means standard error)`` from ``U`` at reference samples in the order
    they were drawn (module docstring)."""
    levels = np.asarray(levels, dtype=float)
    eta = float(np.quantile(levels, 1.0 - alpha))
    parts = [float(np.quantile(p, 1.0 - alpha)) for p in np.array_split(levels, batches)]
    return eta, float(np.std(parts, ddof=1) / np.sqrt(batches))


def mode_level(potential, samples: np.ndarray, levels: np.ndarray) -> float:
    """``U`` at a MAP: L-BFGS from the sample of lowest ``U`` (no higher than that sample)."""
    from scipy.optimize import minimize

    start = np.asarray(samples[int(np.argmin(levels))], dtype=float)

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        return float(potential.value(x[None])[0]), np.asarray(potential.grad(x[None])[0])

    found = minimize(objective, start, jac=True, method="L-BFGS-B")
    return float(min(found.fun, np.min(levels)))


def hpd_section(
    model,
    data: Sequence[Dataset],
    posterior: GaussianPosterior | None,
    series: Mapping[str, np.ndarray],
    window: int,
    alpha: float,
    reference: tuple[np.ndarray, dict] | None = None,
    curve_points: int = 100,
) -> tuple[dict, list[dict]]:
    """``metrics.json``'s ``hpd`` and the rows of ``hpd_curve.csv``.

    The section holds the relative error of every series (node id or ``average`` ->
    samples (rounds, chains, d), the last ``window`` rounds pooled, thinned to about
    :data:`POINTS` samples). The curve is [003] Fig. 3's error "during the sampling
    procedure": at up to ``curve_points`` rounds t over the run, the error of ``η̂_α`` had
    the run stopped at t, with the same share of its rounds kept (:func:`_curve`); its
    last row is the section's figure.

    ``η_α`` is exact when ``posterior`` is given, else estimated from ``reference``
    (:func:`starling.orchestrator.evaluation.reference.reference_samples`'s ``(samples,
    description)``).
    """
    potential = _potential(model, data)
    if posterior is not None:
        from scipy.stats import chi2

        eta = true_level(model, data, posterior, alpha)
        height = 0.5 * float(chi2.ppf(1.0 - alpha, df=len(posterior.mean)))
        source: dict = {"eta_source": "exact", "eta_se": 0.0}
    elif reference is not None:
        samples, described = reference
        levels = _levels(potential, np.asarray(samples, dtype=float))
        eta, se = reference_level(levels, alpha)
        height = eta - mode_level(potential, samples, levels)
        source = {
            "eta_source": described.get("method", "reference"),
            "eta_se": se,
            "reference": described,
        }
    else:
        raise ValueError("hpd_section: needs an exact posterior or reference samples")
    errors: dict[str, float | None] = {}
    excess: dict[str, float | None] = {}
    rows: list[dict] = []
    for name, values in series.items():
        start = max(values.shape[0] - window, 0)
        recent = values[start:]
        every = max(1, -(-recent.shape[0] * recent.shape[1] // POINTS))  # ceil
        thinned = np.asarray(recent[::every], dtype=float)
        pooled = thinned.reshape(-1, values.shape[-1])
        level: float | None = None
        if np.all(np.isfinite(pooled)):
            level = float(np.quantile(_levels(potential, pooled), 1.0 - alpha))
        errors[name] = None if level is None else abs(level - eta) / abs(eta)
        excess[name] = None if level is None else abs(level - eta) / height
        rows += _curve(
            name, values, potential, (eta, height, alpha), window, every, curve_points, level
        )
    section = {
        "alpha": alpha,
        "eta_true": eta,
        "mode_potential": eta - height,
        **source,
        "relative_se": source["eta_se"] / abs(eta),
        "excess_se": source["eta_se"] / height,
        **_by_node(errors),
        "excess": _by_node(excess),
    }
    return section, rows


def _curve(
    name: str,
    values: np.ndarray,
    potential,
    truth: tuple[float, float, float],
    window: int,
    every: int,
    points: int,
    final: float | None,
) -> list[dict]:
    """The rows of ``name`` in ``hpd_curve.csv``: at up to ``points`` rounds t spread over
    the run, the error the run would have reported had it stopped at t, its samples' last
    ``window / rounds`` share kept (rounds ``t − ⌈(t + 1)·window/rounds⌉ + 1 .. t``).

    ``U`` is evaluated on a grid of rounds, every ``stride``-th (a multiple of the window's
    own thinning ``every``, so the curve costs at most :data:`CURVE_POINTS` samples more);
    the last row is ``final``, the section's own figure. A stretch holding a round whose
    samples are not finite (the series diverged there) has no row, as that final figure
    has none (``final`` None): a diverged series keeps its rows from before."""
    eta, height, alpha = truth
    total, chains = values.shape[0], values.shape[1]
    stride = every * max(1, -(-total * chains // (every * CURVE_POINTS)))  # ceil
    start = max(total - window, 0)
    grid = np.arange(start % stride, total, stride)
    finite = np.all(np.isfinite(values[grid]).reshape(len(grid), -1), axis=1)
    levels = np.full((len(grid), chains), np.nan)
    if finite.any():
        computed = _levels(potential, values[grid[finite]].reshape(-1, values.shape[-1]))
        levels[finite] = computed.reshape(-1, chains)
    rows = []
    for t in curve_rounds(total, points):
        kept = -(-(int(t) + 1) * window // total)  # ceil
        stretch = (grid > t - kept) & (grid <= t)
        if not finite[stretch].all():
            continue  # the series diverged within this stretch
        if int(t) == total - 1:
            if final is None:
                continue
            level = final
        elif stretch.any():
            level = float(np.quantile(levels[stretch], 1.0 - alpha))
        else:
            continue  # no grid round in this stretch yet
        rows.append(
            {
                "round": int(t),
                "node": name,
                "relative_error": abs(level - eta) / abs(eta),
                "excess_error": abs(level - eta) / height,
            }
        )
    return rows


def _by_node(values: Mapping[str, float | None]) -> dict:
    nodes = {n: e for n, e in values.items() if n != "average"}
    known = [e for e in nodes.values() if e is not None]
    return {
        "average": values.get("average"),
        "per_node": nodes,
        "node_mean": float(np.mean(known)) if known and len(known) == len(nodes) else None,
    }
