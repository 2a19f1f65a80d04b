"""Distances to the ground truth and summaries of sample sets."""

from __future__ import annotations

import numpy as np

__all__ = ["gaussian_w2", "empirical_w2", "w2_curve"]


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


def empirical_w2(points: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> float:
    """W2 from the Gaussian fitted to ``points`` (n, d) to N(mean, cov), the paper's metric."""
    points = np.asarray(points, dtype=float).reshape(-1, mean.shape[0])
    fitted_cov = (
        np.atleast_2d(np.cov(points, rowvar=False)) if len(points) > 1 else np.zeros_like(cov)
    )
    return gaussian_w2(points.mean(axis=0), fitted_cov, mean, cov)


def w2_curve(samples: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """W2 at every round from the chains' empirical law at that round; ``samples`` (T, C, d)."""
    return np.array([empirical_w2(samples[t], mean, cov) for t in range(samples.shape[0])])
