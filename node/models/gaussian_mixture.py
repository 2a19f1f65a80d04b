"""Gaussian mixture with tied means (Welling & Teh 2011, §5.1; [004] §5.1; [002] §5.3).

``θ1 ~ N(0, σ1²)``, ``θ2 ~ N(0, σ2²)``, ``x ~ ½ N(θ1, σx²) + ½ N(θ1 + θ2, σx²)`` with
``σ1² = 10``, ``σ2² = 1``, ``σx² = 2``; data drawn with ``θ = (0, 1)``. [004] uses 100 points
split over the agents (20 each on 5 agents) and [002] 800 over 4. The posterior is bimodal,
with modes near ``(0, 1)`` and ``(1, -1)`` (the two labellings of the components), so it has
no exact Gaussian form: :meth:`GaussianMixture.reference_posterior` tabulates the normalised
density on a grid for distance computations ([004] measures a Sinkhorn distance).

Node ``i``: ``f_i(θ) = -Σ_l log(½ N(x_l | θ1, σx²) + ½ N(x_l | θ1 + θ2, σx²))
+ s_i (θ1²/(2σ1²) + θ2²/(2σ2²))``. ``f_i`` is not convex: the default prox (L-BFGS) returns
a local minimiser near its warm start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from starling.node.models.base import (
    Dataset,
    GridPosterior,
    LocalPotential,
    check_scales,
    minibatch_rows,
)

__all__ = ["GaussianMixture", "GaussianMixturePotential"]

_LOG_HALF_NORM = np.log(0.5) - 0.5 * np.log(2.0 * np.pi)


@dataclass(frozen=True)
class GaussianMixture:
    obs_var: float = 2.0
    """``σx²``."""
    prior_var1: float = 10.0
    """``σ1²``, prior variance of ``θ1``."""
    prior_var2: float = 1.0
    """``σ2²``, prior variance of ``θ2``."""
    true_theta: tuple[float, float] = (0.0, 1.0)
    """``θ`` the synthetic observations are drawn with."""

    dim = 2
    num_features = 1
    supervised = False
    prox_by_newton = True
    """The default prox is a damped Newton solve (see :class:`LogisticRegression`)."""

    def validate(self) -> None:
        check_scales(self, "obs_var", "prior_var1", "prior_var2")
        if len(self.true_theta) != 2:
            raise ValueError("true_theta: must have two entries (θ1, θ2)")

    def synthesize(self, rng: np.random.Generator, size: int) -> Dataset:
        theta1, theta2 = self.true_theta
        second = rng.random(size) < 0.5
        x = theta1 + theta2 * second + np.sqrt(self.obs_var) * rng.standard_normal(size)
        return Dataset(X=x[:, None], y=np.zeros(size))

    def local_potential(
        self, data: Dataset, prior_share: float, batch_size: int = 0
    ) -> GaussianMixturePotential:
        return GaussianMixturePotential(self, data, prior_share, batch_size)

    def log_posterior(self, theta: np.ndarray, observations: np.ndarray) -> np.ndarray:
        """Unnormalised ``log π(θ | x)`` for points ``theta`` (m, 2): ``-Σ_i f_i`` with s = 1."""
        potential = GaussianMixturePotential(
            self, Dataset(X=np.asarray(observations, float).reshape(-1, 1), y=np.zeros(0)), 1.0
        )
        return -potential.value(np.asarray(theta, dtype=float))

    def reference_posterior(
        self,
        shards: Sequence[Dataset],
        points: int = 301,
        bounds: tuple[tuple[float, float], tuple[float, float]] | None = None,
    ) -> GridPosterior:
        """The posterior given all shards, normalised on a ``points × points`` grid.

        Without ``bounds`` the window is found from the data: a coarse pass over
        ``[-20, 20]²`` keeps the region where the density exceeds ``1e-12`` of its peak
        (essentially all of the mass), widened by two coarse cells on each side.
        """
        observations = np.concatenate([np.asarray(s.X, float).reshape(-1) for s in shards])
        if bounds is None:
            coarse = np.linspace(-20.0, 20.0, 161)
            log_p = self._grid_log_posterior((coarse, coarse), observations)
            inside = np.argwhere(log_p >= log_p.max() + np.log(1e-12))
            cell = coarse[1] - coarse[0]
            lo = coarse[inside.min(axis=0)] - 2 * cell
            hi = coarse[inside.max(axis=0)] + 2 * cell
            bounds = ((lo[0], hi[0]), (lo[1], hi[1]))

        def axis(lo: float, hi: float) -> np.ndarray:
            return lo + (np.arange(points) + 0.5) * (hi - lo) / points

        axes = (axis(*bounds[0]), axis(*bounds[1]))
        log_p = self._grid_log_posterior(axes, observations)
        cell_volume = float(np.prod([a[1] - a[0] for a in axes]))
        density = np.exp(log_p - logsumexp(log_p)) / cell_volume
        return GridPosterior(axes=axes, density=density)

    def _grid_log_posterior(
        self, axes: tuple[np.ndarray, np.ndarray], observations: np.ndarray
    ) -> np.ndarray:
        mesh = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 2)
        # Blocks of grid points keep the (points, n, 2) work array near 2·10⁶ numbers.
        blocks = max(1, int(np.ceil(len(mesh) * max(len(observations), 1) / 1e6)))
        values = np.concatenate(
            [self.log_posterior(block, observations) for block in np.array_split(mesh, blocks)]
        )
        return values.reshape(len(axes[0]), len(axes[1]))


class GaussianMixturePotential(LocalPotential):
    """``f_i`` above, with a log-sum-exp over the two components for stability."""

    def __init__(
        self, model: GaussianMixture, data: Dataset, prior_share: float, batch_size: int = 0
    ):
        self.dim = 2
        self._x = np.asarray(data.X, dtype=float).reshape(-1)
        self.num_points = len(self._x)
        self.prior_share = prior_share
        self._obs_var = model.obs_var
        self._prior_precision = prior_share / np.array([model.prior_var1, model.prior_var2])
        self._batch = batch_size if 0 < batch_size < self.num_points else 0

    def _components(self, theta: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Log of ``½ N(x | μ_k, σx²)`` for k = 1, 2, and the residuals ``x - μ_k``.

        ``x`` is (n,) shared by all chains or (chains, b) per chain; the outputs are
        (chains, n, 2).
        """
        means = np.stack([theta[:, 0], theta[:, 0] + theta[:, 1]], axis=-1)  # (chains, 2)
        x = x[None, :] if x.ndim == 1 else x
        residual = x[:, :, None] - means[:, None, :]
        log_terms = _LOG_HALF_NORM - 0.5 * np.log(self._obs_var) - 0.5 * residual**2 / self._obs_var
        return log_terms, residual

    def value(self, x: np.ndarray) -> np.ndarray:
        log_terms, _ = self._components(x, self._x)
        nll = -np.sum(np.logaddexp(log_terms[..., 0], log_terms[..., 1]), axis=-1)
        return nll + 0.5 * np.sum(self._prior_precision * x**2, axis=1)

    def grad(self, x: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        scale = 1.0
        observations = self._x
        if self._batch and rng is not None:
            observations = self._x[minibatch_rows(rng, self.num_points, self._batch, x.shape[0])]
            scale = self.num_points / self._batch
        log_terms, residual = self._components(x, observations)
        # Responsibility-weighted residuals: ∂/∂μ_k of log Σ_k = r_k (x - μ_k)/σx².
        resp = np.exp(log_terms - logsumexp(log_terms, axis=-1, keepdims=True))
        weighted = resp * residual / self._obs_var  # (chains, n, 2)
        d_mu = -scale * weighted.sum(axis=1)  # ∂(-log lik)/∂μ_k
        # μ1 = θ1 and μ2 = θ1 + θ2.
        d_theta = np.stack([d_mu[:, 0] + d_mu[:, 1], d_mu[:, 1]], axis=-1)
        return d_theta + self._prior_precision * x

    def hessian(self, x: np.ndarray) -> np.ndarray:
        """``Σ_l [E_r(a_k a_kᵀ)/σx² - Cov_r(u_k)] + s_i diag(1/σ1², 1/σ2²)``.

        With ``a_1 = (1, 0)``, ``a_2 = (1, 1)`` (``μ_k = a_kᵀθ``), responsibilities ``r_k`` and
        ``u_k = (x - μ_k) a_k / σx²`` the gradient of ``log N(x | μ_k, σx²)``. It can be
        indefinite; the Newton prox then shifts it (a local minimiser near the warm start).
        """
        log_terms, residual = self._components(x, self._x)
        resp = np.exp(log_terms - logsumexp(log_terms, axis=-1, keepdims=True))  # (C, n, 2)
        a = np.array([[1.0, 0.0], [1.0, 1.0]])  # rows a_k
        u = (residual / self._obs_var)[..., None] * a  # (C, n, 2 comps, 2 dims)
        mean_u = np.einsum("cnk,cnkd->cnd", resp, u)
        second = np.einsum("cnk,cnkd,cnke->cde", resp, u, u) - np.einsum(
            "cnd,cne->cde", mean_u, mean_u
        )
        curvature = np.einsum("cnk,kd,ke->cde", resp, a, a) / self._obs_var
        return curvature - second + np.diag(self._prior_precision)

    def lipschitz(self) -> float:
        """A bound on the largest Hessian eigenvalue: ``2 n_i / σx² + max_k s_i / σk²``.

        ``-log`` of a mixture has Hessian ``E_r[∇²(-log comp)] - Cov_r[∇ log comp]``; the
        first term is at most ``(1,1)(1,1)ᵀ/σx²`` per point (eigenvalue 2/σx²) and the second
        only lowers it. The Hessian can be negative (the potential is not convex).
        """
        return float(2.0 * self.num_points / self._obs_var + np.max(self._prior_precision))
