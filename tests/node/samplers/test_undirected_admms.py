"""D-ADMMS ([000] Algorithm 1) against its exact stationary law; ADMM against the MAP.

On a Gaussian target the D-ADMMS round (dual ascent, then the noisy prox in closed form) is
a linear recursion on (X, P) of all nodes; the derivation is in
``linear_gaussian.Network.dadmms``. Σ_i p_i stays 0, so the dual lives in 1^⊥ and the
recursion restricted there is stable; its stationary law (discrete Lyapunov equation) is the
law checked here. For finite ρ it is not the posterior: with ρ = 5 ([000] §6.2) its mean is
the posterior mean exactly but its covariance is about half the posterior's (measured on
this data: node 0 variances 0.033 / 0.035 against 0.066 / 0.071).

Tolerance: one i.i.d. replicate per independent chain (time average after burn-in);
|error| / MCSE is Student-t with 99 dof and z = 4.5 (false alarm < 1e-3 over all nodes).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.node.samplers.linear_gaussian import (
    network_from_specs,
    run_linear_regression,
    transient,
)
from tests.stats import assert_mean_cov_close, compare_mean_cov, stationary_gaussian

BURN_IN = 300
RHO = 5.0  # [000] §6.2


@pytest.mark.parametrize(("topology", "nodes", "seed"), [("ring", 5, 51), ("full", 4, 52)])
def test_dadmms_samples_its_exact_stationary_law(topology, nodes, seed):
    specs, samples = run_linear_regression(
        "d-admms",
        {"rho": RHO},
        topology=topology,
        nodes=nodes,
        size=50,
        rounds=3000,
        chains=100,
        seed=seed,
    )
    net = network_from_specs(specs)
    law = net.dadmms(RHO)
    assert transient(law.M, BURN_IN) < 1e-6
    mean, cov = stationary_gaussian(law.M, law.c, law.G)
    post_mean, post_cov = net.posterior()
    for i, node in enumerate(net.ids):
        node_mean, node_cov = law.node_law(mean, cov, i)
        np.testing.assert_allclose(node_mean, post_mean, atol=1e-10)  # unbiased mean
        assert_mean_cov_close(samples[node][BURN_IN:], node_mean, node_cov, z=4.5, label=node)
        # Power: the posterior covariance is rejected (measured z in the hundreds).
        assert compare_mean_cov(samples[node][BURN_IN:], post_mean, post_cov).max_z > 20


def test_admm_without_noise_converges_to_the_map():
    specs, samples = run_linear_regression(
        "admm", {"rho": RHO}, topology="ring", nodes=5, size=50, rounds=300, chains=4, seed=53
    )
    post_mean, _ = network_from_specs(specs).posterior()
    for node, values in samples.items():
        np.testing.assert_allclose(values[-1], np.tile(post_mean, (4, 1)), atol=1e-8, err_msg=node)
