"""Rank-normalised split R-hat and bulk and tail ESS, for many coordinates at once.

The definitions are those of Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021),
"Rank-normalization, folding, and localization: an improved R-hat for assessing
convergence of MCMC", Bayesian Analysis 16(2), doi:10.1214/20-BA1221:

* every chain is split in two halves (the first and the last ``n // 2`` draws), so that a
  chain which drifts disagrees with itself;
* *rank-normalised* values are ``Φ⁻¹((r − 3/8) / (S + 1/4))`` for the rank ``r`` (ties
  averaged) of a draw among all ``S`` draws of the coordinate (Blom's offset);
* R-hat is the larger of the classic split R-hat of the rank-normalised draws (the bulk)
  and of the rank-normalised draws folded about their median (the tails), eq. 3–4;
* bulk ESS is the ESS of the rank-normalised split chains; tail ESS the smaller ESS of the
  indicators ``x ≤ q`` at the 5 % and 95 % quantiles;
* an ESS is ``S / τ`` with ``τ = −1 + 2 Σ ρ̂_t``, the autocorrelations ``ρ̂_t`` combined
  across chains (eq. 10) and summed by Geyer's initial monotone sequence (pairs of lags
  summed while positive, then made non-increasing), with ``τ ≥ 1 / log10(S)``.

ArviZ computes the same figures; it was what Starling called until the verdict asked for
them on every run, and then its import (about 4 s) and its per-coordinate xarray calls
became most of a study's evaluation. Here every coordinate's autocovariances come from
one FFT, and ``tests/orchestrator/evaluation/test_chain_stats.py`` holds the figures to
ArviZ's own to 1e-10 on chains that mix, drift, stick and tie.
"""

from __future__ import annotations

import numpy as np
from scipy import fft, special

__all__ = [
    "average_ranks",
    "diagnose",
    "effective_sample_size",
    "ess_bulk",
    "ess_tail",
    "rank_normalised",
    "rhat",
    "split_chains",
]

BLOM = 3.0 / 8.0
"""The fractional offset of the rank back-transform (Blom 1958)."""

TAIL_PROBABILITIES = (0.05, 0.95)


def split_chains(draws: np.ndarray) -> np.ndarray:
    """(chains, n, params) → (2 chains, n // 2, params): each chain's first and last halves
    (the middle draw of an odd count left out)."""
    half = draws.shape[1] // 2
    return np.concatenate([draws[:, :half], draws[:, draws.shape[1] - half :]], axis=0)


def average_ranks(values: np.ndarray) -> np.ndarray:
    """The ranks 1..N of each column's values, tied values sharing the mean of their ranks
    (``scipy.stats.rankdata(method="average", axis=0)``'s figures, without importing
    ``scipy.stats``: a second a process, which every run's evaluation paid only for this)."""
    size = values.shape[0]
    # Any sort will do: tied values share their ranks' mean, whatever their order.
    order = np.argsort(values, axis=0)
    ordered = np.take_along_axis(values, order, axis=0)
    starts = np.ones(values.shape, dtype=bool)  # a value unlike the one before it
    starts[1:] = ordered[1:] != ordered[:-1]
    ranks = np.empty(values.shape)
    if starts.all():  # no ties (continuous draws): each value's position in the order
        position = np.broadcast_to(np.arange(1.0, size + 1.0)[:, None], values.shape)
        np.put_along_axis(ranks, order, position, axis=0)
        return ranks
    ends = np.ones(values.shape, dtype=bool)  # a value unlike the one after it
    ends[:-1] = starts[1:]
    position = np.arange(1, size + 1, dtype=float)[:, None]
    first = np.maximum.accumulate(np.where(starts, position, 0.0), axis=0)
    last = np.minimum.accumulate(np.where(ends, position, size + 1.0)[::-1], axis=0)[::-1]
    np.put_along_axis(ranks, order, (first + last) / 2.0, axis=0)
    return ranks


def rank_normalised(draws: np.ndarray) -> np.ndarray:
    """Each coordinate's draws (all chains pooled) replaced by their normal scores."""
    chains, n, params = draws.shape
    size = chains * n
    ranks = average_ranks(draws.reshape(size, params))
    return special.ndtri((ranks - BLOM) / (size - 2.0 * BLOM + 1.0)).reshape(draws.shape)


def _classic_rhat(draws: np.ndarray) -> np.ndarray:
    """Gelman–Rubin R-hat of (chains, n, params): ``√((B/W + n − 1) / n)``; NaN where the
    chains are constant (W = 0)."""
    n = draws.shape[1]
    between = n * np.var(draws.mean(axis=1), axis=0, ddof=1)
    within = np.mean(np.var(draws, axis=1, ddof=1), axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1.0) / n)


def rhat(draws: np.ndarray) -> np.ndarray:
    """Rank-normalised split R-hat per coordinate of (chains, n, params); NaN with a single
    chain (there is nothing to compare) or fewer than 4 draws."""
    chains, n, params = draws.shape
    if chains < 2 or n < 4:
        return np.full(params, np.nan)
    split = split_chains(draws)
    return _split_rhat(split, rank_normalised(split))


def _split_rhat(split: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """R-hat from the split chains and their normal scores (``rank_normalised(split)``)."""
    params = split.shape[2]
    bulk = _classic_rhat(scores)
    folded = np.abs(split - np.median(split.reshape(-1, params), axis=0))
    tail = _classic_rhat(rank_normalised(folded))
    # The larger of the two; no value where the bulk has none (constant chains), the bulk's
    # where only the tails have none.
    return np.where(np.isnan(bulk), np.nan, np.fmax(bulk, tail))


DIRECT_LAGS = 32
"""Chains of at most this many draws have their autocovariances summed lag by lag
(:func:`_autocovariances`)."""


def _autocovariances(draws: np.ndarray) -> np.ndarray:
    """Biased autocovariances of every chain and coordinate at every lag, (chains, n,
    params): ``Σ_i c_i c_{i+t} / n`` of the centred draws ``c``.

    Up to :data:`DIRECT_LAGS` draws the sums are taken lag by lag (``n`` products of the
    whole array); longer chains go through an FFT with zero padding to at least twice the
    length. Short chains are what an evaluation's window after burn-in usually holds, and
    there the FFT's cost is its per-series overhead: measured here on the split chains of
    5 nodes' 100 chains × 50 draws (10 coordinates) and 250 chains × 40 draws (160), the
    direct sums took a third of the FFT's time, and at 50 draws more than it. Both give
    the same figures to rounding (about 1e-15)."""
    n = draws.shape[1]
    centred = draws - draws.mean(axis=1, keepdims=True)
    if n <= DIRECT_LAGS:
        sums = np.empty(draws.shape)
        for lag in range(n):
            np.einsum("cip,cip->cp", centred[:, : n - lag], centred[:, lag:], out=sums[:, lag])
        return sums / n
    padded = fft.next_fast_len(2 * n)
    spectrum = np.fft.rfft(centred, n=padded, axis=1)
    return np.fft.irfft(spectrum * np.conjugate(spectrum), n=padded, axis=1)[:, :n] / n


def _tau(rho: np.ndarray, size: int) -> float:
    """The integrated autocorrelation time from one coordinate's combined autocorrelations
    ``rho`` (lag 0 first), by Geyer's initial positive then monotone sequence."""
    n = rho.size
    kept = np.zeros(n)
    kept[0] = even = 1.0
    kept[1] = odd = rho[1]
    t = 1
    while t < n - 3 and even + odd > 0.0:
        even, odd = rho[t + 1], rho[t + 2]
        if even + odd >= 0.0:
            kept[t + 1], kept[t + 2] = even, odd
        t += 2
    last = t - 2
    if even > 0.0:
        kept[last + 1] = even
    t = 1
    while t <= last - 2:
        if kept[t + 1] + kept[t + 2] > kept[t - 1] + kept[t]:
            kept[t + 1] = kept[t + 2] = (kept[t - 1] + kept[t]) / 2.0
        t += 2
    tau = -1.0 + 2.0 * np.sum(kept[: last + 1]) + np.sum(kept[last + 1 : last + 2])
    return max(tau, 1.0 / np.log10(size))


def effective_sample_size(draws: np.ndarray) -> np.ndarray:
    """ESS per coordinate of (chains, n, params), as they are (no split, no ranks); a
    constant coordinate counts every draw."""
    chains, n, params = draws.shape
    size = chains * n
    acov = _autocovariances(draws)
    mean_var = acov[:, 0].mean(axis=0) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if chains > 1:
        var_plus = var_plus + np.var(draws.mean(axis=1), axis=0, ddof=1)
    spread = draws.max(axis=(0, 1)) - draws.min(axis=(0, 1))
    out = np.empty(params)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var - acov.mean(axis=0)) / var_plus  # (n, params)
    for k in range(params):
        if spread[k] < np.finfo(float).resolution:
            out[k] = size
        elif np.isnan(rho[:, k]).any():
            out[k] = np.nan
        else:
            out[k] = size / _tau(rho[:, k], size)
    return out


def ess_bulk(draws: np.ndarray) -> np.ndarray:
    """Bulk ESS per coordinate of (chains, n, params); NaN below 4 draws."""
    if draws.shape[1] < 4:
        return np.full(draws.shape[2], np.nan)
    return effective_sample_size(rank_normalised(split_chains(draws)))


def ess_tail(draws: np.ndarray) -> np.ndarray:
    """Tail ESS per coordinate of (chains, n, params): the smaller ESS of the indicators of
    the 5 % and 95 % quantiles; NaN below 4 draws."""
    params = draws.shape[2]
    if draws.shape[1] < 4:
        return np.full(params, np.nan)
    pooled = draws.reshape(-1, params)
    found = []
    for probability in TAIL_PROBABILITIES:
        below = (draws <= np.quantile(pooled, probability, axis=0)).astype(float)
        found.append(effective_sample_size(split_chains(below)))
    return np.minimum(*found)


def diagnose(draws: np.ndarray) -> dict[str, np.ndarray]:
    """``ess_bulk``, ``ess_tail`` and ``rhat`` of (chains, n, params), the figures of
    :func:`ess_bulk`, :func:`ess_tail` and :func:`rhat`, with the split chains' normal
    scores (a sort of every coordinate) computed once for the bulk ESS and R-hat."""
    chains, n, params = draws.shape
    if n < 4:
        missing = np.full(params, np.nan)
        return {"ess_bulk": missing, "ess_tail": missing.copy(), "rhat": missing.copy()}
    split = split_chains(draws)
    scores = rank_normalised(split)
    return {
        "ess_bulk": effective_sample_size(scores),
        "ess_tail": ess_tail(draws),
        "rhat": _split_rhat(split, scores) if chains > 1 else np.full(params, np.nan),
    }
