"""The contract every model meets: a local potential over one node's private data.

Node ``i``'s potential is ``f_i(x) = -log p(D_i | x) - s_i log p(x)``, its data's
negative log-likelihood plus a share ``s_i`` of the prior ([000] eq. 27, 30; [004] eq. 1-8).
Shares sum to one over the data-holding nodes, so ``sum_i f_i = F`` is the global potential.
All methods are vectorised over chains: ``x`` has shape ``(chains, d)``.

The model protocol
------------------
A model is a frozen parameter dataclass (registered in :data:`starling.node.models.MODELS`, checked
by ``validate()``) that also provides:

* ``dim`` — the dimension ``d`` of ``x`` (attribute or property);
* ``num_features`` — how many columns of ``Dataset.X`` it expects (the data loader checks
  files against it and pads sparse LIBSVM rows to it);
* ``supervised`` — False for density models whose observations are all in ``X``
  (``y`` is then a column of zeros);
* ``synthesize(rng, size) -> Dataset`` — one node's synthetic shard;
* ``local_potential(data, prior_share, batch_size) -> LocalPotential``.

Optional, only where it makes sense (evaluation code tests with ``hasattr``):

* ``exact_posterior(shards) -> GaussianPosterior`` — only when the posterior is exactly
  Gaussian (linear regression, conjugate Gaussian);
* ``reference_posterior(shards) -> GridPosterior`` — a normalised density on a grid for a
  low-dimensional non-Gaussian posterior (the Gaussian mixture);
* ``prox_by_newton = True`` — the potential keeps the default prox, a damped Newton solve
  that holds every chain's ``d × d`` Hessian (the orchestrator sizes it for a proximal
  sampler);
* for classifiers (see :mod:`starling.node.models.classification`): ``num_classes``,
  ``class_labels(y) -> int array`` and ``predict_proba(samples, X) -> (S, n, K)``.

The local potential
-------------------
Samplers call ``value``, ``grad(x, rng)`` and ``prox(v, step, warm_start)``. Also available:
``hessian(x)`` where it is cheap (it makes the default prox an exact Newton solve),
``lipschitz()`` (an upper bound ``M_i`` on the curvature of ``f_i``, for step-size
defaults such as DG-LMC's ``ρ_i ≈ 1/M_i`` [003] §3.2), ``num_points`` (``n_i``),
``prior_share`` (``s_i``) and ``last_prox`` (how the last prox solve went).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from starling.node.models.prox import ProxInfo, solve_prox

__all__ = [
    "SCALE_RANGE",
    "Dataset",
    "GaussianPosterior",
    "GridPosterior",
    "LocalPotential",
    "check_scales",
    "minibatch_rows",
]

SCALE_RANGE = (1e-100, 1e100)
"""Where a model's positive scale (a variance, a standard deviation) may lie: its square
and its reciprocal then stay finite, non-zero doubles. A noise_std of 1e-200 passed a
mere "positive" check and divided by zero (its square is 0.0) when the node built its
potential."""


def check_scales(params: object, *names: str) -> None:
    """ValueError naming the first of ``names`` (attributes of ``params``) outside
    :data:`SCALE_RANGE`."""
    low, high = SCALE_RANGE
    for name in names:
        value = getattr(params, name)
        if not low <= value <= high:
            raise ValueError(
                f"{name}: must be between {low:g} and {high:g} (positive, its square and "
                f"reciprocal finite), got {value!r}"
            )


@dataclass(frozen=True)
class Dataset:
    """A node's private data: features ``X`` (n, p) and targets ``y`` (n,).

    Density models (no targets) keep their observations in ``X`` and zeros in ``y``.
    """

    X: np.ndarray
    y: np.ndarray

    def __len__(self) -> int:
        return int(self.X.shape[0])


@dataclass(frozen=True)
class GaussianPosterior:
    """An exact Gaussian posterior N(mean, cov), the ground truth for W2."""

    mean: np.ndarray
    cov: np.ndarray


@dataclass(frozen=True)
class GridPosterior:
    """A posterior density tabulated at the centres of a regular grid.

    ``axes[k]`` holds the cell centres along dimension ``k`` (equally spaced); ``density``
    has shape ``tuple(len(a) for a in axes)`` and is normalised so that
    ``density.sum() * cell_volume == 1``. The discrete measure (``support()``) is what a
    transport distance (Sinkhorn, [004] §5.1) compares samples against.
    """

    axes: tuple[np.ndarray, ...]
    density: np.ndarray

    @property
    def cell_volume(self) -> float:
        return float(np.prod([a[1] - a[0] for a in self.axes]))

    @property
    def masses(self) -> np.ndarray:
        """Probability of each cell, same shape as ``density``, summing to one."""
        return self.density * self.cell_volume

    def support(self, threshold: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Cell centres ``(m, d)`` with mass above ``threshold`` and their masses, renormalised."""
        mesh = np.stack(np.meshgrid(*self.axes, indexing="ij"), axis=-1).reshape(-1, len(self.axes))
        mass = self.masses.reshape(-1)
        keep = mass > threshold
        return mesh[keep], mass[keep] / mass[keep].sum()

    def mean(self) -> np.ndarray:
        points, mass = self.support()
        return mass @ points

    def cov(self) -> np.ndarray:
        points, mass = self.support()
        centred = points - mass @ points
        return (centred * mass[:, None]).T @ centred

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Draws from the piecewise-constant density: a cell by its mass, then uniform in it."""
        points, mass = self.support()
        cells = rng.choice(len(mass), size=size, p=mass)
        widths = np.array([a[1] - a[0] for a in self.axes])
        return points[cells] + (rng.random((size, len(self.axes))) - 0.5) * widths


def minibatch_rows(rng: np.random.Generator, n: int, batch: int, chains: int) -> np.ndarray:
    """Row indices ``(chains, batch)``: each chain its own batch, drawn without replacement.

    Independent batches keep the chains independent trials (a shared batch would correlate
    their gradient noise). The smallest ``batch`` of ``chains × n`` uniform keys is a uniform
    random subset for every chain.
    """
    keys = rng.random((chains, n))
    return np.argpartition(keys, batch - 1, axis=1)[:, :batch]


class Model(Protocol):
    """What the node asks of every model (each model class is also its own parameter
    dataclass, built by :func:`starling.node.models.build_model`)."""

    @property
    def dim(self) -> int:
        """Dimension of the parameter θ the chains sample."""
        ...

    def synthesize(self, rng: np.random.Generator, size: int) -> Dataset:
        """``size`` points drawn from the model's generating process."""
        ...

    def local_potential(
        self, data: Dataset, prior_share: float, batch_size: int = 0
    ) -> LocalPotential:
        """``f_i`` of ``data`` with ``prior_share`` of the prior, mini-batched if asked."""
        ...


class LocalPotential(ABC):
    """``f_i`` for one node; samplers call only these methods.

    Subclasses set ``dim``, ``num_points`` and ``prior_share``. A potential whose ``f_i``
    contains a non-smooth term ``c ||x||_1`` (a Laplace prior) sets ``l1_weight = c``:
    ``value`` and ``grad`` include it (``grad`` returns the subgradient with ``sign(0) = 0``),
    ``hessian`` excludes it, and the default prox handles it exactly by proximal Newton.
    """

    dim: int
    num_points: int = 0
    prior_share: float = 1.0
    l1_weight: float = 0.0

    prox_tol: float = 1e-8
    """Relative stopping tolerance of the default prox, see :meth:`prox`."""
    prox_max_iter: int = 100
    """Newton (or L-BFGS) iteration limit of the default prox."""
    last_prox: ProxInfo | None = None

    @abstractmethod
    def value(self, x: np.ndarray) -> np.ndarray:
        """``f_i(x)`` for each chain, shape (chains,)."""

    @abstractmethod
    def grad(self, x: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        """``∇f_i(x)``, shape (chains, d).

        With a mini-batch size configured and an ``rng`` given, an unbiased estimate
        ``(n_i / b) Σ_batch ∇(-log p(d|x)) - s_i ∇log p(x)``, each chain drawing its own
        batch (:func:`minibatch_rows`); otherwise the full gradient.
        """

    def value_and_grad(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``value(x)`` and the full ``grad(x)``, the same floats; a model whose two share
        work (the MLP's forward pass) overrides it to do that work once."""
        return self.value(x), self.grad(x)

    def hessian(self, x: np.ndarray) -> np.ndarray:
        """``∇²f_i(x)`` of the smooth part, shape (chains, d, d), where it is cheap."""
        raise NotImplementedError(f"{type(self).__name__} has no Hessian")

    @property
    def has_hessian(self) -> bool:
        return type(self).hessian is not LocalPotential.hessian

    def lipschitz(self) -> float | None:
        """An upper bound ``M_i`` on the largest eigenvalue of ``∇²f_i`` (None if unknown)."""
        return None

    def prox(self, v: np.ndarray, step: float, warm_start: np.ndarray) -> np.ndarray:
        """``argmin_x f_i(x) + ||x - v||² / (2 step)`` per chain, shape (chains, d).

        The default solves the sub-problem numerically, warm-started at ``warm_start``
        (see :mod:`starling.node.models.prox`): damped Newton when ``hessian`` exists, proximal
        Newton when ``l1_weight > 0``, L-BFGS otherwise. It stops when, for every chain,
        the norm of the sub-problem's (minimum-norm sub)gradient is at most
        ``prox_tol · (1 + ||x - v|| / step)`` — relative to the size of the terms that
        cancel at the solution, so the test is meaningful at any data size — or after
        ``prox_max_iter`` iterations; ``last_prox`` records which. Models with Gaussian
        likelihoods override it with the closed form.
        """
        x, info = solve_prox(self, v, step, warm_start)
        self.last_prox = info
        return x
