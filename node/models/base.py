"""The contract every model meets: a local potential over one node's private data.

Node ``i``'s potential is ``f_i(x) = -log p(D_i | x) - s_i log p(x)``, its data's
negative log-likelihood plus a share ``s_i`` of the prior ([000] eq. 27, 30; [004] eq. 1-8).
Shares sum to one over the data-holding nodes, so ``sum_i f_i = F`` is the global potential.
All methods are vectorised over chains: ``x`` has shape ``(chains, d)``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

__all__ = ["Dataset", "GaussianPosterior", "LocalPotential"]


@dataclass(frozen=True)
class Dataset:
    """A node's private data: features ``X`` (n, p) and targets ``y`` (n,)."""

    X: np.ndarray
    y: np.ndarray

    def __len__(self) -> int:
        return int(self.X.shape[0])


@dataclass(frozen=True)
class GaussianPosterior:
    """An exact Gaussian posterior N(mean, cov), the ground truth for W2."""

    mean: np.ndarray
    cov: np.ndarray


class LocalPotential(ABC):
    """``f_i`` for one node; samplers call only these methods."""

    dim: int

    @abstractmethod
    def value(self, x: np.ndarray) -> np.ndarray:
        """``f_i(x)`` for each chain, shape (chains,)."""

    @abstractmethod
    def grad(self, x: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """``∇f_i(x)``, shape (chains, d).

        With a mini-batch size configured and an ``rng`` given, an unbiased estimate
        ``(n_i / b) Σ_batch ∇(-log p(d|x)) - s_i ∇log p(x)``; otherwise the full gradient.
        """

    def prox(self, v: np.ndarray, step: float, warm_start: np.ndarray) -> np.ndarray:
        """``argmin_x f_i(x) + ||x - v||² / (2 step)`` per chain.

        The default is a damped Newton solve (the sub-problem is strongly convex for
        ``step > 0``), warm-started; models with Gaussian likelihoods override it with the
        closed form.
        """
        raise NotImplementedError(f"{type(self).__name__} has no proximal operator")
