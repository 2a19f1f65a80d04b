"""Error bars over a study's replicate seeds: Student-t intervals, paired differences,
censored threshold crossings.

A study run over K seeds (``seeds: K``) yields K values of every figure it reports. Each
is summarised as ``mean ± h`` with ``h = t_{0.975, K−1} · s / √K`` (a two-sided 95 %
Student-t interval for the mean, ``s`` the sample standard deviation with K − 1 degrees of
freedom): the seeds are independent replicates, and the t interval is exact for normal
figures and a fair approximation for K ≥ 5 otherwise. K = 1 has no interval.

**Paired differences** (:func:`paired_difference`): two settings run on the same seeds
(the same data and the same chain seeds: every cell and variant of a study shares them)
are compared run by run, ``d_r = a_r − b_r``, and ``d̄ ± t_{0.975, K−1} s_d / √K`` is the
interval of the difference. Shared randomness cancels in ``d_r``, so it is the fair
comparison (and never wider than the two intervals side by side would suggest when the runs
are positively correlated). Runs that do not share their seeds get Welch's interval
(``unpaired``), said as such.

**Censored hitting times** (:func:`hitting_summary`): a first iteration at or below a
threshold is only seen when the run gets there within its T iterations; a run that never
does is *censored* at T (its time is > T), never dropped. The summary is the Kaplan–Meier
estimate of the hitting time's distribution (Kaplan and Meier 1958): its median (None when
fewer than half the runs got there: "> T") and the restricted mean ``E min(τ, T)``, the area
under the survival curve up to T, with the t interval of ``min(τ_r, T)`` (every run of one
cell shares T, so Kaplan–Meier reduces to the empirical law and the restricted mean to that
plain mean; it is a lower bound on the unrestricted mean when some never got there), and
how many runs got there. Averaging only the runs that did, as a mean of the survivors,
flatters a sampler that often never arrives.

Counting rule (as the papers count): **iteration k means k updates**. A run's sample of
round index r (0-based) is the state after r + 1 updates, so it is iteration r + 1; the
first iteration a curve is at or below a threshold is ``1 + (first index below)``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from starling.orchestrator.evaluation.student_t import t_quantile

__all__ = [
    "LEVEL",
    "Difference",
    "Hitting",
    "Interval",
    "first_iteration_below",
    "hitting_summary",
    "interval",
    "iteration_value",
    "kaplan_meier",
    "paired_difference",
]

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
    quantile = t_quantile(0.5 + level / 2.0, finite.size - 1)
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


@dataclass(frozen=True)
class Difference:
    """``a − b`` over replicates: its mean ± the interval's half-width (None with fewer
    than two pairs), how many pairs (or runs) entered, and whether they were paired."""

    mean: float
    half: float | None
    n: int
    paired: bool

    def text(self, digits: int = 4) -> str:
        body = _number(self.mean, digits)
        if self.half is not None:
            body = f"{body} ± {_number(self.half, digits)}"
        return body if self.paired else f"{body} (unpaired)"


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def paired_difference(
    a: Mapping[int, tuple[Hashable, float | None]],
    b: Mapping[int, tuple[Hashable, float | None]],
    level: float = LEVEL,
) -> Difference | None:
    """``a − b``: each maps a seed index to ``(seeds, value)``, ``seeds`` what makes two
    runs share their randomness (the seed, and the data's seed). Replicates with the same
    index and the same seeds are paired (module docstring); if no replicate pairs, Welch's
    interval of the two groups' means. None when a side has no finite value."""
    pairs = [
        a[r][1] - b[r][1]  # type: ignore[operator]
        for r in sorted(set(a) & set(b))
        if a[r][0] == b[r][0] and _finite(a[r][1]) and _finite(b[r][1])
    ]
    if pairs:
        d = np.array(pairs, dtype=float)
        half = None
        if d.size > 1:
            q = t_quantile(0.5 + level / 2.0, d.size - 1)
            half = q * float(d.std(ddof=1)) / math.sqrt(d.size)
        return Difference(float(d.mean()), half, int(d.size), True)
    xs = np.array([v for _, v in a.values() if _finite(v)], dtype=float)
    ys = np.array([v for _, v in b.values() if _finite(v)], dtype=float)
    if xs.size == 0 or ys.size == 0:
        return None
    mean = float(xs.mean() - ys.mean())
    if xs.size < 2 or ys.size < 2:
        return Difference(mean, None, int(xs.size + ys.size), False)
    va, vb = xs.var(ddof=1) / xs.size, ys.var(ddof=1) / ys.size
    se = math.sqrt(va + vb)
    if se == 0.0:
        return Difference(mean, 0.0, int(xs.size + ys.size), False)
    dof = (va + vb) ** 2 / (va**2 / (xs.size - 1) + vb**2 / (ys.size - 1))
    half = t_quantile(0.5 + level / 2.0, dof) * se
    return Difference(mean, half, int(xs.size + ys.size), False)


@dataclass(frozen=True)
class Hitting:
    """Censored first-hitting times over replicates (module docstring)."""

    median: float | None
    """Kaplan–Meier median; None when fewer than half the runs got there (> horizon)."""
    restricted: Interval
    """``E min(τ, T)`` ± its t interval over the runs (n = every run)."""
    reached: int
    of: int
    horizon: int
    """T: the iterations a run had to get there (the smallest over the runs)."""

    def text(self) -> str:
        median = f"{self.median:g}" if self.median is not None else f"> {self.horizon}"
        mean = self.restricted.text(integer=True).split(" (")[0]
        return (
            f"median {median}, restricted mean {mean} ({self.reached}/{self.of} reached "
            f"by {self.horizon})"
        )


def kaplan_meier(times: Sequence[float], events: Sequence[bool]) -> list[tuple[float, float]]:
    """The Kaplan–Meier survival curve ``[(t, S(t)), ...]`` at each event time, from
    ``times`` (a hit's iteration, or the censoring time) and ``events`` (hit or censored);
    at a tie, hits come before censorings (a run censored at t was still short at t)."""
    order = sorted(zip(times, events, strict=True), key=lambda te: (te[0], not te[1]))
    at_risk, survival, curve = len(order), 1.0, []
    k = 0
    while k < len(order):
        t = order[k][0]
        hits = sum(1 for tt, e in order[k:] if tt == t and e)
        ties = sum(1 for tt, _ in order[k:] if tt == t)
        if hits:
            survival *= 1.0 - hits / at_risk
            curve.append((float(t), survival))
        at_risk -= ties
        k += ties
    return curve


def hitting_summary(
    hits: Sequence[int | None], horizons: Sequence[int], level: float = LEVEL
) -> Hitting | None:
    """The censored summary of first-hitting iterations ``hits`` (None: never, within its
    run's horizon ``horizons[r]``); None without runs."""
    if not hits:
        return None
    horizon = int(min(horizons))
    times = [h if h is not None else t for h, t in zip(hits, horizons, strict=True)]
    events = [h is not None for h in hits]
    curve = kaplan_meier(times, events)
    median = next((t for t, s in curve if s <= 0.5), None)
    restricted = interval([min(t, horizon) for t in times], level)
    assert restricted is not None  # every run has a (possibly censored) time
    return Hitting(median, restricted, sum(events), len(hits), horizon)
