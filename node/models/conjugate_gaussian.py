"""Conjugate Gaussian mean ([003] §5.1, the DG-LMC toy example).

``π(θ | y_{1:n}) ∝ N(θ | 0, Σ0) Π_j N(y_j | θ, Σ1)`` with known positive definite ``Σ0``
(prior) and ``Σ1`` (noise). The paper uses d = 2 and n = 20,000 observations over b = 10
workers (2,000 each: ``data.size: 2000``) but does not print ``Σ0``, ``Σ1``; the defaults
here are those of the authors' public notebook for that figure: ``Σ0 = ½(I + J)``,
``Σ1 = 1.5 I - ½ J`` (``J`` all ones) and data drawn around ``θ = 0``. ``1.5 I - ½J`` is
positive definite only for d ≤ 2, so for larger d the noise covariance defaults to ``I``.

Node ``i``: ``f_i(θ) = ½ Σ_j (y_j - θ)ᵀ Σ1⁻¹ (y_j - θ) + s_i ½ θᵀ Σ0⁻¹ θ``. The posterior
is exactly Gaussian: precision ``Σ0⁻¹ + n Σ1⁻¹``, mean ``cov · Σ1⁻¹ Σ_j y_j``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from starling.node.models.base import Dataset, GaussianPosterior, LocalPotential, minibatch_rows

__all__ = ["ConjugateGaussian", "ConjugateGaussianPotential"]


def _matrix(rows: tuple[tuple[float, ...], ...] | None, default: np.ndarray) -> np.ndarray:
    return default if rows is None else np.asarray(rows, dtype=float)


@dataclass(frozen=True)
class ConjugateGaussian:
    dim: int = 2
    prior_cov: tuple[tuple[float, ...], ...] | None = None
    """``Σ0``; default ``½(I + J)``."""
    noise_cov: tuple[tuple[float, ...], ...] | None = None
    """``Σ1``; default ``1.5 I - ½ J`` for d ≤ 2, else ``I``."""
    true_theta: tuple[float, ...] | None = None
    """The mean the synthetic data are drawn around; default 0."""

    supervised = False

    @property
    def num_features(self) -> int:
        return self.dim

    def sigma0(self) -> np.ndarray:
        eye, ones = np.eye(self.dim), np.ones((self.dim, self.dim))
        return _matrix(self.prior_cov, 0.5 * (eye + ones))

    def sigma1(self) -> np.ndarray:
        eye, ones = np.eye(self.dim), np.ones((self.dim, self.dim))
        return _matrix(self.noise_cov, 1.5 * eye - 0.5 * ones if self.dim <= 2 else eye)

    def truth(self) -> np.ndarray:
        if self.true_theta is None:
            return np.zeros(self.dim)
        return np.asarray(self.true_theta, dtype=float)

    def validate(self) -> None:
        if self.dim < 1:
            raise ValueError("dim: must be at least 1")
        for name, matrix in (("prior_cov", self.prior_cov), ("noise_cov", self.noise_cov)):
            if matrix is None:
                continue
            if len(matrix) != self.dim or any(len(row) != self.dim for row in matrix):
                raise ValueError(f"{name}: must be a {self.dim}×{self.dim} matrix")
            m = np.asarray(matrix, dtype=float)
            if not np.allclose(m, m.T) or np.linalg.eigvalsh(m)[0] <= 0:
                raise ValueError(f"{name}: must be symmetric positive definite")
        if self.true_theta is not None and len(self.true_theta) != self.dim:
            raise ValueError(f"true_theta: has {len(self.true_theta)} entries, dim is {self.dim}")

    def synthesize(self, rng: np.random.Generator, size: int) -> Dataset:
        """``y_j ~ N(θ_true, Σ1)``, stored as rows of ``X`` (there are no targets)."""
        root = np.linalg.cholesky(self.sigma1())
        Y = self.truth() + rng.standard_normal((size, self.dim)) @ root.T
        return Dataset(X=Y, y=np.zeros(size))

    def local_potential(
        self, data: Dataset, prior_share: float, batch_size: int = 0
    ) -> ConjugateGaussianPotential:
        return ConjugateGaussianPotential(self, data, prior_share, batch_size)

    def exact_posterior(self, shards: Sequence[Dataset]) -> GaussianPosterior:
        Y = np.concatenate([s.X for s in shards])
        noise_precision = np.linalg.inv(self.sigma1())
        precision = np.linalg.inv(self.sigma0()) + len(Y) * noise_precision
        cov = np.linalg.inv(precision)
        mean = cov @ noise_precision @ Y.sum(axis=0)
        return GaussianPosterior(mean=mean, cov=(cov + cov.T) / 2)


class ConjugateGaussianPotential(LocalPotential):
    """``f_i`` above; gradient, Hessian and prox in closed form from ``n_i`` and ``Σ_j y_j``."""

    def __init__(
        self, model: ConjugateGaussian, data: Dataset, prior_share: float, batch_size: int = 0
    ):
        self.dim = model.dim
        self._Y = np.asarray(data.X, dtype=float)
        self.num_points = len(self._Y)
        self.prior_share = prior_share
        self._noise_precision = np.linalg.inv(model.sigma1())
        self._prior_precision = prior_share * np.linalg.inv(model.sigma0())
        self._sum = self._Y.sum(axis=0)
        self._batch = batch_size if 0 < batch_size < self.num_points else 0
        self._H = self.num_points * self._noise_precision + self._prior_precision

    def value(self, x: np.ndarray) -> np.ndarray:
        # Σ_j (y_j - x)ᵀP(y_j - x) = Σ_j y_jᵀPy_j - 2xᵀP Σ_j y_j + n xᵀPx, without an (n, chains)
        # array: n is 2,000 per node in [003] §5.1.
        P = self._noise_precision
        const = np.einsum("nd,de,ne->", self._Y, P, self._Y)
        quad = np.einsum("cd,de,ce->c", x, self._H, x)
        return 0.5 * const - x @ (P @ self._sum) + 0.5 * quad

    def grad(self, x: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        prior = x @ self._prior_precision
        if self._batch and rng is not None:
            rows = minibatch_rows(rng, self.num_points, self._batch, x.shape[0])
            residual = x[:, None, :] - self._Y[rows]  # (chains, b, d)
            scale = self.num_points / self._batch
            return scale * residual.sum(axis=1) @ self._noise_precision + prior
        return (self.num_points * x - self._sum) @ self._noise_precision + prior

    def hessian(self, x: np.ndarray) -> np.ndarray:
        return np.broadcast_to(self._H, (x.shape[0], self.dim, self.dim)).copy()

    def lipschitz(self) -> float:
        return float(np.linalg.eigvalsh(self._H)[-1])

    def prox(self, v: np.ndarray, step: float, warm_start: np.ndarray) -> np.ndarray:
        """Closed form: ``(H + I/step) x = Σ1⁻¹ Σ_j y_j + v/step``."""
        system = self._H + np.eye(self.dim) / step
        rhs = (self._noise_precision @ self._sum)[None, :] + v / step
        return np.linalg.solve(system, rhs.T).T
