"""EC-SGHMC and Async SGHMC on real node processes over gRPC: a hub and 4 workers.

Five ``python -m starling.node serve`` processes on 127.0.0.1 run each algorithm asynchronously
with bounded staleness (``max_staleness``, :mod:`starling.node.engine.rounds`), finish, and
report their staleness; their samples are compared with the simulator's exact law.

Why the statistical check is loose, and how loose: on the network a message may be used in
the round it was sent, where the simulator's lockstep model always waits a round, so the
network's copies are somewhere between fresh and as stale as the bound allows, and its law
is not exactly any one lockstep law. Each algorithm's law moves monotonically with the
staleness of its inputs, so every mean and covariance entry must lie inside the envelope
spanned by the exact laws at the two ends — EC-SGHMC: lockstep with s' = 1 … s;
Async SGHMC: fresh gradients (centralised SGHMC) … lockstep with the run's s — widened by
5 MCSE (one replicate per chain, 50 chains: Student-t with 49 dof, a false alarm below
1e-4 per entry). Burn-in is set by the lockstep law's contraction rate (asserted).
"""

from __future__ import annotations

import dataclasses
import socket
import time

import numpy as np
import pytest

from starling.orchestrator.config.experiment import load_experiment, parse_experiment
from starling.orchestrator.planning.node_specs import node_specs
from tests.conftest import ROOT
from tests.node.samplers.test_async_sghmc import async_law
from tests.node.samplers.test_ec_sghmc import ec_law, problem, variance_ratios
from tests.node.test_runtime_harness import Cluster, start_run, wait_done
from tests.stats import mcse

pytestmark = pytest.mark.e2e

NODES = [str(k) for k in range(5)]  # node 0 is the hub
CHAINS = 50
DEADLINE = 20.0  # only a dead or frozen peer would make a node wait this long


@pytest.fixture(scope="module")
def procs(tmp_path_factory):
    with Cluster(tmp_path_factory.mktemp("async-cluster")) as cluster:
        yield cluster.start_nodes(NODES)


def _experiment(algorithm: str, hyper: dict, rounds: int):
    return parse_experiment(
        {
            "name": f"e2e-{algorithm}",
            "algorithm": algorithm,
            "hyperparameters": hyper,
            "model": {"name": "linear_regression", "params": {"dim": 2}},
            "data": {"source": "synthetic", "size": 16, "seed": 1},
            "topology": {"kind": "star", "nodes": len(NODES)},
            "rounds": rounds,
            "chains": CHAINS,
            "seed": 23,
            "round_deadline": DEADLINE,
            "checkpoint_every": 500,  # checkpoints are not what this test is about
        }
    )


def _run(procs, experiment):
    specs = node_specs(experiment, {n: p.address for n, p in procs.items()})
    started = time.monotonic()
    clients = start_run(procs, specs)
    wait_done(clients, 240)
    elapsed = time.monotonic() - started
    statuses = {node: client.status() for node, client in clients.items()}
    samples = {}
    for node, client in clients.items():
        pairs = list(client.samples())
        if pairs:
            assert [r for r, _ in pairs] == list(range(experiment.rounds)), node
            samples[node] = np.stack([v for _, v in pairs])
    return specs, samples, statuses, elapsed


def _inside_envelope(samples, laws, label: str, z: float = 5.0) -> float:
    """Every mean and covariance entry within [min, max] of ``laws`` ± z MCSE; returns the
    largest distance outside the envelope in MCSE (0 when inside)."""
    means = np.array([m for m, _ in laws])
    covs = np.array([c for _, c in laws])
    mean, mean_se, _ = mcse(samples)
    centred = samples - samples.mean(axis=(0, 1))
    cov, cov_se, _ = mcse(centred[..., :, None] * centred[..., None, :])
    worst = 0.0
    for value, se, low, high in (
        (mean, mean_se, means.min(axis=0), means.max(axis=0)),
        (cov, cov_se, covs.min(axis=0), covs.max(axis=0)),
    ):
        outside = np.maximum(low - value, value - high) / se
        worst = max(worst, float(np.max(outside)))
    assert worst <= z, f"{label}: {worst:.2f} MCSE outside the envelope of exact laws"
    return max(worst, 0.0)


def test_ec_sghmc_runs_over_grpc_with_bounded_staleness(procs):
    s, rounds, burn = 4, 2000, 640
    hyper = {"eps": 0.05, "alpha": 1.0, "sync_period": s}
    specs, samples, statuses, elapsed = _run(procs, _experiment("ec-sghmc", hyper, rounds))
    assert all(st.state == "done" and st.error == "" for st in statuses.values())
    assert set(samples) == {"1", "2", "3", "4"} and statuses["0"].samples_stored == 0

    # Staleness: reported by every node, never beyond the bound (no overrun happened).
    for node, status in statuses.items():
        name = "worker" if node == "0" else "centre"
        metrics = status.program_metrics
        assert 0 <= metrics[f"{name}_staleness_mean"] <= metrics[f"{name}_staleness_max"] <= s
        for peer, link in status.inbound.items():
            assert link.late == 0 and link.received > 0, (node, peer)
            assert link.max_staleness <= s, (node, peer)
    staleness = [statuses[w].program_metrics["centre_staleness_mean"] for w in "1234"]

    prob = problem(specs)
    laws = {period: ec_law(prob, eps=0.05, alpha=1.0, sync_period=period) for period in (1, 4)}
    assert laws[s][0].transient(burn) < 1e-6
    for i, node in enumerate(prob.ids):
        envelope = [pooled[i] for _, pooled in laws.values()]
        worst = _inside_envelope(samples[node][burn:], envelope, f"worker {node}")
        ratios = variance_ratios(prob.post_cov, np.cov(samples[node][burn:].reshape(-1, 2).T))
        print(
            f"ec-sghmc over gRPC, worker {node}: {worst:.2f} MCSE outside the exact-law "
            f"envelope, variance ratio to the posterior {ratios.round(3)}"
        )
    print(
        f"ec-sghmc over gRPC: {rounds} rounds in {elapsed:.1f} s; mean staleness of c̃ "
        f"{np.round(staleness, 2)} (lockstep model: {(s + 1) / 2})"
    )


def test_async_sghmc_runs_over_grpc_with_bounded_staleness(procs):
    s, rounds, burn, eps = 2, 3200, 2000, 0.02
    hyper = {"eps": eps, "sync_period": s}
    specs, samples, statuses, elapsed = _run(procs, _experiment("async-sghmc", hyper, rounds))
    assert all(st.state == "done" and st.error == "" for st in statuses.values())
    assert set(samples) == {"0"}  # only the server records θ

    server = statuses["0"]
    assert server.program_metrics["message_staleness_mean"] <= 1  # its bound
    assert server.program_metrics["gradient_staleness_max"] <= s + 1
    for peer, link in server.inbound.items():
        assert link.late == 0 and link.max_staleness <= 1, peer
    for worker in "1234":
        assert statuses[worker].program_metrics["theta_staleness_max"] <= s
        assert statuses[worker].inbound["0"].late == 0

    prob = problem(specs)
    law, lockstep = async_law(prob, eps=eps, sync_period=s)
    assert law.transient(burn) < 1e-6
    # Fresh gradients: centralised SGHMC on ∇U (one worker holding Σ A_i, Σ b_i, α = 0).
    pooled = dataclasses.replace(prob, ids=("all",), A=(sum(prob.A),), b=(sum(prob.b),))
    _, (fresh,) = ec_law(pooled, eps=eps, alpha=0.0)
    worst = _inside_envelope(samples["0"][burn:], [fresh, lockstep], "server")
    metrics = server.program_metrics
    ratios = [
        variance_ratios(prob.post_cov, cov).round(3)
        for cov in (fresh[1], lockstep[1], np.cov(samples["0"][burn:].reshape(-1, 2).T))
    ]
    print(
        f"async-sghmc over gRPC: {rounds} rounds in {elapsed:.1f} s; gradient staleness "
        f"mean {metrics['gradient_staleness_mean']:.2f} (lockstep {(s + 3) / 2}), message "
        f"staleness {metrics['message_staleness_mean']:.2f} (lockstep 1); {worst:.2f} MCSE "
        f"outside the envelope; variance ratios fresh {ratios[0]}, lockstep {ratios[1]}, "
        f"measured {ratios[2]}"
    )


def test_a_dead_worker_costs_the_centre_one_deadline_per_round_and_is_counted(procs):
    """Bounded staleness never hangs: worker 4's address answers nobody, so from round s on
    the centre waits out the deadline each round, proceeds with what it has (the three
    live workers), and counts the overrun in ``overruns`` on the dead worker's link."""
    s, rounds, deadline = 2, 10, 0.3
    raw = _experiment("ec-sghmc", {"eps": 0.05, "sync_period": s}, rounds).source
    experiment = parse_experiment({**raw, "name": "e2e-dead-worker", "round_deadline": deadline})
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        nowhere = f"127.0.0.1:{spare.getsockname()[1]}"
    addresses = {n: procs[n].address for n in NODES[:4]} | {"4": nowhere}
    specs = [spec for spec in node_specs(experiment, addresses) if spec.node_id != "4"]
    started = time.monotonic()
    clients = start_run(procs, specs)
    wait_done(clients, 60)
    elapsed = time.monotonic() - started
    centre = clients["0"].status()
    assert centre.inbound["4"].overruns == rounds - s  # rounds s … rounds − 1 needed it
    assert all(centre.inbound[w].overruns == 0 for w in "123")
    # Real time: the waits cannot take less than their deadlines; 10 s over them covers start
    # and load, while a hang lasts until wait_done's 60 s. The staleness wait's own logic
    # is checked exactly on a fake clock (tests/node/test_runtime.py).
    assert (rounds - s) * deadline <= elapsed < (rounds - s) * deadline + 10
    assert all(clients[w].status().samples_stored == rounds for w in "123")


def test_examples_are_the_papers_toy():
    """[001] §4: K = 4, α = 1, ε = 1e-2, C = V = I, and Async SGHMC synchronising every 8."""
    ec = load_experiment(ROOT / "examples" / "ec-sghmc-gaussian.yaml")
    hyper = ec.hyperparameters
    assert (hyper["alpha"], hyper["eps"], hyper["friction"], hyper["centre_noise"]) == (
        1.0,
        0.01,
        1.0,
        1.0,
    )
    assert len(ec.data_nodes()) == 4 and ec.model.params["dim"] == 2
    baseline = load_experiment(ROOT / "examples" / "async-sghmc-gaussian.yaml")
    assert baseline.hyperparameters["sync_period"] == 8 and len(baseline.data_nodes()) == 4
