"""The integrators of starling.node.samplers.kernels: their formulas, their draw order, their
inputs.

The laws these kernels sample are checked per sampler (the exact-law tests next to this
file); here each kernel is checked against its equation written out with the same draws,
so a change of order or formula shows up as a difference, not as a slow statistical drift.
"""

from __future__ import annotations

import numpy as np

from starling.node.samplers import kernels

SHAPE = (3, 2)


def _inputs(seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(SHAPE), rng.standard_normal(SHAPE)


def test_langevin_step_is_euler_maruyama_with_one_standard_normal_draw():
    base, gradient = _inputs()
    h = 0.3
    expected_noise = np.random.default_rng(7).standard_normal(SHAPE)
    rng = np.random.default_rng(7)
    out = kernels.langevin_step(base, gradient, h, rng)
    np.testing.assert_array_equal(out, base - h * gradient + np.sqrt(2 * h) * expected_noise)
    # Exactly one (3, 2) draw was taken from the generator.
    follow = np.random.default_rng(7)
    follow.standard_normal(SHAPE)
    assert rng.random() == follow.random()


def test_langevin_step_with_a_scale_steps_on_scaled_potential_with_scaled_noise():
    base, gradient = _inputs(1)
    h, n = 0.01, 5
    noise = np.random.default_rng(3).standard_normal(SHAPE)
    out = kernels.langevin_step(base, gradient, h, np.random.default_rng(3), scale=n)
    np.testing.assert_allclose(
        out, base - h * n * gradient + np.sqrt(2 * h * n) * noise, rtol=1e-14, atol=1e-14
    )


def test_sghmc_momentum_has_friction_and_fluctuation_dissipation_noise():
    p, force = _inputs(2)
    eps, friction, mass = 0.1, 2.0, 4.0
    noise = np.random.default_rng(5).standard_normal(SHAPE)
    out = kernels.sghmc_momentum(p, force, eps, friction, mass, np.random.default_rng(5))
    expected = p - eps * force - eps * friction / mass * p + np.sqrt(2 * eps * friction) * noise
    np.testing.assert_allclose(out, expected, rtol=1e-14, atol=1e-14)
    given = kernels.sghmc_momentum(p, force, eps, friction, mass, np.random.default_rng(5), 0.0)
    np.testing.assert_allclose(given, p - eps * force - eps * friction / mass * p, atol=1e-14)
    np.testing.assert_array_equal(
        kernels.sghmc_position(p, force, eps, mass), p + eps / mass * force
    )


def test_friction_velocity_is_the_same_step_with_unit_mass():
    v, gradient = _inputs(3)
    eta, gamma = 0.1, 7.0
    a = kernels.friction_velocity(v, gradient, eta, gamma, np.random.default_rng(9))
    b = kernels.sghmc_momentum(v, gradient, eta, gamma, 1.0, np.random.default_rng(9))
    np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)


def test_mala_accepts_by_the_metropolis_ratio_and_never_on_nan():
    x = np.zeros(SHAPE)
    y = np.ones(SHAPE)
    ratio = np.array([0.0, -np.inf, np.nan])
    out, accept = kernels.metropolis_accept(x, y, ratio, np.random.default_rng(0))
    assert accept.tolist() == [True, False, False]
    np.testing.assert_array_equal(out, np.array([[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]))


def test_mala_on_a_gaussian_has_the_reversible_log_ratio():
    # F(x) = ‖x‖²/2: the ratio of the exact law times the reverse over the forward proposal.
    x, y = _inputs(4)
    h = 0.2
    ratio = kernels.mala_log_ratio(
        x, y, x, y, 0.5 * np.sum(x**2, axis=1), 0.5 * np.sum(y**2, axis=1), h
    )

    def log_q(to, frm):  # log q(to | frm) up to a constant
        return -np.sum((to - frm + h * frm) ** 2, axis=1) / (4 * h)

    expected = -0.5 * np.sum(y**2, axis=1) + log_q(x, y) + 0.5 * np.sum(x**2, axis=1) - log_q(y, x)
    np.testing.assert_allclose(ratio, expected, rtol=1e-12)


def test_kernels_do_not_mutate_their_inputs():
    base, gradient = _inputs(5)
    keep = base.copy(), gradient.copy()
    rng = np.random.default_rng(0)
    kernels.langevin_step(base, gradient, 0.1, rng, scale=3)
    kernels.sghmc_momentum(base, gradient, 0.1, 1.0, 1.0, rng)
    kernels.friction_velocity(base, gradient, 0.1, 1.0, rng)
    np.testing.assert_array_equal(base, keep[0])
    np.testing.assert_array_equal(gradient, keep[1])
