"""Async SGHMC ([001] §2, approach I) against the exact law of its stale-gradient recursion.

A parameter server runs SGHMC on ``Σ_i ∇f_i(θ̃_i)``, the workers' latest gradients at their
stale copies θ̃_i of θ, which it sends every s rounds (:mod:`starling.node.samplers.async_sghmc`).
On Bayesian linear regression (d = 2, 4 workers × 16 private synthetic points) and in the
simulator's lockstep model (a message is used from the round after it was sent) the state

    z = (θ, p, θ̃_1..θ̃_K, g̃_1..g̃_K)

— server chain, the workers' copies as landed, the gradients as landed at the server —
follows ``z ← M_k z + c_k + G_k w`` with k = r mod s, whose exact periodic law
(:func:`async_recursion`, written from the update rules, not from the sampler's code) is
what the samples are checked against. The sum of the workers' gradients is the full ∇U,
so staleness is the only error: the tests measure how the variance inflates as s grows,
[001] §2's "unproblematic for small s, problematic with growing s".

Step ε = 1e-2 ([001] §4). Tolerance as in ``test_ec_sghmc.py``: one i.i.d. replicate per
chain (time average after a burn-in whose leftover is asserted below 1e-6), Student-t with
99 dof, z = 4.5 on 5 moments.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from starling.node.params import ConfigError
from tests.node.samplers.test_ec_sghmc import (
    BASE_POINTS,
    Blocks,
    PeriodicLaw,
    Problem,
    Step,
    affine_step,
    ec_law,
    identical_shards,
    periodic_law,
    problem,
    run_experiment,
    sample_cov,
    variance_ratios,
)
from tests.stats import assert_mean_cov_close, compare_mean_cov

EPS = 0.01
DATA = {"source": "synthetic", "size": BASE_POINTS, "seed": 1}


def async_recursion(
    gradients: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    eps: float,
    friction: float = 1.0,
    mass: float = 1.0,
    sync_period: int = 1,
) -> tuple[list[Step], Blocks]:
    """One period of Async SGHMC in the lockstep model; worker i's gradient ``A_i θ − b_i``.

    Round r, with θ̃_i and g̃_i as they landed by the end of round r − 1::

        phase 0:  worker i computes g_i = A_i θ̃_i − b_i
        phase 1:  p' = p − ε Σ_i g̃_i − (εV/m) p + √(2εV) w;   θ' = θ + (ε/m) p'
        landing:  θ̃_i' = θ (sent in phase 0, from the old state) if r ≡ 0 (mod s);
                  g̃_i' = g_i (sent in phase 1)
    """
    K, d = len(gradients), gradients[0][0].shape[0]
    blocks = Blocks(x=d, p=d, xt=K * d, gt=K * d)

    def round_map(send: bool):
        def update(z: np.ndarray, w: np.ndarray) -> np.ndarray:
            s = blocks.split(z)
            x, p = s["x"], s["p"]
            copies = s["xt"].reshape(K, d)
            fresh = np.stack([A @ copies[i] - b for i, (A, b) in enumerate(gradients)])
            total = s["gt"].reshape(K, d).sum(axis=0)
            p1 = p - eps * total - eps * friction / mass * p + np.sqrt(2 * eps * friction) * w
            x1 = x + eps / mass * p1
            xt = np.tile(x, K) if send else s["xt"]
            return np.concatenate([x1, p1, xt, fresh.ravel()])

        return affine_step(update, blocks.size, d)

    return [round_map(k == 0) for k in range(sync_period)], blocks


def async_law(prob: Problem, **hyper) -> tuple[PeriodicLaw, tuple[np.ndarray, np.ndarray]]:
    steps, blocks = async_recursion(list(zip(prob.A, prob.b, strict=True)), **hyper)
    law = periodic_law(steps)
    return law, law.pooled(blocks.readout("x", 0, prob.post_mean.shape[0]))


def _run(s: int, rounds: int, seed: int):
    return run_experiment(
        "async-sghmc", {"eps": EPS, "sync_period": s}, DATA, workers=4, rounds=rounds, seed=seed
    )


@pytest.mark.parametrize(("s", "rounds", "burn"), [(1, 6400, 3200), (3, 6600, 3300)])
def test_async_sghmc_with_a_small_period_samples_its_exact_law(s, rounds, burn):
    specs, samples, metrics = _run(s, rounds, seed=200 + s)
    prob = problem(specs)
    law, (mean, cov) = async_law(prob, eps=EPS, sync_period=s)
    assert law.transient(burn) < 1e-6 and (rounds - burn) % s == 0
    result = assert_mean_cov_close(samples["0"][burn:], mean, cov, z=4.5, label=f"s={s}")
    # The mean is the posterior's (stale gradients of a quadratic are unbiased on average).
    np.testing.assert_allclose(mean, prob.post_mean, atol=1e-9)
    exact = variance_ratios(prob.post_cov, cov)
    measured = variance_ratios(prob.post_cov, sample_cov(samples["0"][burn:]))
    print(
        f"async s={s}: variance ratio exact {exact.round(3)}, measured {measured.round(3)}, "
        f"max |z| {result.max_z:.2f}, gradient staleness "
        f"{metrics['0']['gradient_staleness_mean']:.2f}"
    )
    # Lockstep: the gradient used at round r was taken at the θ sent 2 … s + 1 rounds ago.
    assert metrics["0"]["gradient_staleness_max"] == s + 1
    assert metrics["0"]["message_staleness_mean"] == 1.0
    assert all(metrics[w]["theta_staleness_max"] == s for w in prob.ids)
    assert set(samples) == {"0"}  # workers record nothing


def test_staleness_growing_with_s_degrades_async_sghmc_but_not_ec_sghmc(tmp_path):
    """[001] §2 and §4, with exact laws: Async SGHMC's variance inflates as s grows, and a
    simulated run at s = 16 shows it; EC-SGHMC (α = 1, same data, same ε) barely moves."""
    s, rounds, burn = 16, 8800, 5600
    specs, samples, _ = _run(s, rounds, seed=216)
    prob = problem(specs)
    law, (mean, cov) = async_law(prob, eps=EPS, sync_period=s)
    assert law.transient(burn) < 1e-6 and (rounds - burn) % s == 0
    result = assert_mean_cov_close(samples["0"][burn:], mean, cov, z=4.5, label=f"s={s}")
    measured = variance_ratios(prob.post_cov, sample_cov(samples["0"][burn:]))
    posterior = compare_mean_cov(samples["0"][burn:], prob.post_mean, prob.post_cov)
    print(
        f"async s={s}: variance ratio measured {measured.round(3)}, max |z| vs exact law "
        f"{result.max_z:.2f}, vs posterior {posterior.max_z:.1f}"
    )
    assert measured[-1] > 1.5 and posterior.max_z > 8

    # The whole curve, from the exact laws; EC-SGHMC needs identical shards to be compared
    # on the posterior alone (with private shards its own shard bias would dominate).
    same = problem(
        run_experiment(
            "ec-sghmc",
            {},
            identical_shards(tmp_path / "s.npz", 4),
            workers=4,
            rounds=1,
            seed=0,
            chains=1,
        )[0]
    )
    table = []
    for period in (1, 2, 3, 4, 8, 16, 32):
        _, (_, async_cov) = async_law(same, eps=EPS, sync_period=period)
        _, workers = ec_law(same, eps=EPS, alpha=1.0, sync_period=period)
        table.append(
            (
                period,
                variance_ratios(same.post_cov, async_cov)[-1],
                variance_ratios(same.post_cov, workers[0][1])[-1],
            )
        )
    print("s, largest variance ratio: Async SGHMC, EC-SGHMC (α=1):")
    for row in table:
        print(f"  {row[0]:3d}  {row[1]:.3f}  {row[2]:.3f}")
    async_curve = [row[1] for row in table]
    ec_curve = [row[2] for row in table]
    assert all(b > a for a, b in zip(async_curve, async_curve[1:], strict=False))
    # Measured: 1.13, 1.17, 1.21, 1.25 for s = 1 … 4, then 1.46, 2.18, 25.7 for s = 8, 16, 32
    # (the floor at s = 1 is the two rounds a gradient spends in flight); EC-SGHMC 1.03 flat.
    assert max(async_curve[:4]) < 1.3 and async_curve[-1] > 5
    assert max(abs(r - 1) for r in ec_curve) < 0.05


def test_async_sghmc_diverges_once_staleness_outruns_the_friction():
    """Past some s the exact recursion has no stationary law (spectral radius ≥ 1), and
    the sampler's iterates grow without bound: stale gradients pump energy in faster than
    the friction takes it out ([001] §2: "problematic with growing s")."""
    eps, s = 0.05, 12
    specs, samples, _ = run_experiment(
        "async-sghmc",
        {"eps": eps, "sync_period": s},
        DATA,
        workers=4,
        rounds=2400,
        seed=7,
        chains=8,
    )
    prob = problem(specs)
    with pytest.raises(ValueError, match="spectral radius"):
        async_law(prob, eps=eps, sync_period=s)
    spread = np.abs(samples["0"] - prob.post_mean).max(axis=(1, 2))
    assert spread[-100:].min() > 1e3 * spread[:100].max()
    # The same with s = 1 is stable.
    async_law(prob, eps=eps, sync_period=1)


@pytest.mark.parametrize(
    ("hyper", "field"),
    [({"sync_period": 0}, "sync_period"), ({"eps": 1.0, "friction": 2.5}, "friction")],
)
def test_bad_hyperparameters_are_named(hyper, field):
    with pytest.raises(ConfigError, match=rf"hyperparameters\.{field}"):
        run_experiment("async-sghmc", hyper, DATA, workers=2, rounds=1, seed=0)
