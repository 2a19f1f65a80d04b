"""Error bars over a study's replicate seeds: Student-t intervals, threshold crossings.

A study run over K seeds (``seeds: K``) yields K values of every figure it reports. Each
is summarised as ``mean ± h`` with ``h = t_{0.975, K−1} · s / √K`` (a two-sided 95 %
Student-t interval for the mean, ``s`` the sample standard deviation with K − 1 degrees of
freedom): the seeds are independent replicates, and the t interval is exact for normal
figures and a fair approximation for K ≥ 5 otherwise. K = 1 has no interval.

Counting rule (as the papers count): **iteration k means k updates**. A run's sample of
round index r (0-based) is the state after r + 1 updates, so it is iteration r + 1; the
first iteration a curve is at or below a threshold is ``1 + (first index below)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["LEVEL", "Interval", "first_iteration_below", "interval", "iteration_value"]

LEVEL = 0.95
"""Coverage of every interval a study prints."""


@dataclass(frozen=True)
class Interval:
    """``mean ± half`` over ``n`` seeds (``half`` is None for n < 2); ``of``: how many
    seeds were asked (a figure some seeds never reach counts only those that did)."""

    mean: float
    half: float | None
    n: int
    of: int

    def text(self, digits: int = 4, integer: bool = False) -> str:
        fmt = (lambda v: f"{v:.1f}") if integer else (lambda v: _number(v, digits))
        body = fmt(self.mean) if self.half is None else f"{fmt(self.mean)} ± {fmt(self.half)}"
        return body if self.n == self.of else f"{body} ({self.n}/{self.of} seeds)"


def _number(value: float, digits: int) -> str:
    if value != 0 and (abs(value) >= 1e3 or abs(value) < 10.0**-digits):
        return f"{value:.3g}"
    return f"{value:.{digits}f}"


def interval(values: Iterable[float | None], level: float = LEVEL) -> Interval | None:
    """Mean and t-interval half-width of the finite values among ``values`` (None: a seed
    without that figure, e.g. one that diverged); None when no value is finite."""
    given = list(values)
    finite = np.array([v for v in given if v is not None and math.isfinite(v)], dtype=float)
    if finite.size == 0:
        return None
    mean = float(finite.mean())
    if finite.size < 2:
        return Interval(mean, None, 1, len(given))
    from scipy.stats import t as student_t  # scipy is a base dependency already

    quantile = float(student_t.ppf(0.5 + level / 2.0, df=finite.size - 1))
    half = quantile * float(finite.std(ddof=1)) / math.sqrt(finite.size)
    return Interval(mean, half, int(finite.size), len(given))


def first_iteration_below(curve: Sequence[float] | np.ndarray, threshold: float) -> int | None:
    """The first iteration (1-based: k updates) whose value is ≤ ``threshold``; None if
    the curve never gets there (NaN, a diverged round, never counts as below)."""
    values = np.asarray(curve, dtype=float)
    with np.errstate(invalid="ignore"):
        hits = np.flatnonzero(values <= threshold)
    return int(hits[0]) + 1 if hits.size else None


def iteration_value(curve: Sequence[float] | np.ndarray, iteration: int) -> float | None:
    """The curve's value at iteration ``iteration`` (k updates), None beyond its end."""
    if not 1 <= iteration <= len(curve):
        return None
    value = float(curve[iteration - 1])
    return value if math.isfinite(value) else None
