"""Edge cases real runs hand the evaluation
(:func:`starling.orchestrator.evaluation.evaluate.evaluate`): runs that stopped before their
planned rounds, scored on exact draws of the conjugate model's posterior so that every
figure is known to be defined."""

from __future__ import annotations

import numpy as np

from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.evaluation.evaluate import evaluate, ground_truth
from starling.orchestrator.evaluation.verdict import CONVERGED
from starling.orchestrator.planning.plan import plan_run


def _plan(rounds: int, chains: int, nodes: int = 3):
    raw = {
        "name": "edges",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 1e-3},
        "model": {"name": "linear_regression", "params": {"dim": 2, "prior_var": 10.0}},
        "data": {"source": "synthetic", "size": 60, "seed": 3},
        "topology": {"kind": "ring", "nodes": nodes},
        "rounds": rounds,
        "chains": chains,
    }
    return plan_run(parse_experiment(raw)).evaluation


def _exact_draws(plan, rounds: int, chains: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Independent exact draws of the posterior for every node: a perfect sampler."""
    posterior = ground_truth(plan)
    assert posterior is not None
    rng = np.random.default_rng(seed)
    factor = np.linalg.cholesky(posterior.cov)
    d = posterior.mean.shape[0]
    return {
        node: posterior.mean + rng.standard_normal((rounds, chains, d)) @ factor.T
        for node in plan.sampling_nodes
    }


def test_an_interrupted_run_is_judged_on_the_rounds_every_node_recorded():
    # Every node stopped at round 300 of 1000 planned (Ctrl-C): the run is those 300 rounds.
    # Its burn-in is their first half, as the diagnostics' is, and the network average and
    # the consensus are defined on them. With 100 chains of exact draws (150 × 100 draws
    # after burn-in: bulk ESS near 15,000, R-hat within 1.01 of 1 on a 1.1 limit) the
    # verdict is converged whatever the seed.
    plan = _plan(rounds=1000, chains=100)
    samples = _exact_draws(plan, rounds=300, chains=100)
    metrics = evaluate(plan, samples).metrics
    verdict = metrics["verdict"]
    assert verdict["criteria"]["window"] == [150, 299]
    assert metrics["diagnostics"]["burn_in"] == 150
    assert verdict["run"] == CONVERGED, verdict["reasons"]
    assert metrics["w2"]["average"] is not None
    assert metrics["consensus_error"] is not None
    assert metrics["samples_per_node"] == {"0": 300, "1": 300, "2": 300}
