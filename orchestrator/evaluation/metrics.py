"""Distances to the ground truth and summaries of sample sets."""

from __future__ import annotations

import numpy as np

__all__ = ["GaussianTarget", "empirical_w2", "gaussian_w2", "target_curve", "w2_curve"]


def gaussian_w2(mean1: np.ndarray, cov1: np.ndarray, mean2: np.ndarray, cov2: np.ndarray) -> float:
    """2-Wasserstein distance between two Gaussians (Givens & Shortt 1984, as in [000] §6.2.3).

    ``W2² = ‖m1 − m2‖² + tr(S1 + S2 − 2 (S2^½ S1 S2^½)^½)``.
    """
    root2 = _psd_sqrt(cov2)
    cross = _psd_sqrt(root2 @ cov1 @ root2)
    trace = np.trace(cov1) + np.trace(cov2) - 2.0 * np.trace(cross)
    squared = float(np.sum((mean1 - mean2) ** 2) + max(trace, 0.0))
    return float(np.sqrt(max(squared, 0.0)))


def _psd_sqrt(matrix: np.ndarray) -> np.ndarray:
    """Square root of a symmetric positive semi-definite matrix, stable when it is singular
    (a sampler collapsed to a point, e.g. ADMM, has a zero covariance)."""
    values, vectors = np.linalg.eigh((matrix + matrix.T) / 2.0)
    return (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T


class GaussianTarget:
    """``N(mean, cov)`` with a square-root factor of ``cov`` computed once, for the many W2
    distances of one evaluation (every node, every round)."""

    def __init__(self, mean: np.ndarray, cov: np.ndarray):
        self.mean = np.asarray(mean, dtype=float)
        self.cov = np.asarray(cov, dtype=float)
        self.trace = float(np.trace(self.cov))
        self.axis_scales = _diagonal_scales(self.cov)
        """√λ when the covariance is ``diag(λ)`` (as :meth:`in_principal_axes` makes it):
        the factor is then diagonal, and a projection is elementwise."""
        if self.axis_scales is not None:
            self.root, self.triangular = np.diag(self.axis_scales), False
        else:
            self.root, self.triangular = _factor(self.cov)

    def in_principal_axes(self) -> GaussianTarget:
        """This law moved to the origin and turned onto its covariance's eigenvectors:
        ``N(0, diag(λ))`` with ``λ`` the eigenvalues (clipped at 0).

        W2 is unchanged when one isometry moves both of its laws, and the isometry ``x ↦
        Uᵀ (x − mean)`` takes this target to that one and exact draws of it to exact draws
        of that one: a set of ``n`` exact draws has the same distribution of W2 here as
        there (:func:`~starling.orchestrator.evaluation.w2_error.w2_floor`). Here a draw is
        ``√λ ⊙ z`` and its projection ``λ ⊙ z``, ``n d`` each, against ``n d²`` for drawing
        through a full factor and ``n d²`` again for projecting; one ``eigvalsh`` (d³)
        pays for them."""
        variances = np.clip(np.linalg.eigvalsh((self.cov + self.cov.T) / 2.0), 0.0, None)
        return GaussianTarget(np.zeros_like(variances), np.diag(variances))

    def project(self, points: np.ndarray) -> np.ndarray:
        """``points @ L`` (..., n, d), the one ``n d²`` product a W2 of ``points`` needs.

        A linear map: the projection of an average of point sets is the average of their
        projections, and of a pooled set the pooled projections, so
        :mod:`starling.orchestrator.evaluation.w2_scores` computes it once per (node, round). With a
        Cholesky factor the zero upper triangle is skipped (:func:`_lower_product`).

        One product per point set, never one of a whole block's rows stacked: BLAS rounds
        a row by kernels chosen from the product's height, so a set's projection — and its
        W2 — would otherwise depend on which other rounds share its block, and a round
        scored on a schedule (:mod:`starling.orchestrator.evaluation.schedule`) would differ
        in the last bit from the same round scored with all the others.
        """
        points = np.asarray(points, dtype=float)
        if points.ndim < 3:
            return self._project_set(points)
        flat = points.reshape(-1, *points.shape[-2:])
        out = np.empty(flat.shape)
        for index, one in enumerate(flat):
            out[index] = self._project_set(one)
        return out.reshape(points.shape)

    def _project_set(self, points: np.ndarray) -> np.ndarray:
        """``points @ L`` for one set (n, d), or one point (d,)."""
        if self.axis_scales is not None:
            return points * self.axis_scales
        if not self.triangular:
            return points @ self.root
        d = self.mean.shape[0]
        return _lower_product(points.reshape(-1, d), self.root).reshape(points.shape)

    def projects(self, count: int) -> bool:
        """Whether :meth:`w2` of sets of ``count`` points uses their projections: with
        fewer centred points than dimensions (``count − 1 < d``); otherwise the ``d × d``
        ``Lᵀ S1 L`` is the smaller matrix and the points are not projected."""
        return count - 1 < self.mean.shape[0]

    def w2(self, points: np.ndarray, projected: np.ndarray | None = None) -> np.ndarray:
        """W2 from the Gaussian fitted to each point set to this target, batched.

        ``points`` (..., n, d) -> (...). With ``X`` the centred points and ``S2^½`` the
        target's root, the fitted covariance is ``S1 = XᵀX / (n − 1)`` and
        ``tr (S2^½ S1 S2^½)^½`` is the sum of the square roots of the eigenvalues of
        ``YᵀY`` with ``Y = X L / √(n − 1)`` (``L`` any factor with ``L Lᵀ = S2``: ``Lᵀ S1 L``
        is similar to ``S2^½ S1 S2^½``) — equally those of the smaller Gram ``YYᵀ``
        when there are fewer points than dimensions (:meth:`projects`). One stacked
        ``eigvalsh`` per call, never a ``d × d`` square root per set. ``projected``:
        :meth:`project` of ``points`` if already computed (used when :meth:`projects`).

        Centring is done in the projected coordinates by the Householder reflection that
        takes ``1/√n`` to the first basis vector (:func:`_centred_rows`): its other ``n − 1``
        rows span the centred set exactly, so the Gram has no zero eigenvalue made of
        rounding, whose square root (~1e-8) would otherwise be added to the trace.
        """
        points = np.asarray(points, dtype=float)
        d = self.mean.shape[0]
        batch = points.shape[:-2]
        points = points.reshape(-1, points.shape[-2], d)
        count = points.shape[1]
        means = points.mean(axis=1)
        gap = np.sum((means - self.mean) ** 2, axis=-1)
        if count < 2:  # one point: the fitted covariance is zero
            squared = gap + self.trace
            return np.sqrt(np.maximum(squared, 0.0)).reshape(batch)
        scaled = points - means[:, None, :]
        scaled /= np.sqrt(count - 1)  # in place: one temporary of the block's size, not two
        if self.projects(count):
            # Not einsum: its summation order depends on how many sets are batched, and a
            # set's W2 must not (the schedule's rounds equal every-round scoring's).
            fitted_trace = np.sum(np.square(scaled), axis=(1, 2))
            z = self.project(points) if projected is None else np.asarray(projected, dtype=float)
            y = _centred_rows(z.reshape(points.shape))
            y /= np.sqrt(count - 1)
            gram = y @ y.transpose(0, 2, 1)
        else:  # S1 itself is the smaller matrix: Lᵀ S1 L, no projection of the points
            fitted = scaled.transpose(0, 2, 1) @ scaled
            fitted_trace = np.trace(fitted, axis1=1, axis2=2)
            gram = self.root.T @ fitted @ self.root
        gram = (gram + gram.transpose(0, 2, 1)) / 2.0
        cross = np.sum(np.sqrt(np.clip(np.linalg.eigvalsh(gram), 0.0, None)), axis=-1)
        trace = np.maximum(fitted_trace + self.trace - 2.0 * cross, 0.0)
        return np.sqrt(np.maximum(gap + trace, 0.0)).reshape(batch)


def _centred_rows(z: np.ndarray) -> np.ndarray:
    """(b, n, d) -> (b, n − 1, d): an orthonormal basis of the centred rows' span applied to
    ``z``, i.e. rows 1 … n − 1 of ``H z`` with ``H`` the reflection taking ``1/√n`` to
    ``e_0``: ``z_i + s / (√n − 1)``, ``s = z_0 − Σ_j z_j / √n``. ``(H z)ᵀ(H z) = zᵀz`` and
    row 0 of ``H z`` is ``√n z̄``, so the other rows carry ``(z − z̄)ᵀ(z − z̄)`` exactly
    (applied to ``z − z̄``, whose row 0 of ``H`` is then zero up to rounding)."""
    z = z - z.mean(axis=1, keepdims=True)  # first: then s is ~z_0, not a large difference
    root = np.sqrt(z.shape[1])
    s = z[:, 0, :] - z.sum(axis=1) / root
    rows = z[:, 1:, :]
    rows += (s / (root - 1.0))[:, None, :]  # in the centred copy: no second temporary
    return rows


_LEAF = 128
"""Below this size :func:`_lower_product` multiplies a triangular block as a full one."""


def _lower_product(x: np.ndarray, low: np.ndarray) -> np.ndarray:
    """``x @ low`` for a lower-triangular ``low``, without its zero upper triangle: halves
    ``[[A, 0], [B, C]]`` give ``[x₁A + x₂B, x₂C]``, recursively, so the products come to
    little more than half a general product's flops (BLAS's ``trmm``, without importing
    scipy.linalg: a third of a second, more than the flops it would save in a run)."""
    d = low.shape[0]
    if d <= _LEAF:
        return x @ low
    half = d // 2
    out = np.empty((x.shape[0], d))
    out[:, :half] = _lower_product(x[:, :half], low[:half, :half])
    out[:, :half] += x[:, half:] @ low[half:, :half]
    out[:, half:] = _lower_product(x[:, half:], low[half:, half:])
    return out


def _diagonal_scales(cov: np.ndarray) -> np.ndarray | None:
    """``√diag(cov)`` when ``cov`` is diagonal with no negative entry, else None."""
    diagonal = np.diagonal(cov)
    if diagonal.min(initial=0.0) < 0.0 or np.count_nonzero(cov) != np.count_nonzero(diagonal):
        return None
    return np.sqrt(diagonal)


def _factor(cov: np.ndarray) -> tuple[np.ndarray, bool]:
    """``L`` with ``L Lᵀ = cov`` and whether it is lower triangular: Cholesky (a tenth of an
    ``eigh``), or the symmetric root when ``cov`` is only semi-definite."""
    try:
        return np.linalg.cholesky((cov + cov.T) / 2.0), True
    except np.linalg.LinAlgError:
        return _psd_sqrt(cov), False


_BATCH_BYTES = 64 * 1024 * 1024
"""Point sets are scored this many bytes of input at a time: memory stays bounded by a few
rounds of samples, whatever the run's length."""


def empirical_w2(points: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> float:
    """W2 from the Gaussian fitted to ``points`` (n, d) to N(mean, cov), the paper's metric."""
    target = GaussianTarget(mean, cov)
    points = np.asarray(points, dtype=float).reshape(1, -1, target.mean.shape[0])
    return float(target.w2(points)[0])


def w2_curve(samples: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """W2 at every round from the chains' empirical law at that round; ``samples`` (T, C, d)."""
    return target_curve(samples, GaussianTarget(mean, cov))


def target_curve(samples: np.ndarray, target: GaussianTarget) -> np.ndarray:
    """:func:`w2_curve` against a prepared target, a bounded block of rounds at a time."""
    samples = np.asarray(samples)
    per_round = max(samples[0].nbytes if samples.shape[0] else 1, 1)
    step = max(1, _BATCH_BYTES // per_round)
    return np.concatenate(
        [target.w2(samples[t : t + step]) for t in range(0, samples.shape[0], step)]
        or [np.zeros(0)]
    )
