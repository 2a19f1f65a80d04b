"""Statistical checks shared by the sampler tests: Monte-Carlo standard errors and laws.

Conventions: ``samples`` has shape ``(T, chains, d)`` — rounds after burn-in, independent
chains, dimension. A check compares a sampler's estimate of a mean and covariance with a
target and fails when some entry is more than ``z`` Monte-Carlo standard errors (MCSE) away.

Two ways to get the MCSE:

* ``"replicates"`` (default): every chain is cut into ``batches`` contiguous blocks, each
  block's average is one replicate, and the standard error is the replicates' standard
  deviation over √(count). Chains are independent by construction (each has its own noise),
  so with one block per chain the replicates are exactly i.i.d. and the ratio
  ``error / MCSE`` is Student-t with ``count − 1`` degrees of freedom — no model of the
  autocorrelation is needed. With more blocks per chain, blocks must be long compared with
  the autocorrelation time (batch means).
* ``"ess"``: the standard deviation over √ESS, ESS from the multi-chain autocorrelation
  with Geyer's initial monotone sequence (Stan's estimator; Vehtari et al. 2021). Useful
  with few chains.

The covariance is checked through the second moments about the *target* mean,
``E[(x − μ)(x − μ)ᵀ]``, which equals the target covariance exactly when the law is right;
so every checked quantity is a plain average and gets the same MCSE treatment.

Known laws of linear-Gaussian recursions live here too (:func:`stationary_gaussian`,
:func:`propagate_gaussian`, :func:`random_affine_stationary`): for a Gaussian target every
Langevin-type update studied here is ``z ← M z + c + G w`` on the stacked state of all nodes,
whose stationary mean and covariance are exact solutions of linear equations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import linalg

__all__ = [
    "Comparison",
    "assert_mean_cov_close",
    "compare_mean_cov",
    "ess",
    "mcse",
    "propagate_gaussian",
    "random_affine_stationary",
    "stationary_gaussian",
]


def _replicates(values: np.ndarray, batches: int) -> np.ndarray:
    """Block averages, shape ``(chains * batches, ...)``, from ``values`` ``(T, chains, ...)``."""
    length = values.shape[0] // batches
    if length < 1:
        raise ValueError(f"batches: {batches} blocks do not fit in {values.shape[0]} rounds")
    trimmed = values[: length * batches]
    blocks = trimmed.reshape(batches, length, *values.shape[1:]).mean(axis=1)
    return blocks.reshape(batches * values.shape[1], *values.shape[2:])


def ess(values: np.ndarray) -> np.ndarray:
    """Effective sample size of ``values`` ``(T, chains, ...)`` per trailing entry.

    Multi-chain autocorrelation ``ρ_t = 1 − (W − mean_c γ_{c,t}) / var⁺`` with the initial
    monotone positive sequence of Geyer (1992), as in Stan.
    """
    values = np.asarray(values, dtype=float)
    T, chains = values.shape[:2]
    flat = values.reshape(T, chains, -1)
    out = np.empty(flat.shape[2])
    size = 1 << int(np.ceil(np.log2(2 * T)))
    for k in range(flat.shape[2]):
        x = flat[:, :, k] - flat[:, :, k].mean(axis=0)
        spectrum = np.fft.rfft(x, n=size, axis=0)
        acov = np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=0)[:T] / T
        within = acov[0].mean() * T / max(T - 1, 1)
        between = flat[:, :, k].mean(axis=0).var(ddof=1) if chains > 1 else 0.0
        var_plus = within * (T - 1) / T + between
        if var_plus <= 0:
            out[k] = float(T * chains)
            continue
        rho = 1.0 - (within - acov.mean(axis=1)) / var_plus
        rho[0] = 1.0
        # Sum pairs Γ_m = ρ_{2m} + ρ_{2m+1} while positive, forced non-increasing.
        total, previous = 0.0, np.inf
        for m in range(0, T - 1, 2):
            pair = rho[m] + rho[m + 1]
            if pair <= 0:
                break
            pair = min(pair, previous)
            total += pair
            previous = pair
        tau = max(2.0 * total - 1.0, 1.0 / np.log10(max(T * chains, 10)))
        out[k] = T * chains / tau
    return out.reshape(flat.shape[2:]) if flat.shape[2] > 1 else out


def mcse(values: np.ndarray, method: str = "replicates", batches: int = 1):
    """Estimate and Monte-Carlo standard error of ``E[values]`` per trailing entry.

    ``values`` has shape ``(T, chains, ...)``. Returns ``(estimate, se, dof)`` where ``dof``
    is the replicate count minus one (``inf`` for the ESS method).
    """
    values = np.asarray(values, dtype=float)
    estimate = values.mean(axis=(0, 1))
    if method == "replicates":
        reps = _replicates(values, batches)
        if reps.shape[0] < 2:
            raise ValueError("mcse: need at least two replicates (chains x batches)")
        se = reps.std(axis=0, ddof=1) / np.sqrt(reps.shape[0])
        return estimate, se, reps.shape[0] - 1
    if method == "ess":
        flat = values.reshape(values.shape[0], values.shape[1], -1)
        sd = flat.reshape(-1, flat.shape[2]).std(axis=0, ddof=1)
        se = (sd / np.sqrt(ess(flat).reshape(-1))).reshape(estimate.shape)
        return estimate, se, np.inf
    raise ValueError(f"method: unknown MCSE method {method!r} (use replicates or ess)")


@dataclass(frozen=True)
class Comparison:
    """Errors of a sample's mean and covariance against a target, in MCSE units."""

    mean_error: np.ndarray
    mean_se: np.ndarray
    cov_error: np.ndarray
    """Estimate of ``E[(x − μ)(x − μ)ᵀ]`` minus the target covariance."""
    cov_se: np.ndarray
    dof: float

    @property
    def mean_z(self) -> np.ndarray:
        return self.mean_error / self.mean_se

    @property
    def cov_z(self) -> np.ndarray:
        return self.cov_error / self.cov_se

    @property
    def max_z(self) -> float:
        return float(max(np.max(np.abs(self.mean_z)), np.max(np.abs(self.cov_z))))

    def summary(self) -> str:
        return (
            f"mean error {np.array2string(self.mean_error, precision=4)} "
            f"(MCSE {np.array2string(self.mean_se, precision=4)}); "
            f"cov error {np.array2string(self.cov_error.ravel(), precision=4)} "
            f"(MCSE {np.array2string(self.cov_se.ravel(), precision=4)}); "
            f"max |z| = {self.max_z:.2f} with {self.dof} dof"
        )


def compare_mean_cov(
    samples: np.ndarray,
    mean: np.ndarray,
    cov: np.ndarray,
    method: str = "replicates",
    batches: int = 1,
) -> Comparison:
    """Errors and MCSEs of the mean and the covariance of ``samples`` (T, chains, d)."""
    samples = np.asarray(samples, dtype=float)
    if samples.ndim != 3:
        raise ValueError(f"samples: expected shape (T, chains, d), got {samples.shape}")
    mean = np.asarray(mean, dtype=float)
    cov = np.asarray(cov, dtype=float)
    centred = samples - mean
    m_est, m_se, dof = mcse(samples, method, batches)
    outer = centred[..., :, None] * centred[..., None, :]
    c_est, c_se, _ = mcse(outer, method, batches)
    return Comparison(
        mean_error=m_est - mean, mean_se=m_se, cov_error=c_est - cov, cov_se=c_se, dof=dof
    )


def assert_mean_cov_close(
    samples: np.ndarray,
    mean: np.ndarray,
    cov: np.ndarray,
    z: float = 4.5,
    method: str = "replicates",
    batches: int = 1,
    label: str = "",
) -> Comparison:
    """Fail unless every mean and covariance entry is within ``z`` MCSE of the target.

    With ``d = 2`` that is 5 distinct quantities; at ``z = 4.5`` and 100 i.i.d. replicates a
    correct sampler fails one with probability below 1e-4 (Student-t, 99 dof), while a bias
    of a few MCSE is caught. Returns the :class:`Comparison` for reporting.
    """
    result = compare_mean_cov(samples, mean, cov, method, batches)
    upper = np.triu_indices(np.asarray(cov).shape[0])
    worst = max(np.max(np.abs(result.mean_z)), np.max(np.abs(result.cov_z[upper])))
    if not worst <= z:  # also fails on NaN
        raise AssertionError(f"{label or 'samples'}: beyond {z} MCSE: {result.summary()}")
    # Shown by ``pytest -rP``: each sampler's measured error against its target.
    print(f"{label or 'samples'}: within {z} MCSE: {result.summary()}")
    return result


# ----------------------------------------------------------------------------------------
# Exact laws of linear recursions z ← M z + c + G w, w ~ N(0, I).


def stationary_gaussian(
    M: np.ndarray, c: np.ndarray, G: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Stationary mean and covariance of ``z ← M z + c + G w``.

    ``μ = (I − M)⁻¹ c`` and ``Σ = M Σ Mᵀ + G Gᵀ`` (a discrete Lyapunov equation); they exist
    when every eigenvalue of M lies strictly inside the unit circle, which is checked.
    """
    radius = float(np.max(np.abs(np.linalg.eigvals(M))))
    if not radius < 1.0:
        raise ValueError(f"M: spectral radius {radius:.6f} >= 1, no stationary law")
    mean = np.linalg.solve(np.eye(M.shape[0]) - M, c)
    cov = linalg.solve_discrete_lyapunov(M, G @ G.T)
    return mean, (cov + cov.T) / 2


def propagate_gaussian(
    steps: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    mean: np.ndarray,
    cov: np.ndarray,
    record: Sequence[int] = (),
) -> tuple[np.ndarray, np.ndarray, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """Exact law after a time-varying recursion ``z ← M_k z + c_k + G_k w`` from N(mean, cov).

    ``steps`` yields ``(M_k, c_k, G_k)`` for k = 0, 1, ...; the law after step k (i.e. of the
    sample recorded at round k) is kept for each k in ``record``.
    """
    wanted = set(record)
    kept: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for k, (M, c, G) in enumerate(steps):
        mean = M @ mean + c
        cov = M @ cov @ M.T + G @ G.T
        if k in wanted:
            kept[k] = (mean.copy(), cov.copy())
    return mean, cov, kept


def _kron_expectation(X0, Xk, Y0, Yk, p: float, q: float) -> np.ndarray:
    """``E[(X0 + Σ_k I_k X_k) ⊗ (Y0 + Σ_l I_l Y_l)]`` for inclusion indicators I.

    ``E[I_k] = p``, ``E[I_k I_l] = q`` for k ≠ l (and ``p`` for k = l).
    """
    sx, sy = Xk.sum(axis=0), Yk.sum(axis=0)
    diagonal = sum(np.kron(a, b) for a, b in zip(Xk, Yk, strict=True))
    return (
        np.kron(X0, Y0)
        + p * (np.kron(X0, sy) + np.kron(sx, Y0))
        + q * np.kron(sx, sy)
        + (p - q) * diagonal
    )


def random_affine_stationary(
    M0: np.ndarray,
    Mk: np.ndarray,
    c0: np.ndarray,
    ck: np.ndarray,
    batch: int,
    G: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Stationary mean, covariance and contraction rate of ``z ← M z + c + G w`` with a
    random mini-batch.

    ``M = M0 + Σ_k I_k Mk[k]`` and ``c = c0 + Σ_k I_k ck[k]`` over the ``n = len(Mk)`` data
    points, where ``I_k`` marks the points of a batch of size ``batch`` drawn uniformly
    without replacement, afresh and independently of z at every step (SGLD, SGHMC).
    The law is not Gaussian, but its first two moments are exact:
    ``m = E[M] m + E[c]`` and, with ``S = E[z zᵀ]`` column-stacked,
    ``vec S = E[M⊗M] vec S + (E[c⊗M] + E[M⊗c]) m + E[c⊗c] + vec(G Gᵀ)``.
    The rate ``max(ρ(E[M]), ρ(E[M⊗M])^½)`` bounds how fast both moments forget the start.
    """
    n = Mk.shape[0]
    p = batch / n
    q = batch * (batch - 1) / (n * (n - 1))
    dim = M0.shape[0]
    mean_M = M0 + p * Mk.sum(axis=0)
    mean_c = c0 + p * ck.sum(axis=0)
    m = np.linalg.solve(np.eye(dim) - mean_M, mean_c)
    mean_radius = float(np.max(np.abs(np.linalg.eigvals(mean_M))))
    c0c, ckc = c0[:, None], ck[:, :, None]
    MM = _kron_expectation(M0, Mk, M0, Mk, p, q)
    radius = float(np.max(np.abs(np.linalg.eigvals(MM))))
    if not radius < 1.0:
        raise ValueError(f"E[M⊗M]: spectral radius {radius:.6f} >= 1, no second moment")
    cM = _kron_expectation(c0c, ckc, M0, Mk, p, q)
    Mc = _kron_expectation(M0, Mk, c0c, ckc, p, q)
    cc = _kron_expectation(c0c, ckc, c0c, ckc, p, q)
    rhs = (cM + Mc) @ m + cc[:, 0] + (G @ G.T).ravel(order="F")
    second = np.linalg.solve(np.eye(dim * dim) - MM, rhs).reshape(dim, dim, order="F")
    cov = second - np.outer(m, m)
    return m, (cov + cov.T) / 2, max(mean_radius, np.sqrt(radius))
