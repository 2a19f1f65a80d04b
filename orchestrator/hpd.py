"""[003] §5.2's HPD relative error: how well samples place the highest-posterior-density region.

For ``α ∈ (0, 1)`` the HPD region is ``C_α = {θ : U(θ) ≤ η_α}`` with ``U = −log π`` up to a
constant and ``η_α`` chosen so that ``C_α`` holds ``1 − α`` of the posterior mass. From
samples, ``η̂_α`` is the ``1 − α`` quantile of ``U`` over them; [003] reports
``|η̂_α − η_α| / η_α``.

``U`` here is the model's own potential over all the experiment's data (every node's
shard, :func:`starling.orchestrator.evaluation.reference_data`, the whole prior once), as the models
compute it: without normalising constants, so the figure compares runs of one Starling
model, not numbers across codes (an added constant changes it). ``η_α`` is exact where the
posterior is an exact Gaussian and ``U`` its quadratic (linear regression, the conjugate
Gaussian): ``U(θ) = U(μ) + ½ (θ − μ)ᵀ Σ⁻¹ (θ − μ)``, so ``η_α = U(μ) + ½ χ²_d(1 − α)``.
[003] estimates it with MALA for covtype; here it is reported only where it is exact.

Because ``U`` carries the log-likelihood of every observation, ``η_α`` is of the order of
the number of observations while an HPD level's sampling error is of the order of the
dimension, so the paper's ratio is tiny for any sampler on large data. Starling also
reports ``excess``: the same error relative to the region's height above the mode,
``|η̂_α − η_α| / (η_α − U(μ)) = |η̂_α − η_α| / (½ χ²_d(1 − α))``, which no constant in ``U``
changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from starling.node.models.base import Dataset, GaussianPosterior

__all__ = ["hpd_section", "true_level"]


def _potential(model, data: Sequence[Dataset]):
    pooled = Dataset(X=np.concatenate([d.X for d in data]), y=np.concatenate([d.y for d in data]))
    return model.local_potential(pooled, prior_share=1.0)


def true_level(model, data: Sequence[Dataset], posterior: GaussianPosterior, alpha: float) -> float:
    """``η_α`` of an exact Gaussian posterior whose ``U`` is its quadratic (see above)."""
    from scipy.stats import chi2

    potential = _potential(model, data)
    at_mean = float(potential.value(np.asarray(posterior.mean, dtype=float)[None])[0])
    return at_mean + 0.5 * float(chi2.ppf(1.0 - alpha, df=len(posterior.mean)))


def hpd_section(
    model,
    data: Sequence[Dataset],
    posterior: GaussianPosterior,
    series: Mapping[str, np.ndarray],
    window: int,
    alpha: float,
) -> dict:
    """``metrics.json``'s ``hpd``: the relative error of every series (node id or
    ``average`` -> samples (rounds, chains, d), the last ``window`` rounds pooled)."""
    from scipy.stats import chi2

    potential = _potential(model, data)
    eta = true_level(model, data, posterior, alpha)
    height = 0.5 * float(chi2.ppf(1.0 - alpha, df=len(posterior.mean)))
    errors: dict[str, float | None] = {}
    excess: dict[str, float | None] = {}
    for name, values in series.items():
        pooled = np.asarray(values[-window:], dtype=float).reshape(-1, values.shape[-1])
        if not np.all(np.isfinite(pooled)):
            errors[name] = excess[name] = None
            continue
        level = float(np.quantile(potential.value(pooled), 1.0 - alpha))
        errors[name] = abs(level - eta) / abs(eta)
        excess[name] = abs(level - eta) / height
    return {
        "alpha": alpha,
        "eta_true": eta,
        **_by_node(errors),
        "excess": _by_node(excess),
    }


def _by_node(values: Mapping[str, float | None]) -> dict:
    nodes = {n: e for n, e in values.items() if n != "average"}
    known = [e for e in nodes.values() if e is not None]
    return {
        "average": values.get("average"),
        "per_node": nodes,
        "node_mean": float(np.mean(known)) if known and len(known) == len(nodes) else None,
    }
