"""Student's t distribution: its upper tail and its quantile, with the standard library only.

The verdict's stationarity test needs one t quantile a run, and a study's intervals a few.
``scipy.special.stdtrit`` gives them, but importing ``scipy.special`` took about 0.2 s,
which every run's evaluation paid for that one number. Here:

* the upper tail is ``P(T > t) = I_x(ν/2, 1/2) / 2`` with ``x = ν / (ν + t²)``, the
  regularised incomplete beta function evaluated by its continued fraction (modified
  Lentz's method; the symmetry ``I_x(a, b) = 1 − I_{1−x}(b, a)`` where the fraction
  converges slowly);
* the quantile solves ``log P(T > |t|) = log(tail)`` by Newton's method in ``log |t|``
  (near the median, ``log P(0 < T < |t|) = log |p − 1/2|`` instead, where the tail barely
  moves), from the normal quantile (a t quantile is never nearer 0), kept inside a bracket
  that halves whenever a step would leave it. In ``log |t|`` the tail of the heavy-tailed
  t is nearly linear, so few steps are needed even for ν = 1 (the Cauchy law).

``tests/orchestrator/evaluation/test_student_t.py`` holds the quantiles to the closed
forms of ν = 1 and ν = 2 to 1e-13 relative; to ``scipy.special.stdtrit`` to 1e-9 over
degrees of freedom from 0.1 to 10⁷ (integer or not, as Welch's interval gives) and
probabilities from 10⁻¹² to 1 − 10⁻¹² away from the median; and near the median, where
scipy is the one off (4e-10 at ν = 1, 4e-4 at ν = 4), to the first term of their series
to 1e-12.
"""

from __future__ import annotations

import math
import statistics
from functools import lru_cache

__all__ = ["t_quantile", "t_upper_tail"]

_TINY = 1e-300
_EPSILON = 1e-16
_MAX_TERMS = 100_000
_NORMAL = statistics.NormalDist()


def _beta_fraction(x: float, a: float, b: float) -> float:
    """The continued fraction of the incomplete beta function at ``x`` (modified Lentz),
    good for ``x < (a + 1) / (a + b + 2)``."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    value = d
    for m in range(1, _MAX_TERMS):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1.0) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1.0)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            value *= c * d
        if abs(c * d - 1.0) < _EPSILON:
            return value
    raise ArithmeticError(f"the incomplete beta fraction did not converge at x={x}, a={a}")


def _log_half_beta(a: float) -> float:
    """``−log B(a, 1/2) = log Γ(a + 1/2) − log Γ(a) − log Γ(1/2)``. For large ``a`` the two
    log-gammas are large and nearly equal, and their difference lost about ``1e-16 · a``;
    there Stirling's series of each is differenced term by term instead (its next term is
    below 1e-19 from ``a = 50``)."""
    if a < 50.0:
        ratio = math.lgamma(a + 0.5) - math.lgamma(a)
    else:
        z = a + 0.5
        ratio = (
            a * math.log1p(0.5 / a)
            - 0.5
            + 0.5 * math.log(a)
            + (1.0 / z - 1.0 / a) / 12.0
            - (1.0 / z**3 - 1.0 / a**3) / 360.0
            + (1.0 / z**5 - 1.0 / a**5) / 1260.0
        )
    return ratio - 0.5 * math.log(math.pi)


def _log_incomplete_beta(log_x: float, log_one_minus_x: float, a: float, b: float) -> float:
    """``log I_x(a, b)``, the regularised incomplete beta function, for ``0 < x < 1`` given
    by ``log x`` and ``log(1 − x)`` (so that neither loses digits nor underflows), with one
    of ``a``, ``b`` equal to 1/2."""
    x, one_minus_x = math.exp(log_x), math.exp(log_one_minus_x)
    log_front = a * log_x + b * log_one_minus_x + _log_half_beta(a if b == 0.5 else b)
    if x < (a + 1.0) / (a + b + 2.0):
        return log_front + math.log(_beta_fraction(x, a, b) / a)
    complement = math.exp(log_front) * _beta_fraction(one_minus_x, b, a) / b
    return math.log1p(-complement)


def _log_shares(t: float, dof: float) -> tuple[float, float]:
    """``(log x, log(1 − x))`` for ``x = ν / (ν + t²)``, ``t > 0``: from ``r = log(t² / ν)``,
    ``log x = −log(1 + e^r)`` and ``log(1 − x) = −log(1 + e^−r)``, which neither overflow
    for a huge ``t`` nor round ``x`` to 1 for a small one."""
    r = 2.0 * math.log(t) - math.log(dof)
    return -_softplus(r), -_softplus(-r)


def _softplus(z: float) -> float:
    """``log(1 + e^z)`` without overflow."""
    return z + math.log1p(math.exp(-z)) if z > 0.0 else math.log1p(math.exp(z))


def _log_upper_tail(t: float, dof: float) -> float:
    """``log P(T > t)`` for ``t > 0``: ``I_x(ν/2, 1/2) / 2``."""
    log_x, log_one_minus_x = _log_shares(t, dof)
    return _log_incomplete_beta(log_x, log_one_minus_x, dof / 2.0, 0.5) - math.log(2.0)


def _log_central(t: float, dof: float) -> float:
    """``log P(0 < T < t)`` for ``t > 0``: ``I_{1−x}(1/2, ν/2) / 2``, the same function with
    its arguments swapped."""
    log_x, log_one_minus_x = _log_shares(t, dof)
    return _log_incomplete_beta(log_one_minus_x, log_x, 0.5, dof / 2.0) - math.log(2.0)


def t_upper_tail(t: float, dof: float) -> float:
    """``P(T > t)`` for Student's t with ``dof`` degrees of freedom."""
    if not dof > 0 or math.isnan(t):
        raise ValueError(f"need dof > 0 and a number, got dof={dof}, t={t}")
    if t == 0.0:
        return 0.5
    if t < 0.0:
        return 1.0 - t_upper_tail(-t, dof)
    if math.isinf(t):
        return 0.0
    return math.exp(_log_upper_tail(t, dof))


def _log_density(t: float, dof: float) -> float:
    """``log`` of the t density at ``t``."""
    return (
        math.lgamma((dof + 1.0) / 2.0)
        - math.lgamma(dof / 2.0)
        - 0.5 * math.log(dof * math.pi)
        - (dof + 1.0) / 2.0 * (_softplus(2.0 * math.log(abs(t)) - math.log(dof)) if t else 0.0)
    )


@lru_cache(maxsize=1024)
def t_quantile(probability: float, dof: float) -> float:
    """The ``probability`` quantile of Student's t with ``dof`` degrees of freedom
    (``scipy.stats.t.ppf(probability, dof)``; see the module for the precision). Kept
    for the pairs asked again: a study asks the same level and seed count for every
    figure."""
    if not dof > 0 or not 0.0 < probability < 1.0:
        raise ValueError(f"need dof > 0 and 0 < probability < 1, got {dof}, {probability}")
    if math.isinf(dof):
        return _NORMAL.inv_cdf(probability)
    if probability == 0.5:
        return 0.0
    # Each mass below is exact in floats (Sterbenz): no digits of ``probability`` are lost
    # to a 1 − p. Near the median t is small and its tail barely moves with it, so there
    # the central mass P(0 < T < |t|) is matched instead of the tail.
    side = 1.0 if probability > 0.5 else -1.0
    central_mass = abs(probability - 0.5)
    central = central_mass < 0.25
    if central:
        target, log_mass = math.log(central_mass), _log_central
    else:
        tail = 1.0 - probability if side > 0 else probability
        target, log_mass = math.log(tail), _log_upper_tail
    sign = 1.0 if central else -1.0  # how log_mass moves with t
    normal = abs(_NORMAL.inv_cdf(probability))
    low, high = math.log(normal), math.inf  # log t: the answer is above the normal's
    u = low
    for _ in range(200):
        t = math.exp(u)
        mass = log_mass(t, dof)
        gap = sign * (mass - target)  # < 0: t is still below the answer
        if gap == 0.0:
            return side * t
        if gap < 0.0:
            low = u
        else:
            high = u
        # d/du log mass(e^u) = ± t · density(t) / mass(t)
        slope = sign * math.exp(u + _log_density(t, dof) - mass)
        step = u - gap / slope if slope != 0.0 else math.nan  # an underflowed slope: no step
        if not low < step < high:  # out of the bracket (or no slope): halve it, or square t
            step = low + max(abs(low), 1.0) if math.isinf(high) else (low + high) / 2.0
        if abs(step - u) <= 1e-15 * max(abs(u), 1.0):
            return side * math.exp(step)
        u = step
    raise ArithmeticError(f"no t quantile found for p={probability}, dof={dof}")
