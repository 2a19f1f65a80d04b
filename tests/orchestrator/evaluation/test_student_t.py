"""Student's t tail and quantile (:mod:`starling.orchestrator.evaluation.student_t`), the
verdict's critical value and a study's intervals, against closed forms and against scipy.

ν = 1 (Cauchy: ``t = tan(π(p − 1/2))``) and ν = 2 (``t = (2p − 1) / √(2p(1 − p))``) have
exact quantiles: 1e-13 relative is a few hundred ulps, room for the Newton steps and the
continued fraction and nothing else (away from the extreme tails, where the closed forms'
own ``tan`` and ``1 − p`` lose digits). Other ν are held to ``scipy.special.stdtrit`` to
1e-9 relative away from the median, where scipy itself is off (4e-10 at ν = 1 against the
closed form, 4e-4 at ν = 4): there the quantile is held to ``(p − 1/2) / f(0)``, the
first term of its series (the next is ``t²`` smaller: 1e-13 at ``p = 1/2 + 10⁻⁷``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from starling.orchestrator.evaluation.student_t import t_quantile, t_upper_tail

PROBABILITIES = [
    1e-10, 1e-8, 1e-5, 0.01, 0.025, 0.1, 0.25, 0.3, 0.49, 0.6, 0.74, 0.75,
    0.76, 0.9, 0.95, 0.975, 0.99, 0.995, 1 - 1e-4, 1 - 1.5625e-4, 1 - 1e-6, 1 - 1e-8,
]  # fmt: skip
DOFS = [1, 1.5, 2, 2.7, 3, 4, 5, 9.3, 10, 29, 30, 100, 999.5, 1e3, 1e4, 1e5]


@pytest.mark.parametrize("probability", [0.5 + 1e-7, 0.5 + 1e-3, 0.6, 0.74, 0.9, 0.975, 0.999])
def test_the_closed_forms_of_one_and_two_degrees_of_freedom(probability):
    cauchy = math.tan(math.pi * (probability - 0.5))
    two = (2 * probability - 1) / math.sqrt(2 * probability * (1 - probability))
    for dof, exact in ((1, cauchy), (2, two)):
        assert abs(t_quantile(probability, dof) - exact) <= 1e-13 * abs(exact)
        assert abs(t_quantile(1 - probability, dof) + exact) <= 1e-13 * abs(exact)


def test_scipy_is_the_one_off_near_the_median():
    """Why scipy is not the reference there."""
    probability = 0.5 + 1e-7
    exact = math.tan(math.pi * (probability - 0.5))
    ours = abs(t_quantile(probability, 1) - exact) / exact
    theirs = abs(float(special.stdtrit(1, probability)) - exact) / exact
    assert ours < 1e-14 < 1e-11 < theirs


@pytest.mark.parametrize("dof", DOFS)
def test_near_the_median_the_quantile_is_the_mass_over_the_density(dof):
    density_at_zero = math.exp(math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2))
    density_at_zero /= math.sqrt(dof * math.pi)
    # The log-gamma differences of large arguments cancel: about 1e-16 · ν relative.
    tolerance = 1e-12 * max(1.0, dof / 1e3)
    for excess in (1e-7, -1e-7, 1e-9):
        probability = 0.5 + excess
        expected = (probability - 0.5) / density_at_zero  # the mass the float p holds
        assert abs(t_quantile(probability, dof) - expected) <= tolerance * abs(expected)


@pytest.mark.parametrize("dof", DOFS)
def test_quantiles_are_scipys(dof):
    for probability in PROBABILITIES:
        ours = t_quantile(probability, dof)
        theirs = float(special.stdtrit(dof, probability))
        assert abs(ours - theirs) <= 1e-9 * abs(theirs), (dof, probability, ours, theirs)


@pytest.mark.parametrize("dof", [1, 3, 30, 1e3])
def test_the_upper_tail_is_scipys(dof):
    for t in [-5.0, -0.3, 0.1, 1.0, 3.0, 30.0, 1e4]:
        theirs = float(special.stdtr(dof, -t))
        assert abs(t_upper_tail(t, dof) - theirs) <= 1e-12 * theirs, (dof, t)
    assert t_upper_tail(0.0, dof) == 0.5
    assert t_upper_tail(math.inf, dof) == 0.0 and t_upper_tail(-math.inf, dof) == 1.0


def test_the_cauchy_tail_is_its_closed_form():
    for t in [-3.0, 1e-9, 1e-6, 0.1, 1.0, 7.0, 1e5]:
        # 1/2 − atan(t)/π, written so that it does not cancel for large t
        exact = math.atan(1 / t) / math.pi if t > 0 else 0.5 - math.atan(t) / math.pi
        assert abs(t_upper_tail(t, 1) - exact) <= 1e-14 * exact, t


def test_the_tail_and_the_quantile_invert_each_other():
    rng = np.random.default_rng(4)
    for _ in range(200):
        dof = float(rng.choice([1.0, 2.5, 7.0, 40.0, 500.0]))
        probability = float(rng.uniform(0.501, 0.9999))
        t = t_quantile(probability, dof)
        assert abs(t_upper_tail(t, dof) - (1 - probability)) <= 1e-12 * (1 - probability)


def test_infinite_degrees_of_freedom_are_the_normal_law():
    assert t_quantile(0.975, math.inf) == pytest.approx(1.959963984540054, rel=1e-15)


@pytest.mark.parametrize(
    "probability, dof", [(0.0, 3), (1.0, 3), (math.nan, 3), (0.9, 0), (0.9, -1), (0.9, math.nan)]
)
def test_what_has_no_quantile_is_refused(probability, dof):
    with pytest.raises(ValueError, match="dof > 0"):
        t_quantile(probability, dof)


def test_random_degrees_of_freedom_and_extreme_tails():
    """2000 seeded draws of ν from 0.1 to 10⁷ (log-uniform) and probabilities down to 10⁻¹²
    on either side: every quantile is found, finite, and scipy's to 1e-9 away from the
    median. Before the log-space shares and the Stirling difference, ν ≈ 0.1 with
    p = 1 − 10⁻¹² (t beyond 10¹⁵⁰, whose square overflowed) and ν ≈ 10⁶ (whose log-gamma
    difference carried a 1e-12 error Newton's method could not get under) found none."""
    rng = np.random.default_rng(7)
    for _ in range(2000):
        dof = float(10 ** rng.uniform(-1, 7))
        if rng.random() < 0.7:
            probability = float(rng.uniform(1e-9, 1 - 1e-9))
        else:
            probability = float(10 ** rng.uniform(-12, -1))
        if rng.random() < 0.5:
            probability = 1 - probability
        ours = t_quantile(probability, dof)
        assert math.isfinite(ours)
        if abs(probability - 0.5) > 0.01:
            theirs = float(special.stdtrit(dof, probability))
            assert abs(ours - theirs) <= 1e-9 * abs(theirs), (dof, probability, ours, theirs)
