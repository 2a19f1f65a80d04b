"""Bayesian logistic regression ([000] §6.3, eq. 28-30; [004] §5.2; [002] §5.4; [003] §5.2).

Likelihood ``P(y = 1 | z; x) = σ(xᵀz)`` ([000] eq. 28) with ``σ(t) = 1/(1 + e^{-t})``, so a
node's potential is ``f_i(x) = Σ_l log(1 + exp(ψ_l xᵀz_l)) + s_i (-log p(x))`` with
``ψ_l = -1`` for label 1 and ``+1`` for label 0 ([000] eq. 30).

Synthetic data ([000] §6.3.1): ``x`` drawn once from the prior, ``z ~ N(0, 20 I)``,
``p ~ U(0, 1)``, ``y = 1`` iff ``p ≤ σ(xᵀz)``; d = 3, ``N(0, λI)`` prior with λ = 10. The
paper lists each node's label-1 points first; row order does not enter ``f_i``, so it is
not reproduced. The drawn ``x`` must be the same on every node, so it comes from the model
parameters (``true_x``, or ``truth_seed``), not from a node's data generator.

File data (a9a, covtype): LIBSVM, CSV or NPZ through :mod:`starling.node.data.files`, labels
``±1`` or ``0/1``; set ``features`` to the file's dimension (123 for a9a). ``intercept: true``
adds a constant-1 column, so ``dim = features + 1``. Priors: Gaussian ``N(0, prior_var I)`` or
Laplace with scale ``prior_scale`` ([004] uses Laplace(1) on a9a); the prior covers every
coordinate, the intercept included. With the Laplace prior ``grad`` is a subgradient
(``sign(0) = 0``) and the default prox solves the L1 term exactly (proximal Newton).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from scipy.special import expit

from starling.node.models.base import Dataset, LocalPotential, check_scales, minibatch_rows
from starling.node.models.classification import binary_labels
from starling.node.models.priors import make_prior

__all__ = ["LogisticRegression", "LogisticRegressionPotential"]


@dataclass(frozen=True)
class LogisticRegression:
    """Model parameters; the defaults are [000] §6.3's synthetic problem."""

    features: int = 3
    """Input features ``p`` per row (123 for a9a, 54 for covtype)."""
    intercept: bool = False
    """Append a constant-1 feature (its weight is the bias)."""
    prior: str = "gaussian"
    """``gaussian`` (variance ``prior_var``) or ``laplace`` (scale ``prior_scale``)."""
    prior_var: float = 10.0
    prior_scale: float = 1.0
    feature_var: float = 20.0
    """Variance of the synthetic features ``z ~ N(0, feature_var I)``."""
    true_x: tuple[float, ...] | None = None
    """The parameter that generates synthetic labels; drawn from the prior if not given."""
    truth_seed: int = 0
    """Seed of that draw: every node derives the same ``x`` from it."""

    supervised = True
    num_classes = 2
    prox_by_newton = True
    """The default prox is a damped Newton solve: every chain's dim × dim Hessian at once
    (:mod:`starling.node.models.prox`), which the orchestrator bounds by
    ``limits.node_memory`` for a proximal sampler."""

    @property
    def dim(self) -> int:
        return self.features + int(self.intercept)

    @property
    def num_features(self) -> int:
        return self.features

    def validate(self) -> None:
        if self.features < 1:
            raise ValueError("features: must be at least 1")
        if self.prior not in ("gaussian", "laplace"):
            raise ValueError(f"prior: unknown prior {self.prior!r} (use gaussian or laplace)")
        check_scales(self, "prior_var", "prior_scale", "feature_var")
        # The other prior's scale, changed from its default, was read by nothing: a
        # laplace prior_var: 1.0 (meant as its scale) ran the default scale without a word.
        unread = {"gaussian": ("prior_scale", "prior_var"), "laplace": ("prior_var", "prior_scale")}
        other, own = unread[self.prior]
        if getattr(self, other) != _DEFAULTS[other]:
            raise ValueError(
                f"{other}: the {self.prior} prior reads {own}, not {other} (that is the "
                f"{'laplace' if self.prior == 'gaussian' else 'gaussian'} prior's)"
            )
        if self.true_x is not None and len(self.true_x) != self.dim:
            raise ValueError(
                f"true_x: has {len(self.true_x)} entries but the model has dim {self.dim}"
            )

    def truth(self) -> np.ndarray:
        """The data-generating ``x``: ``true_x``, or one draw from the prior ([000] §6.3.1)."""
        if self.true_x is not None:
            return np.asarray(self.true_x, dtype=float)
        rng = np.random.default_rng(np.random.SeedSequence([self.truth_seed, 28]))
        return make_prior(self.prior, self.prior_var, self.prior_scale, 1.0).draw(rng, self.dim)

    def design(self, X: np.ndarray) -> np.ndarray:
        """Features as the model sees them: ``X`` plus the intercept column if configured."""
        X = np.asarray(X, dtype=float)
        if self.intercept:
            return np.hstack([X, np.ones((X.shape[0], 1))])
        return X

    def synthesize(self, rng: np.random.Generator, size: int) -> Dataset:
        """``size`` points as in [000] eq. 29: labels drawn from the model at ``truth()``."""
        z = np.sqrt(self.feature_var) * rng.standard_normal((size, self.features))
        p = rng.random(size)
        y = (p <= expit(self.design(z) @ self.truth())).astype(float)
        return Dataset(X=z, y=y)

    def local_potential(
        self, data: Dataset, prior_share: float, batch_size: int = 0
    ) -> LogisticRegressionPotential:
        return LogisticRegressionPotential(self, data, prior_share, batch_size)

    def class_labels(self, y: np.ndarray) -> np.ndarray:
        return binary_labels(y)

    def predict_proba(self, samples: np.ndarray, X: np.ndarray) -> np.ndarray:
        """``[P(y=0), P(y=1)]`` for every sample (S, d) and row of ``X``: shape (S, n, 2)."""
        p1 = expit(np.atleast_2d(samples) @ self.design(X).T)
        return np.stack([1.0 - p1, p1], axis=-1)


_DEFAULTS = {f.name: f.default for f in fields(LogisticRegression)}


class LogisticRegressionPotential(LocalPotential):
    """``f_i(x) = Σ_l [log(1 + e^{m_l}) - y_l m_l] + s_i(-log p(x))``, ``m_l = xᵀz_l``.

    (The same as [000] eq. 30: ``log(1 + e^{ψ m})`` with ``ψ = 1 - 2y``.)
    """

    def __init__(
        self, model: LogisticRegression, data: Dataset, prior_share: float, batch_size: int = 0
    ):
        self.dim = model.dim
        self._Z = model.design(data.X)
        self._y = binary_labels(data.y).astype(float)
        self.num_points = len(self._y)
        self.prior_share = prior_share
        self._prior = make_prior(model.prior, model.prior_var, model.prior_scale, prior_share)
        self.l1_weight = self._prior.l1_weight
        self._batch = batch_size if 0 < batch_size < self.num_points else 0
        self._sparse = _sparse_copy(self._Z)
        self._sparse_t = self._sparse.T.tocsr() if self._sparse is not None else None

    def _margins(self, x: np.ndarray) -> np.ndarray:
        """``x Zᵀ``, (chains, n): through the sparse copy when the design has one."""
        if self._sparse is not None:
            return np.asarray(self._sparse @ x.T).T
        return x @ self._Z.T

    def _times_design(self, weights: np.ndarray) -> np.ndarray:
        """``weights Z``, (chains, d) for weights (chains, n)."""
        if self._sparse is not None:
            return np.asarray(self._sparse.T @ weights.T).T
        return weights @ self._Z

    def value(self, x: np.ndarray) -> np.ndarray:
        margin = self._margins(x)
        nll = np.sum(np.logaddexp(0.0, margin) - self._y * margin, axis=1)
        return nll + self._prior.value(x)

    def grad(self, x: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        prior = self._prior.grad(x)
        if self._batch and rng is not None:
            rows = minibatch_rows(rng, self.num_points, self._batch, x.shape[0])
            Zb = self._Z[rows]  # (chains, b, d)
            residual = expit(np.einsum("cbd,cd->cb", Zb, x)) - self._y[rows]
            scale = self.num_points / self._batch
            return scale * np.einsum("cb,cbd->cd", residual, Zb) + prior
        residual = expit(self._margins(x)) - self._y[None, :]
        return self._times_design(residual) + prior

    def hessian(self, x: np.ndarray) -> np.ndarray:
        """``Zᵀ diag(σ(m)(1 - σ(m))) Z`` plus the Gaussian prior's ``s_i I/λ`` (smooth part)."""
        p = expit(self._margins(x))
        weights = p * (1.0 - p)
        # One product per chain keeps memory at n·d (a batched einsum would hold
        # chains·n·d numbers: 640 MB for 100 chains on an a9a shard).
        H = np.empty((x.shape[0], self.dim, self.dim))
        for k, w in enumerate(weights):
            H[k] = self._weighted_gram(w)
        return H + self._prior.curvature() * np.eye(self.dim)

    def _weighted_gram(self, w: np.ndarray) -> np.ndarray:
        """``Zᵀ diag(w) Z``, (d, d). Through the sparse copy when the design has one: on an
        a9a shard (11 % non-zero, 5,200 rows) it took a fifth to a third of the dense
        product's time, which had been three quarters of a D-ADMMS round there (cProfile of
        12 rounds, 4 chains). The sparse product sums in another order, so it is made
        exactly symmetric."""
        if self._sparse is None:
            return (self._Z * w[:, None]).T @ self._Z
        scaled = self._sparse.copy()
        scaled.data *= np.repeat(w, np.diff(self._sparse.indptr))
        gram = np.asarray((self._sparse_t @ scaled).todense())
        return 0.5 * (gram + gram.T)

    def lipschitz(self) -> float:
        """``λ_max(ZᵀZ)/4 + s_i/λ``: ``σ' ≤ 1/4`` (the Laplace prior adds no curvature)."""
        top = np.linalg.eigvalsh(self._Z.T @ self._Z)[-1] if self.num_points else 0.0
        return float(top / 4.0 + self._prior.curvature())


_SPARSE_DENSITY = 0.25
"""Below this share of non-zeros a design is multiplied through a CSR copy: a9a's one-hot
rows are 11 % non-zero, so its full-batch gradient costs about a ninth of the dense one."""


def _sparse_copy(Z: np.ndarray) -> Any:
    """A CSR copy of ``Z`` when it is sparse enough to pay (see ``_SPARSE_DENSITY``)."""
    if Z.size == 0 or np.count_nonzero(Z) > _SPARSE_DENSITY * Z.size:
        return None
    from scipy.sparse import csr_matrix

    return csr_matrix(Z)
