"""Bayesian linear regression with an exact Gaussian posterior ([000] §6.2, eq. 26-27).

Data: ``z ~ N(0, I_d)``, ``y = xᵀz + δ``, ``δ ~ N(0, ξ²)``; prior ``x ~ N(0, λ I)``.
The paper uses d = 2, ξ = 4, λ = 10.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from starling.node.models.base import (
    Dataset,
    GaussianPosterior,
    LocalPotential,
    check_scales,
    minibatch_rows,
)

__all__ = ["LinearRegression", "LinearRegressionPotential"]


@dataclass(frozen=True)
class LinearRegression:
    """Model parameters; ``true_x`` defaults to ``(1, -1, 1, ...)`` for synthetic data."""

    dim: int = 2
    noise_std: float = 4.0
    prior_var: float = 10.0
    true_x: tuple[float, ...] | None = None

    supervised = True

    @property
    def num_features(self) -> int:
        return self.dim

    def validate(self) -> None:
        if self.dim < 1:
            raise ValueError("dim: must be at least 1")
        check_scales(self, "noise_std", "prior_var")
        if self.true_x is not None and len(self.true_x) != self.dim:
            raise ValueError(f"true_x: needs {self.dim} values")

    def truth(self) -> np.ndarray:
        if self.true_x is not None:
            return np.asarray(self.true_x, dtype=float)
        return np.array([(-1.0) ** k for k in range(self.dim)])

    def synthesize(self, rng: np.random.Generator, size: int) -> Dataset:
        """Draw ``size`` points as in [000] eq. 26."""
        z = rng.standard_normal((size, self.dim))
        y = z @ self.truth() + self.noise_std * rng.standard_normal(size)
        return Dataset(X=z, y=y)

    def local_potential(
        self, data: Dataset, prior_share: float, batch_size: int = 0
    ) -> LinearRegressionPotential:
        return LinearRegressionPotential(self, data, prior_share, batch_size)

    def exact_posterior(self, shards: Sequence[Dataset]) -> GaussianPosterior:
        """Conjugate update over the pooled data: precision ``ZᵀZ/ξ² + I/λ``."""
        X = np.concatenate([s.X for s in shards])
        y = np.concatenate([s.y for s in shards])
        precision = X.T @ X / self.noise_std**2 + np.eye(self.dim) / self.prior_var
        cov = np.linalg.inv(precision)
        mean = cov @ (X.T @ y) / self.noise_std**2
        return GaussianPosterior(mean=mean, cov=(cov + cov.T) / 2)


class LinearRegressionPotential(LocalPotential):
    """``f_i(x) = ||y - Zx||² / (2ξ²) + s_i ||x||² / (2λ)`` ([000] eq. 27 with s_i = 1/N)."""

    def __init__(
        self, model: LinearRegression, data: Dataset, prior_share: float, batch_size: int = 0
    ):
        self.dim = model.dim
        self.num_points = len(data)
        self.prior_share = prior_share
        self._X = data.X
        self._y = data.y
        self._inv_noise = 1.0 / model.noise_std**2
        self._prior_precision = prior_share / model.prior_var
        self._batch = batch_size if 0 < batch_size < len(data) else 0
        # Cached sufficient statistics make the full gradient O(d²) per chain; with fewer
        # points than half the dimensions the data themselves are cheaper (O(n·d)).
        self._gram = data.X.T @ data.X
        self._zty = data.X.T @ data.y
        self._rows_cheaper = 2 * len(data) < model.dim

    def value(self, x: np.ndarray) -> np.ndarray:
        residual = self._y[None, :] - x @ self._X.T
        return 0.5 * self._inv_noise * np.sum(
            residual**2, axis=1
        ) + 0.5 * self._prior_precision * np.sum(x**2, axis=1)

    def grad(self, x: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        prior = self._prior_precision * x
        if self._batch and rng is not None:
            rows = minibatch_rows(rng, len(self._y), self._batch, x.shape[0])
            Xb, yb = self._X[rows], self._y[rows]  # (chains, b, d), (chains, b)
            residual = np.einsum("cbd,cd->cb", Xb, x) - yb
            scale = len(self._y) / self._batch
            return scale * self._inv_noise * np.einsum("cb,cbd->cd", residual, Xb) + prior
        if self._rows_cheaper:
            return self._inv_noise * ((x @ self._X.T - self._y[None, :]) @ self._X) + prior
        return self._inv_noise * (x @ self._gram - self._zty[None, :]) + prior

    def hessian(self, x: np.ndarray) -> np.ndarray:
        """Constant: ``ZᵀZ/ξ² + s_i I/λ``."""
        H = self._inv_noise * self._gram + self._prior_precision * np.eye(self.dim)
        return np.broadcast_to(H, (x.shape[0], self.dim, self.dim)).copy()

    def lipschitz(self) -> float:
        return float(self._inv_noise * self._gram_eigen[0][-1] + self._prior_precision)

    @functools.cached_property
    def _gram_eigen(self) -> tuple[np.ndarray, np.ndarray]:
        """``ZᵀZ = V diag(λ) Vᵀ``, computed once (O(d³)) on first use."""
        values, vectors = np.linalg.eigh(self._gram)
        return np.maximum(values, 0.0), vectors  # ZᵀZ is positive semi-definite

    def prox(self, v: np.ndarray, step: float, warm_start: np.ndarray) -> np.ndarray:
        """Closed form: ``(ZᵀZ/ξ² + s_i I/λ + I/step) x = Zᵀy/ξ² + v/step``, solved in the
        Gram matrix's eigenbasis (two products per call, whatever the step)."""
        values, vectors = self._gram_eigen
        scale = self._inv_noise * values + (self._prior_precision + 1.0 / step)
        rhs = self._inv_noise * self._zty[None, :] + v / step
        return ((rhs @ vectors) / scale) @ vectors.T
