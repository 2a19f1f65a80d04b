"""Priors on the parameter vector, and the share ``s_i`` of ``-log p(x)`` a node carries.

Each term is ``s · (-log p(x))`` up to a constant, vectorised over chains.

* Gaussian ``N(0, λ I)``: ``s ||x||² / (2λ)`` ([000] eq. 27, 30).
* Laplace with scale ``b`` (density ``∝ exp(-|x_k| / b)`` per coordinate): ``s ||x||_1 / b``
  ([004] §5.2 uses scale 1 on a9a). It is not differentiable at 0: ``grad`` returns the
  subgradient ``s sign(x) / b`` with ``sign(0) = 0``, which is what Langevin samplers use
  in practice, and the default prox treats the term exactly (proximal Newton).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["GaussianPrior", "LaplacePrior", "make_prior"]


@dataclass(frozen=True)
class GaussianPrior:
    variance: float
    share: float

    l1_weight = 0.0

    def value(self, x: np.ndarray) -> np.ndarray:
        return 0.5 * self.share / self.variance * np.sum(x * x, axis=1)

    def grad(self, x: np.ndarray) -> np.ndarray:
        return (self.share / self.variance) * x

    def curvature(self) -> float:
        """The Hessian is ``curvature() · I``."""
        return self.share / self.variance

    def draw(self, rng: np.random.Generator, dim: int) -> np.ndarray:
        return np.sqrt(self.variance) * rng.standard_normal(dim)


@dataclass(frozen=True)
class LaplacePrior:
    scale: float
    share: float

    @property
    def l1_weight(self) -> float:
        return self.share / self.scale

    def value(self, x: np.ndarray) -> np.ndarray:
        return self.l1_weight * np.sum(np.abs(x), axis=1)

    def grad(self, x: np.ndarray) -> np.ndarray:
        return self.l1_weight * np.sign(x)

    def curvature(self) -> float:
        """Zero away from the kink; the kink itself is handled by the prox."""
        return 0.0

    def draw(self, rng: np.random.Generator, dim: int) -> np.ndarray:
        return rng.laplace(0.0, self.scale, dim)


def make_prior(
    kind: str, variance: float, scale: float, share: float
) -> GaussianPrior | LaplacePrior:
    """The prior named ``kind`` ("gaussian" or "laplace") carrying a share ``share``."""
    if kind == "gaussian":
        return GaussianPrior(variance, share)
    if kind == "laplace":
        return LaplacePrior(scale, share)
    raise ValueError(f"prior: unknown prior {kind!r} (use gaussian or laplace)")
