"""Score collected samples against the model's ground truth.

For a model with an exact Gaussian posterior Starling reports, as [000] §6.2.3 does, the
2-Wasserstein distance between the Gaussian fitted to the chains' iterates and the
posterior: per node, and for the network-average iterate ``Σ_i x_i / N`` ("average").
The fit pools all chains over the last ``evaluation.window`` rounds (window 1 with many
chains is exactly the paper's metric: 100 trials at one iteration).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from node.data import load_shard
from node.models import build_model
from node.models.base import GaussianPosterior
from orchestrator.experiment import Experiment, node_specs
from orchestrator.metrics import empirical_w2, w2_curve

__all__ = ["Evaluation", "consensus_error", "evaluate", "ground_truth"]


@dataclass(frozen=True)
class Evaluation:
    metrics: dict
    curves: dict[str, np.ndarray]
    """Name ("average" or a node id) -> W2 at every round, when a posterior is known."""


def ground_truth(experiment: Experiment) -> GaussianPosterior | None:
    """The exact posterior, from the shards regenerated (or re-read) on the orchestrator.

    Nothing crosses the network: synthetic shards are regenerated from their seeds.
    """
    model = build_model(experiment.model)
    if not hasattr(model, "exact_posterior"):
        return None
    shards = [load_shard(spec.data, model) for spec in node_specs(experiment) if spec.data]
    return model.exact_posterior(shards)


def consensus_error(samples: Mapping[str, np.ndarray], rounds: int, window: int) -> float | None:
    """Mean squared distance of the nodes' iterates from their average, ``E‖x_i − x̄‖²``.

    Averaged over nodes, chains and the last ``window`` rounds; needs two or more nodes that
    recorded every round.
    """
    complete = [s for s in samples.values() if s.shape[0] == rounds]
    if len(complete) < 2:
        return None
    stacked = np.stack([s[-window:] for s in complete])  # (nodes, window, chains, d)
    spread = stacked - stacked.mean(axis=0, keepdims=True)
    return float(np.mean(np.sum(spread**2, axis=-1)))


def _pooled(samples: np.ndarray, window: int) -> np.ndarray:
    return samples[-window:].reshape(-1, samples.shape[-1])


def evaluate(experiment: Experiment, samples: Mapping[str, np.ndarray]) -> Evaluation:
    metrics: dict = {
        "experiment": experiment.name,
        "algorithm": experiment.algorithm,
        "rounds": experiment.rounds,
        "chains": experiment.chains,
        "nodes": len(experiment.nodes),
        "samples_per_node": {node: int(s.shape[0]) for node, s in samples.items()},
    }
    curves: dict[str, np.ndarray] = {}
    consensus = consensus_error(samples, experiment.rounds, experiment.evaluation.window)
    if consensus is not None:
        metrics["consensus_error"] = consensus
    truth = ground_truth(experiment)
    if truth is None or not samples:
        return Evaluation(metrics, curves)
    window = experiment.evaluation.window
    complete = {n: s for n, s in samples.items() if s.shape[0] == experiment.rounds}
    average = np.mean([complete[n] for n in sorted(complete)], axis=0) if complete else None
    per_node = {
        n: empirical_w2(_pooled(s, window), truth.mean, truth.cov) for n, s in samples.items()
    }
    metrics["w2"] = {
        "average": (
            empirical_w2(_pooled(average, window), truth.mean, truth.cov)
            if average is not None
            else None
        ),
        "per_node": per_node,
        "node_mean": float(np.mean(list(per_node.values()))),
        "window": window,
    }
    metrics["posterior"] = {
        "mean": truth.mean.tolist(),
        "std": np.sqrt(np.diag(truth.cov)).tolist(),
    }
    if average is not None:
        curves["average"] = w2_curve(average, truth.mean, truth.cov)
    for node, s in samples.items():
        curves[node] = w2_curve(s, truth.mean, truth.cov)
    return Evaluation(metrics, curves)
