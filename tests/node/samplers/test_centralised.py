"""The centralised references (ULA, SGLD, SGHMC, MALA), one node holding all the data.

Laws checked, on Bayesian linear regression (d = 2, n = 100 points, [000] §6.2 model):

* MALA — the exact conjugate posterior (accept/reject removes the discretisation bias);
* ULA with a constant step — the exact stationary law of ``x ← (I − hA) x + hb + √(2h) w``
  (discrete Lyapunov equation), with decaying steps the exact law propagated round by round;
* SGLD and SGHMC with mini-batches — the exact stationary mean and covariance of the
  random-coefficient recursion (a fresh uniform batch without replacement per chain and
  step; :func:`tests.stats.random_affine_stationary`); SGHMC full-batch — its Lyapunov law.

Tolerance: chains are independent, so each chain's time average after burn-in is one i.i.d.
replicate and |error| / MCSE is Student-t with 99 dof. z = 4.5 on 5 quantities gives a false
alarm below 1e-4 per check (fixed seeds). Burn-in is justified by the recursion's
contraction rate (asserted below 1e-6 of the initial offset).
"""

from __future__ import annotations

import numpy as np
import pytest

from starling.node.assemble import build_program, node_rng
from starling.node.data.shards import load_shard
from starling.node.models import build_model
from starling.node.params import ConfigError
from tests.node.samplers.linear_gaussian import (
    network_from_specs,
    run_linear_regression,
    transient,
)
from tests.stats import (
    assert_mean_cov_close,
    compare_mean_cov,
    propagate_gaussian,
    random_affine_stationary,
    stationary_gaussian,
)

SIZE, CHAINS, ROUNDS, BURN_IN = 100, 100, 4000, 500
EYE, ZERO = np.eye(2), np.zeros((2, 2))


def _run(algorithm, hyper, seed, rounds=ROUNDS):
    return run_linear_regression(
        algorithm,
        hyper,
        topology="none",
        nodes=1,
        size=SIZE,
        rounds=rounds,
        chains=CHAINS,
        seed=seed,
    )


def _per_point(specs, net):
    """The potential split per data point: ``A = P + Σ_k a_k``, ``b = Σ_k c_k``."""
    model = build_model(specs[0].model)
    shard = load_shard(specs[0].data, model)
    a = np.einsum("ki,kj->kij", shard.X, shard.X) / model.noise_std**2
    c = shard.X * shard.y[:, None] / model.noise_std**2
    P = EYE * specs[0].prior_share / model.prior_var
    np.testing.assert_allclose(P + a.sum(axis=0), net.A[0], rtol=1e-12)
    np.testing.assert_allclose(c.sum(axis=0), net.b[0], rtol=1e-12, atol=1e-12)
    return a, c, P


# --- MALA ------------------------------------------------------------------------------


def test_mala_samples_the_exact_posterior_where_ula_would_be_far_off():
    step = 0.2
    specs, samples = _run("mala", {"step": step}, seed=61, rounds=3000)
    net = network_from_specs(specs)
    # The model's own conjugate posterior, not one derived from the sampler's gradient.
    assert_mean_cov_close(samples["0"][300:], net.exact_mean, net.exact_cov, z=4.5)
    # With the same step ULA's stationary variance is ≥ 1.5 × the posterior's along the
    # stiff direction (h·λ_max ≈ 1.2), so the check above is not trivially met.
    ula = net.dsgld(step)
    _, ula_cov = stationary_gaussian(ula.M, ula.c, ula.G)
    assert np.max(np.linalg.eigvalsh(np.linalg.solve(net.exact_cov, ula_cov))) > 1.5


def test_mala_keeps_its_acceptance_rate_in_the_checkpointed_state():
    specs, _ = _run("mala", {"step": 0.2}, seed=62, rounds=1)
    spec = specs[0]
    rng = node_rng(spec)
    program = build_program(spec, rng)
    for k in range(200):
        program.incoming(k, 0, {}, rng)
    rate = program.acceptance_rate()
    assert rate.shape == (CHAINS,)
    assert 0.3 < rate.mean() < 0.99  # measured 0.62 at this step
    assert program.metrics()["acceptance_rate"] == pytest.approx(rate.mean())
    state = program.state()
    assert set(state) == {"x", "accepted", "proposed"} and float(state["proposed"]) == 200
    restored = build_program(spec, node_rng(spec))
    restored.restore(state)
    np.testing.assert_array_equal(restored.acceptance_rate(), rate)
    np.testing.assert_array_equal(restored.sample(), program.sample())


# --- ULA -------------------------------------------------------------------------------


def test_ula_samples_its_exact_stationary_law_not_the_posterior():
    eta = 0.05
    specs, samples = _run("ula", {"eta": eta}, seed=63)
    net = network_from_specs(specs)
    law = net.dsgld(eta)  # one node, S = [[1]]: x ← (I − ηA) x + ηb + √(2η) w
    assert transient(law.M, BURN_IN) < 1e-6
    mean, cov = stationary_gaussian(law.M, law.c, law.G)
    assert_mean_cov_close(samples["0"][BURN_IN:], mean, cov, z=4.5)
    # Power: ULA's O(η) bias (variance ≈ +15 %) is seen against the posterior (z ≈ 35).
    assert compare_mean_cov(samples["0"][BURN_IN:], net.exact_mean, net.exact_cov).max_z > 8


def test_ula_with_decaying_steps_follows_its_exact_law_round_by_round():
    eta, decay, k0, rounds = 0.1, 0.5, 10, 2000
    specs, samples = _run("ula", {"eta": eta, "decay": decay, "k0": k0}, seed=64, rounds=rounds)
    net = network_from_specs(specs)
    steps = (net.dsgld(eta / (k0 + k + 1) ** decay) for k in range(rounds))
    checked = [499, 1999]
    _, _, laws = propagate_gaussian(
        ((s.M, s.c, s.G) for s in steps), np.zeros(2), EYE, record=checked
    )
    for k in checked:  # one round: each chain contributes one draw of that round's law
        assert_mean_cov_close(samples["0"][k : k + 1], *laws[k], z=4.5, label=f"round {k}")


# --- SGLD ------------------------------------------------------------------------------


def test_sgld_samples_the_exact_moments_of_its_minibatch_recursion():
    h, batch = 0.02, 10
    specs, samples = _run("sgld", {"eta": h, "batch_size": batch}, seed=65)
    net = network_from_specs(specs)
    a, c, P = _per_point(specs, net)
    scale = SIZE / batch
    # x ← (I − h Â) x + h b̂ + √(2h) w, Â = P + (n/b) Σ_batch a_k, b̂ = (n/b) Σ_batch c_k.
    mean, cov, rate = random_affine_stationary(
        EYE - h * P, -h * scale * a, np.zeros(2), h * scale * c, batch, np.sqrt(2 * h) * EYE
    )
    assert rate**BURN_IN < 1e-6
    assert_mean_cov_close(samples["0"][BURN_IN:], mean, cov, z=4.5)
    # Power: the batch noise matters — full-batch ULA's law at this step is rejected
    # (measured z ≈ 36; SGLD's variance ≈ 1.4 × the posterior's, ULA's ≈ 1.06 ×).
    ula = net.dsgld(h)
    assert (
        compare_mean_cov(samples["0"][BURN_IN:], *stationary_gaussian(ula.M, ula.c, ula.G)).max_z
        > 8
    )


# --- SGHMC -----------------------------------------------------------------------------


def _sghmc_matrix(eps, friction, mass, A):
    """θ' = θ + (ε/m) p;  p' = p − ε(Aθ' − b) − (εV/m) p + √(2εV) w, on z = (θ, p)."""
    return np.block(
        [[EYE, eps / mass * EYE], [-eps * A, (1 - eps * friction / mass) * EYE - eps**2 / mass * A]]
    )


@pytest.mark.parametrize("batch", [0, 10])
def test_sghmc_samples_the_exact_moments_of_its_recursion(batch):
    eps, friction, mass = 0.05, 2.0, 1.0
    specs, samples = _run(
        "sghmc",
        {"eps": eps, "friction": friction, "mass": mass, "batch_size": batch},
        seed=66 + batch,
    )
    net = network_from_specs(specs)
    G = np.vstack([ZERO, np.sqrt(2 * eps * friction) * EYE])
    if batch == 0:
        M = _sghmc_matrix(eps, friction, mass, net.A[0])
        assert transient(M, BURN_IN) < 1e-6
        mean, cov = stationary_gaussian(M, np.concatenate([np.zeros(2), eps * net.b[0]]), G)
    else:
        a, c, P = _per_point(specs, net)
        scale = SIZE / batch
        Mk = np.array(
            [
                np.block([[ZERO, ZERO], [-eps * scale * ak, -(eps**2) / mass * scale * ak]])
                for ak in a
            ]
        )
        ck = np.array([np.concatenate([np.zeros(2), eps * scale * ci]) for ci in c])
        mean, cov, rate = random_affine_stationary(
            _sghmc_matrix(eps, friction, mass, P), Mk, np.zeros(4), ck, batch, G
        )
        assert rate**BURN_IN < 1e-6
    theta = np.hstack([EYE, ZERO])
    assert_mean_cov_close(samples["0"][BURN_IN:], theta @ mean, theta @ cov @ theta.T, z=4.5)


# --- configuration ---------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["ula", "sgld", "sghmc", "mala"])
def test_centralised_references_refuse_to_run_on_several_nodes(algorithm):
    with pytest.raises(ConfigError, match=r"a centralised reference; run it on a single node"):
        run_linear_regression(
            algorithm, {}, topology="ring", nodes=3, size=10, rounds=1, chains=1, seed=0
        )
