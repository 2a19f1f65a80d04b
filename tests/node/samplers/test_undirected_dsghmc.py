"""D-SGHMC ([000] eq. 23-24) against its exact stationary law on Bayesian linear regression.

On a Gaussian target D-SGHMC is the linear recursion on z = (X, V) of all nodes

    V' = (1 − ηγ) V − η A X + η b + √(2γη) W,     X' = (S⊗I) X + η V',

whose stationary law solves a discrete Lyapunov equation (linear_gaussian.py). With the
constant step of [000] §6.2 (η = 0.1, γ = 7) that law is biased away from the posterior;
the law checked here is the exact stationary one, node by node.

Tolerance: one i.i.d. replicate per independent chain (time average after burn-in), so
|error| / MCSE is Student-t with 99 dof; z = 4.5 over 25 quantities gives a false-alarm
probability < 1e-3 with a fixed seed.
"""

from __future__ import annotations

import pytest

from starling.node.params import ConfigError
from tests.node.samplers.linear_gaussian import (
    network_from_specs,
    run_linear_regression,
    transient,
)
from tests.stats import assert_mean_cov_close, compare_mean_cov, stationary_gaussian

BURN_IN = 1000
ETA, GAMMA = 0.1, 7.0  # [000] §6.2


def test_dsghmc_defaults_are_the_papers():
    from starling.node.samplers.dsghmc import DSGHMCParams

    assert (DSGHMCParams().eta, DSGHMCParams().gamma) == (ETA, GAMMA)


def test_dsghmc_samples_its_exact_stationary_law_on_a_ring():
    specs, samples = run_linear_regression(
        "d-sghmc", {}, topology="ring", nodes=5, size=50, rounds=5000, chains=100, seed=31
    )
    net = network_from_specs(specs)
    law = net.dsghmc(ETA, GAMMA)
    assert transient(law.M, BURN_IN) < 1e-6
    mean, cov = stationary_gaussian(law.M, law.c, law.G)
    for i, node in enumerate(net.ids):
        node_mean, node_cov = law.node_law(mean, cov, i)
        assert_mean_cov_close(samples[node][BURN_IN:], node_mean, node_cov, z=4.5, label=node)
    # Power: the posterior itself is rejected (measured z ≈ 20, cov ≈ 1.3 × posterior).
    post_mean, post_cov = net.posterior()
    assert compare_mean_cov(samples["0"][BURN_IN:], post_mean, post_cov).max_z > 8


def test_dsghmc_with_a_dead_one_way_link_gives_the_lost_weight_to_self():
    specs, samples = run_linear_regression(
        "d-sghmc",
        {},
        topology="full",
        nodes=4,
        size=50,
        rounds=4000,
        chains=100,
        seed=32,
        faults=[{"link": ["2", "0"], "drop": 1.0, "both_ways": False}],
    )
    net = network_from_specs(specs).without_link(sender="2", receiver="0")
    law = net.dsghmc(ETA, GAMMA)
    assert transient(law.M, BURN_IN) < 1e-6
    mean, cov = stationary_gaussian(law.M, law.c, law.G)
    for i, node in enumerate(net.ids):
        node_mean, node_cov = law.node_law(mean, cov, i)
        assert_mean_cov_close(samples[node][BURN_IN:], node_mean, node_cov, z=4.5, label=node)


def test_dsghmc_rejects_an_unstable_friction():
    with pytest.raises(ConfigError, match="hyperparameters.gamma"):
        run_linear_regression(
            "d-sghmc",
            {"eta": 0.1, "gamma": 25.0},
            topology="ring",
            nodes=3,
            size=5,
            rounds=1,
            chains=1,
            seed=0,
        )
