"""DG-LMC ([003] Algorithm 1) against its exact stationary law, its bias in ρ, lost messages,
real processes and bad input.

**The exact law.** On the conjugate Gaussian model ([003] §5.1) worker i's potential is
quadratic, ``U_i(z) = ½ zᵀH_i z − h_iᵀz``. One round is then affine in the state
``s = (θ⁽ᵗ⁾, z⁽ᵗ⁺¹⁾_1:b)`` plus Gaussian noise. With ``q = Σ 1/ρ_i``,
``K_i = (1 − γ_i/ρ_i) I − γ_i H_i`` and ``S_i = Σ_{k<N_i} K_i^k``:

    θ'   = Σ_i (1/(ρ_i q)) z_i + q^{-½} ξ                               ([003] eq. 5)
    z_i' = K_i^{N_i} z_i + (γ_i/ρ_i) S_i θ' + γ_i S_i h_i + Σ_{k<N_i} K_i^k √(2γ_i) w_k

(N_i LMC steps from z_i against the θ' just drawn, Algorithm 1's inner loop). This is
``s ← M s + c + G w``; :func:`tests.stats.stationary_gaussian` solves its stationary mean
and covariance (a discrete Lyapunov equation). ``H_i``, ``h_i`` are read off each worker's
own potential and checked against the model's conjugate posterior, and ρ_i, γ_i, N_i are
recomputed here from [003] §3.2 — not taken from the sampler — so the check is independent.

**Tolerance.** Chains are independent (each draws its own noise at every node), so each
chain's time average after burn-in is one i.i.d. replicate and |error| / MCSE is Student-t
with chains − 1 = 99 dof (:mod:`tests.stats`). z = 4.5 over the 5 checked quantities (2 means,
3 covariance entries) gives a false alarm below 1e-4 per check, with fixed seeds. Burn-in is
justified by the recursion's contraction (asserted: less than 1e-6 of the initial offset
survives it).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from starling.node.assemble import build_program, node_rng
from starling.node.data.shards import load_shard
from starling.node.engine import simulate
from starling.node.faults import withheld_by_schedule
from starling.node.messages import Message
from starling.node.models import build_model
from starling.node.params import ConfigError
from starling.node.samplers.dglmc import DGLMCParams, plan_local_steps, worker_constants
from starling.node.spec import ModelSpec, NodeSpec
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.evaluation.metrics import gaussian_w2
from starling.orchestrator.planning.node_specs import node_specs
from tests.node.test_runtime_harness import Cluster, start_run, wait_done
from tests.stats import assert_mean_cov_close, stationary_gaussian

CHAINS, BURN_IN, BIAS_BURN_IN = 100, 600, 1500


def _experiment(workers=4, size=50, rounds=3000, seed=5, hyper=None, nodes=None, **extra):
    raw = {
        "name": "dglmc-check",
        "algorithm": "dg-lmc",
        "hyperparameters": hyper or {},
        "model": {"name": "conjugate_gaussian", "params": {"dim": 2}},
        "data": {"source": "synthetic", "size": size, "seed": 8},
        "topology": {"kind": "star", "nodes": workers + 1},
        "rounds": rounds,
        "chains": CHAINS,
        "seed": seed,
        **extra,
    }
    if nodes is not None:
        raw["nodes"] = nodes
        del raw["topology"]["nodes"]
    return parse_experiment(raw)


# ----------------------------------------------------------------------------------------
# The problem as the workers see it, and DG-LMC's exact law on it.


class Problem:
    """The workers' quadratic potentials ``U_i(z) = ½ zᵀH_i z − h_iᵀz`` and settings."""

    def __init__(self, specs: list[NodeSpec]):
        self.workers = [s for s in specs if s.role == "worker"]
        model = build_model(self.workers[0].model)
        shards = [load_shard(s.data, model) for s in self.workers]
        self.H, self.h, self.M = [], [], []
        for spec, shard in zip(self.workers, shards, strict=True):
            potential = model.local_potential(shard, spec.prior_share, 0)
            d = potential.dim
            offset = -potential.grad(np.zeros((1, d)))[0]
            slope = potential.grad(np.eye(d)) + offset[None, :]
            self.H.append((slope + slope.T) / 2)
            self.h.append(offset)
            self.M.append(float(np.linalg.eigvalsh(self.H[-1])[-1]))
        exact = model.exact_posterior(shards)
        self.posterior = exact.mean, exact.cov
        cov = np.linalg.inv(sum(self.H))
        # Σ_i U_i is the negative log posterior: the potentials must say so.
        np.testing.assert_allclose(cov @ sum(self.h), exact.mean, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(cov, exact.cov, rtol=1e-9)

    @property
    def dim(self) -> int:
        return self.H[0].shape[0]

    def settings(self) -> tuple[list[float], list[float], list[int]]:
        """ρ_i, γ_i, N_i by [003] §3.2 from each worker's own hyperparameters."""
        rho, gamma, guideline, given, tau = [], [], [], [], []
        for spec, M in zip(self.workers, self.M, strict=True):
            hp = spec.hyperparameters
            r = hp.get("rho") or 1.0 / (5.0 * M)  # §5.1
            g = hp.get("gamma") or 0.25 * r / (r * M + 1.0)  # §3.2.1
            rho.append(r)
            gamma.append(g)
            guideline.append(r / (g * (r * M + 1.0)))
            given.append(hp.get("local_steps", 0))
            tau.append(hp.get("step_time", 0.0))
        defaults = [t for t, n in zip(guideline, given, strict=True) if not n]
        n_avg = math.ceil(round(sum(defaults) / len(defaults), 9)) if defaults else 1
        steps = [n or n_avg for n in given]
        if all(t > 0 for t in tau):  # §3.2.2: N_i = q_i N̄ b, q_i ∝ 1/τ_i
            b, n_bar = len(steps), math.ceil(sum(steps) / len(steps))
            speed = [1.0 / t for t in tau]
            steps = [max(1, math.floor(s / sum(speed) * n_bar * b + 0.5)) for s in speed]
        return rho, gamma, steps

    def recursion(self, rho, gamma, steps):
        """``(M, c, G)`` of one round on ``s = (θ, z_1, …, z_b)`` (module docstring)."""
        d, b = self.dim, len(self.H)
        width = (b + 1) * d
        q = sum(1.0 / r for r in rho)
        P = np.hstack([np.eye(d) / (r * q) for r in rho])  # θ' = P z + q^{-½} ξ
        Mat = np.zeros((width, width))
        c = np.zeros(width)
        G = np.zeros((width, width))
        Mat[:d, d:] = P
        G[:d, :d] = np.eye(d) / math.sqrt(q)
        for i in range(b):
            K = (1 - gamma[i] / rho[i]) * np.eye(d) - gamma[i] * self.H[i]
            powers = [np.linalg.matrix_power(K, k) for k in range(steps[i])]
            S = sum(powers)
            rows = slice((i + 1) * d, (i + 2) * d)
            pull = (gamma[i] / rho[i]) * S
            Mat[rows, d:] = pull @ P
            Mat[rows, rows] += np.linalg.matrix_power(K, steps[i])
            c[rows] = gamma[i] * S @ self.h[i]
            G[rows, :d] = pull / math.sqrt(q)
            noise = 2.0 * gamma[i] * sum(k @ k.T for k in powers)
            G[rows, rows] = np.linalg.cholesky(noise)
        return Mat, c, G

    def theta_law(self, rho, gamma, steps, burn_in=BURN_IN):
        """Stationary mean and covariance of θ, and how much of a start survives burn-in."""
        Mat, c, G = self.recursion(rho, gamma, steps)
        mean, cov = stationary_gaussian(Mat, c, G)
        d = self.dim
        radius = float(np.max(np.abs(np.linalg.eigvals(Mat))))
        return mean[:d], cov[:d, :d], radius**burn_in

    def axda_law(self, rho):
        """π_ρ, the θ-marginal of [003] eq. 2-3: each local Gaussian factor N(H_i⁻¹h_i, H_i⁻¹)
        convolved with N(0, ρ_i I). DG-LMC's law tends to it as γ → 0 (Prop. 4)."""
        precisions = [
            np.linalg.inv(np.linalg.inv(H) + r * np.eye(self.dim))
            for H, r in zip(self.H, rho, strict=True)
        ]
        cov = np.linalg.inv(sum(precisions))
        mean = cov @ sum(
            p @ np.linalg.solve(H, h) for p, H, h in zip(precisions, self.H, self.h, strict=True)
        )
        return mean, cov


def _master(samples) -> np.ndarray:
    (node,) = samples  # only the master records samples
    return samples[node]


# ----------------------------------------------------------------------------------------
# Exact stationary law.


@pytest.mark.parametrize(
    ("label", "hyper", "overrides"),
    [
        # [003] §3.2 defaults throughout: ρ_i = 1/(5M_i), γ_i = 0.25ρ_i/(ρ_iM_i+1), N = N_avg.
        ("defaults", {}, {}),
        # Per-worker overrides: worker 1 its own ρ and γ, worker 2 its own N_i, worker 3
        # starts from N(0, I); the experiment-level local_steps for the rest.
        (
            "heterogeneous",
            {"local_steps": 2},
            {
                "1": {"rho": 0.004, "gamma": 0.0005},
                "2": {"local_steps": 6},
                "3": {"init": "normal"},
            },
        ),
        (
            "stragglers",
            {"local_steps": 3},
            {
                "1": {"step_time": 1.0},
                "2": {"step_time": 2.0},
                "3": {"step_time": 4.0},
                "4": {"step_time": 0.5},
            },
        ),  # straggler-aware: N̄ = 3, b = 4, q ∝ 1/τ gives N = (3, 2, 1, 6)
    ],
)
def test_theta_follows_the_exact_stationary_law(label, hyper, overrides):
    nodes = [{"id": "m", "role": "master"}] + [
        {"id": str(k), "hyperparameters": overrides.get(str(k), {})} for k in range(1, 5)
    ]
    specs = node_specs(_experiment(hyper=hyper, nodes=nodes, seed=31))
    problem = Problem(specs)
    rho, gamma, steps = problem.settings()
    metrics: dict = {}
    samples = _master(simulate(specs, metrics_out=metrics))
    assert [metrics[s.node_id]["local_steps"] for s in problem.workers] == steps
    mean, cov, transient = problem.theta_law(rho, gamma, steps)
    assert transient < 1e-6
    result = assert_mean_cov_close(samples[BURN_IN:], mean, cov, z=4.5, label=label)
    print(f"{label}: N = {steps}; {result.summary()}")
    assert metrics["m"]["stale_inputs"] == metrics["m"]["missing_inputs"] == 0


def test_bias_against_the_posterior_shrinks_with_rho():
    """[003] Prop. 3: W2(π_ρ, π) = O(ρ). The θ-law of DG-LMC carries two biases, the AXDA one
    (π_ρ ≠ π, Prop. 3) and the LMC one (Π_ρ,γ,N ≠ Π_ρ, Prop. 4). With a small step
    (γ = 0.05 ρ/(ρM+1), N = 20 steps a round) the LMC part is small, and going from ρ = 1/M to
    ρ = 1/(20M) cuts the covariance inflation against the posterior by more than ten in the
    exact laws; the samples match their own exact law at both ρ, and show the same drop
    within their (larger, at small ρ: slower mixing) Monte Carlo error.

    With γ tied to ρ by the §3.2.1 default (γ/ρ fixed) the LMC bias does not vanish as ρ → 0:
    the exact law's covariance stays about 10 % too wide (asserted on the exact laws below)."""
    problem = Problem(node_specs(_experiment(workers=4, size=50)))
    M = max(problem.M)
    post_mean, post_cov = problem.posterior
    excess, exact = {}, {}
    for label, rho, seed in (("rho=1/M", 1.0 / M, 41), ("rho=1/(20M)", 1.0 / (20.0 * M), 42)):
        gamma = 0.05 * rho / (rho * M + 1.0)
        hyper = {"rho": rho, "gamma": gamma, "local_steps": 20}
        specs = node_specs(_experiment(workers=4, size=50, rounds=4500, seed=seed, hyper=hyper))
        run = Problem(specs)  # the same shards as ``problem``, these hyperparameters
        r, g, n = run.settings()
        samples = _master(simulate(specs))[BIAS_BURN_IN:]
        mean, cov, transient = run.theta_law(r, g, n, burn_in=BIAS_BURN_IN)
        assert transient < 1e-6
        assert_mean_cov_close(samples, mean, cov, z=4.5, label=label)
        exact[label] = np.trace(cov) / np.trace(post_cov) - 1.0
        # E‖θ − posterior mean‖² over the posterior's trace (1 when the law is right), one
        # i.i.d. replicate per chain.
        ratio = np.mean(np.sum((samples - post_mean) ** 2, axis=-1), axis=0) / np.trace(post_cov)
        excess[label] = (ratio.mean() - 1.0, ratio.std(ddof=1) / np.sqrt(ratio.size))
        w2 = gaussian_w2(mean, cov, post_mean, post_cov)
        axda_w2 = gaussian_w2(*problem.axda_law(r), post_mean, post_cov)
        print(
            f"{label}: W2 to the posterior: exact law {w2:.4g}, π_ρ {axda_w2:.4g}; "
            f"covariance trace inflation: exact {exact[label]:.4f}, "
            f"samples {excess[label][0]:.4f} ± {excess[label][1]:.4f}"
        )
    assert exact["rho=1/M"] > 10 * exact["rho=1/(20M)"] > 0
    (big, big_se), (small, small_se) = excess["rho=1/M"], excess["rho=1/(20M)"]
    assert big > 10 * big_se  # the inflation at ρ = 1/M is plain in the samples
    assert small + 4.5 * small_se < big / 3  # and clearly smaller at ρ = 1/(20M)
    # Default γ (= 0.25 ρ/(ρM+1)) and N: the exact law's inflation levels off near 10 %.
    inflation = []
    for factor in (1, 5, 20, 100):
        r, g, n = _default_settings(problem, 1.0 / (factor * M))
        inflation.append(np.trace(problem.theta_law(r, g, n)[1]) / np.trace(post_cov) - 1)
    assert np.all(np.diff(inflation) < 0)
    assert 0.05 < inflation[-1] < 0.15, inflation


def _default_settings(problem, rho):
    """A common ρ with [003] §3.2's default γ_i and N_avg."""
    r = [rho] * len(problem.M)
    g = [0.25 * rho / (rho * M + 1.0) for M in problem.M]
    guideline = [rho / (gi * (rho * M + 1.0)) for gi, M in zip(g, problem.M, strict=True)]
    n = math.ceil(round(sum(guideline) / len(guideline), 9))
    return r, g, [n] * len(r)


# ----------------------------------------------------------------------------------------
# Local-steps plan.


def test_plan_local_steps_follows_section_3_2_2():
    def report(rho, local, guideline, tau):
        return np.array([rho, local, guideline, tau])

    # Defaults: N_avg = ⌈mean of the §3.2.2 terms⌉ (4.000000000000001 counts as 4).
    assert plan_local_steps({"a": report(1, 0, 4.000000000000001, 0), "b": report(1, 0, 4, 0)}) == {
        "a": 4,
        "b": 4,
    }
    assert plan_local_steps({"a": report(1, 0, 3.0, 0), "b": report(1, 0, 4.5, 0)}) == {
        "a": 4,
        "b": 4,
    }
    # A given local_steps wins; the others share N_avg of their own terms.
    assert plan_local_steps({"a": report(1, 10, 4, 0), "b": report(1, 0, 2, 0)}) == {
        "a": 10,
        "b": 2,
    }
    # Straggler-aware: N̄ = 4, b = 3, q ∝ (1, 1/2, 1/4) → 12·(4/7, 2/7, 1/7) = 6.86, 3.43, 1.71.
    plan = plan_local_steps({w: report(1, 0, 4, t) for w, t in (("a", 1), ("b", 2), ("c", 4))})
    assert plan == {"a": 7, "b": 3, "c": 2}
    # One worker without a step time: no redistribution.
    plan = plan_local_steps({"a": report(1, 0, 4, 1), "b": report(1, 0, 4, 0)})
    assert plan == {"a": 4, "b": 4}


# ----------------------------------------------------------------------------------------
# Lost messages: the master reuses the last z_i, a worker the last θ, and both count it.


def test_lost_messages_reuse_the_last_value_and_are_counted():
    """Star of a master ("0") and three workers. Scheduled faults:

    * 1 → 0 down in rounds 0..4: the master has never heard worker 1, so eq. 5 runs over
      workers 2 and 3 (5 ``missing_inputs``);
    * 2 → 0 down in rounds 50..79 (one way): the master reuses worker 2's z of round 49
      (30 ``stale_inputs``);
    * 3 ↔ 0 down in rounds 100..109 (both ways): 10 more stale z at the master, and worker 3
      runs against the θ of round 99 (10 ``stale_inputs`` at worker 3).

    A fault changes nothing before it starts, θ stays near the posterior while links are
    down, and once they are back the chain returns to DG-LMC's exact stationary law."""
    faults = [
        {"link": ["1", "0"], "rounds": [0, 5], "both_ways": False},
        {"link": ["2", "0"], "rounds": [50, 80], "both_ways": False},
        {"link": ["3", "0"], "rounds": [100, 110]},
    ]
    experiment = _experiment(workers=3, rounds=2500, seed=51, faults=faults)
    specs = node_specs(experiment)
    metrics: dict = {}
    samples = _master(simulate(specs, metrics_out=metrics))
    assert metrics["0"]["missing_inputs"] == 5
    assert metrics["0"]["stale_inputs"] == 30 + 10
    assert metrics["3"]["stale_inputs"] == 10
    assert metrics["1"]["stale_inputs"] == metrics["2"]["stale_inputs"] == 0
    assert all(metrics[w]["missing_inputs"] == 0 for w in ("1", "2", "3"))
    assert np.all(np.isfinite(samples))

    # Against a run with only the first fault: identical up to round 49, different after.
    first_only = node_specs(_experiment(workers=3, rounds=2500, seed=51, faults=faults[:1]))
    reference = _master(simulate(first_only))
    assert reference[:50].tobytes() == samples[:50].tobytes()
    assert not np.array_equal(reference[50], samples[50])

    # While links are down θ stays where the posterior is (within 10 posterior std).
    problem = Problem(specs)
    post_mean, post_cov = problem.posterior
    spread = np.abs(samples[:120] - post_mean) / np.sqrt(np.diag(post_cov))
    assert spread.max() < 10, spread.max()
    mean, cov, _ = problem.theta_law(*problem.settings())
    assert_mean_cov_close(samples[110 + BURN_IN :], mean, cov, z=4.5, label="after faults")


def test_random_drops_are_counted_one_for_one():
    """Every worker ↔ master link drops each round's message with probability 0.3 for the
    first 200 rounds: the master's stale + missing counts equal the z messages the fault
    schedule withheld, each worker's the θ messages withheld from it."""
    faults = [{"link": "all", "drop": 0.3, "rounds": [0, 200]}]
    specs = node_specs(_experiment(workers=3, rounds=300, seed=52, faults=faults))
    metrics: dict = {}
    samples = _master(simulate(specs, metrics_out=metrics))
    assert np.all(np.isfinite(samples))
    by_id = {s.node_id: s for s in specs}

    def withheld(sender, receiver):
        faults = by_id[sender].link_faults
        return sum(withheld_by_schedule(faults, sender, receiver, t) for t in range(300))

    lost_z = sum(withheld(w, "0") for w in ("1", "2", "3"))
    assert 0.2 * 600 < lost_z < 0.4 * 600  # the schedule does drop about 30 %
    master = metrics["0"]
    assert master["stale_inputs"] + master["missing_inputs"] == lost_z
    for w in ("1", "2", "3"):
        worker = metrics[w]
        assert worker["stale_inputs"] + worker["missing_inputs"] == withheld("0", w)


# ----------------------------------------------------------------------------------------
# Real processes.


@pytest.mark.e2e
def test_real_processes_equal_the_simulator_bit_for_bit(tmp_path):
    """A master and two workers as ``python -m starling.node serve`` processes, with worker 1's link
    to the master down in rounds 5..8: the master's samples equal the simulation's byte for
    byte, and its status reports the same 4 stale inputs."""
    experiment = parse_experiment(
        {
            "name": "dglmc-wire",
            "algorithm": "dg-lmc",
            "model": {"name": "conjugate_gaussian", "params": {"dim": 2}},
            "data": {"source": "synthetic", "size": 200, "seed": 5},
            "topology": {"kind": "star", "nodes": 3},
            "nodes": [
                {"id": "m", "role": "master"},
                {"id": "w1", "hyperparameters": {"step_time": 1.0}},
                {"id": "w2", "hyperparameters": {"step_time": 3.0}},
            ],
            "faults": [{"link": ["w1", "m"], "rounds": [5, 9], "both_ways": False}],
            "rounds": 20,
            "chains": 3,
            "seed": 13,
            "round_deadline": 20.0,  # never reached: a withheld message is announced
        }
    )
    with Cluster(tmp_path) as cluster:
        procs = cluster.start_nodes(experiment.node_ids)
        specs = node_specs(experiment, {n: p.address for n, p in procs.items()})
        clients = start_run(procs, specs)
        wait_done(clients, 60)
        status = {node: client.status() for node, client in clients.items()}
        collected = np.stack([value for _, value in clients["m"].samples()])
    assert all(s.error == "" for s in status.values()), status
    metrics: dict = {}
    expected = simulate(specs, metrics_out=metrics)
    assert list(expected) == ["m"]
    assert collected.shape == expected["m"].shape == (20, 3, 2)
    assert collected.tobytes() == expected["m"].tobytes()
    for node in experiment.node_ids:
        assert status[node].program_metrics == metrics[node], node
    assert metrics["m"]["stale_inputs"] == 4
    # N̄ = 4 (the §3.2 default), b = 2, q = (3/4, 1/4): N = (6, 2).
    assert (metrics["w1"]["local_steps"], metrics["w2"]["local_steps"]) == (6, 2)


@pytest.mark.e2e
@pytest.mark.parametrize(
    "report",
    [
        # rho, local_steps, §3.2.2 term, step time: each finite, none a worker could send.
        pytest.param([0.1, 0.0, 1e300, 0.0], id="a-default-term-of-1e300"),
        pytest.param([0.1, 1e300, 4.0, 1.0], id="local-steps-of-1e300"),
        pytest.param([0.1, 0.0, 4.0, 5e-324], id="a-step-time-of-5e-324"),
    ],
)
def test_a_hostile_workers_report_neither_hangs_the_other_workers_nor_fails_the_master(
    tmp_path, report
):
    """A worker's report is counts and timings, which no screening bound holds. A hostile
    worker reporting a §3.2.2 term or local_steps of 1e300 made the master plan 1e300 LMC
    steps for every worker, which then never finished its round; a step time of 5e-324
    overflowed the speeds and failed the master's round loop. Real master and worker
    processes; the hostile worker "w2" speaks on its own link, its secret proved."""
    from starling.node.protocol import convert
    from starling.node.protocol.starling.v1 import peer_pb2, peer_pb2_grpc
    from starling.node.runtime.transport import open_channel
    from tests.node.test_runtime_harness import exchange_as

    rounds = 6
    experiment = parse_experiment(
        {
            "name": "dglmc-hostile",
            "algorithm": "dg-lmc",
            "model": {"name": "conjugate_gaussian", "params": {"dim": 2}},
            "data": {"source": "synthetic", "size": 50, "seed": 5},
            "topology": {"kind": "star", "nodes": 3},
            "nodes": [
                {"id": "m", "role": "master"},
                {"id": "w1", "hyperparameters": {"step_time": 1.0}},
                {"id": "w2"},
            ],
            "rounds": rounds,
            "chains": 2,
            "seed": 13,
            "round_deadline": 5.0,
        }
    )
    hostile = []
    for round_index in range(rounds):
        iterate = peer_pb2.Iterate(
            experiment="dglmc-hostile", sender="w2", receiver="m", round=round_index, kind="z"
        )
        iterate.tensors.append(convert.tensor_from_array(np.zeros((2, 2)), "z"))
        iterate.tensors.append(convert.tensor_from_array(np.array(report), "profile"))
        hostile.append(iterate)
    with Cluster(tmp_path) as cluster:
        procs = cluster.start_nodes(["m", "w1"])
        addresses = {"m": procs["m"].address, "w1": procs["w1"].address, "w2": "127.0.0.1:1"}
        specs = [s for s in node_specs(experiment, addresses) if s.node_id != "w2"]
        clients = {s.node_id: procs[s.node_id].client() for s in specs}
        for spec in specs:
            clients[spec.node_id].wait_ready()
            clients[spec.node_id].configure(spec)
        channel = open_channel(procs["m"].address)
        try:
            summary = exchange_as(peer_pb2_grpc.PeerStub(channel), clients["m"], "w2", hostile)
            assert (summary.received, summary.rejected) == (rounds, 0)  # well-formed, filed
            for client in clients.values():
                client.start()
            wait_done(clients, 60)
        finally:
            channel.close()
        status = {node: client.status() for node, client in clients.items()}
    assert all(s.error == "" and s.round == rounds for s in status.values()), status
    assert status["m"].program_metrics["rejected_inputs"] == rounds
    # w2 never heard: the plan is w1's alone, the §3.2.2 default N = 4.
    assert status["w1"].program_metrics["local_steps"] == 4


# ----------------------------------------------------------------------------------------
# Bad input.


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"hyperparameters": {"rho": -1.0}}, "hyperparameters.rho: must be a positive"),
        (
            {"hyperparameters": {"gamma": float("nan")}},
            "hyperparameters.gamma: expected a finite number",
        ),
        ({"hyperparameters": {"rho": 0.01, "gamma": 0.02}}, "hyperparameters.gamma: 0.02 exceeds"),
        ({"hyperparameters": {"local_steps": -2}}, "hyperparameters.local_steps: must be"),
        ({"hyperparameters": {"local_steps": 2.5}}, "hyperparameters.local_steps: expected an"),
        # Accepted, and the first round never ended.
        (
            {"hyperparameters": {"local_steps": 10**15}},
            "hyperparameters.local_steps: at most 1,000,000 LMC steps a round, got "
            "1,000,000,000,000,000",
        ),
        ({"hyperparameters": {"init": "zeros"}}, "hyperparameters.init: must be one of"),
        ({"hyperparameters": {"A": [[1, 0], [0, 1]]}}, "hyperparameters.A: unknown field"),
        ({"topology": {"kind": "ring", "nodes": 4}}, "topology: dg-lmc needs a star"),
        (
            {"nodes": [{"id": "a", "role": "master"}, {"id": "b", "role": "master"}]},
            "nodes: dg-lmc needs exactly one master",
        ),
        (
            {"nodes": [{"id": "m"}, {"id": "w", "hyperparameters": {"step_time": -1}}]},
            "nodes[1].hyperparameters.step_time: must be a positive",
        ),
        (
            {"hyperparameters": {"local_steps": 2_000_000}},
            "hyperparameters.local_steps: at most 1,000,000 LMC steps a round",
        ),
        ({"hyperparameters": {"step_time": 1e-12}}, "hyperparameters.step_time: at least 1e-09"),
    ],
)
def test_bad_hyperparameters_are_refused_naming_the_field(change, needle):
    raw = {
        "name": "bad",
        "algorithm": "dg-lmc",
        "model": {"name": "conjugate_gaussian", "params": {"dim": 2}},
        "data": {"source": "synthetic", "size": 20},
        "topology": {"kind": "star", "nodes": 3},
        "rounds": 5,
        **change,
    }
    if "nodes" in change:
        raw["topology"] = {"kind": "star"}
    with pytest.raises(ConfigError) as error:
        parse_experiment(raw)
    assert str(error.value).startswith(needle), str(error.value)


def test_a_step_beyond_algorithm_1s_bound_is_refused_by_the_worker():
    """γ ≤ ρ/(ρM + 1) needs the worker's M_i, known only where its data is: the worker
    refuses to start, naming the field, the node and the bound."""
    experiment = _experiment(workers=2, size=50, rounds=5, hyper={"rho": 0.01, "gamma": 0.009})
    with pytest.raises(ConfigError, match=r"^hyperparameters\.gamma: 0\.009 on node '1' exceeds"):
        simulate(node_specs(experiment))


def test_a_tiny_gamma_without_local_steps_is_refused_instead_of_hanging():
    """§3.2.2's default N_i = ρ/(γ(ρM + 1)) is 4 at the default γ but 1.2e11 LMC steps a
    round at γ = 1e-12: the run looked hung (a 30-round simulate did not end in 300 s).
    The worker refuses, naming local_steps; given local_steps, the same γ runs."""
    model = build_model(ModelSpec("linear_regression", {"dim": 2}))
    potential = model.local_potential(model.synthesize(np.random.default_rng(0), 20), 1.0)
    tiny = DGLMCParams(gamma=1e-12)
    with pytest.raises(
        ConfigError,
        match=r"^hyperparameters\.local_steps: gamma = 1e-12 on node "
        r"'1' makes \[003\] §3\.2\.2's default",
    ):
        worker_constants(tiny, potential, "1")
    rho, gamma, _ = worker_constants(DGLMCParams(gamma=1e-12, local_steps=2), potential, "1")
    assert gamma == 1e-12 and rho > 0
    experiment = _experiment(workers=2, size=20, rounds=2, hyper={"gamma": 1e-12})
    with pytest.raises(ConfigError, match=r"^hyperparameters\.local_steps: gamma = 1e-12"):
        simulate(node_specs(experiment))


def test_a_model_without_a_curvature_bound_needs_rho_and_gamma():
    raw = {
        "name": "mlp",
        "algorithm": "dg-lmc",
        "model": {"name": "mlp", "params": {"features": 2, "hidden": 2, "classes": 2}},
        "data": {"source": "synthetic", "size": 10},
        "topology": {"kind": "star", "nodes": 2},
        "rounds": 2,
        "hyperparameters": {"gamma": 1e-4, "init": "normal"},
    }
    with pytest.raises(ConfigError, match=r"^hyperparameters\.rho: node '1'.s model gives no"):
        simulate(node_specs(parse_experiment(raw)))
    raw["hyperparameters"]["rho"] = 1e-3
    samples = _master(simulate(node_specs(parse_experiment(raw))))
    assert samples.shape == (2, 1, raw_dim(raw)) and np.all(np.isfinite(samples))


def raw_dim(raw) -> int:
    return build_model(parse_experiment(raw).model).dim


# ----------------------------------------------------------------------------------------
# Program level: checkpointed state, and reports that cannot be right.


def _drive(programs, rngs, rounds, start=0):
    """The simulator's round loop (both phases, inboxes in sender order), fault-free."""
    out = []
    for t in range(start, start + rounds):
        for phase in range(2):
            inboxes = {node: {} for node in programs}
            for sender, program in programs.items():
                for receiver, message in program.outgoing(t, phase).items():
                    inboxes[receiver][sender] = message
            for node, program in programs.items():
                program.incoming(t, phase, dict(sorted(inboxes[node].items())), rngs[node])
        out.append(programs["0"].sample().copy())
    return np.stack(out)


def test_a_restored_checkpoint_continues_the_same_chain():
    """The typed state holds everything: programs rebuilt from the specs and restored from a
    round-5 checkpoint (state and RNG) produce the same rounds 5..9 as the original."""
    hyper = {"step_time": 1.0}
    specs = node_specs(_experiment(workers=2, rounds=10, hyper=hyper, faults=[]))
    rngs = {s.node_id: node_rng(s) for s in specs}
    programs = {s.node_id: build_program(s, rngs[s.node_id]) for s in specs}
    _drive(programs, rngs, 5)
    saved = {n: (p.state(), rngs[n].bit_generator.state) for n, p in programs.items()}
    original = _drive(programs, rngs, 5, start=5)
    fresh_rngs = {s.node_id: node_rng(s) for s in specs}
    fresh = {s.node_id: build_program(s, fresh_rngs[s.node_id]) for s in specs}
    for node, (state, rng_state) in saved.items():
        fresh[node].restore(state)
        fresh_rngs[node].bit_generator.state = rng_state
    assert _drive(fresh, fresh_rngs, 5, start=5).tobytes() == original.tobytes()


def test_the_master_ignores_an_impossible_report():
    specs = {s.node_id: s for s in node_specs(_experiment(workers=2, rounds=3))}
    rng = node_rng(specs["0"])
    master = build_program(specs["0"], rng)
    z = np.full((CHAINS, 2), 0.5)
    good = Message("z", {"z": z, "profile": np.array([0.01, 0.0, 4.0, 0.0])})
    bad = Message("z", {"z": z + 100, "profile": np.array([0.0, 0.0, 4.0, 0.0])})
    master.incoming(0, 0, {"1": good, "2": bad}, rng)
    # Worker 2's report is refused, and it has never been heard: it is left out of eq. 5.
    assert master.metrics() == {"stale_inputs": 0, "missing_inputs": 1, "rejected_inputs": 1}
    # θ ~ N(z_1, ρ_1 I) from worker 1 alone: within 6 sd of 0.5 for every chain.
    assert np.all(np.abs(master.sample() - 0.5) < 6 * np.sqrt(0.01))
    assert master.local_steps() == {"1": 4}
