"""Score collected samples against the model's ground truth.

For a model with an exact Gaussian posterior Starling reports, as [000] §6.2.3 does, the
2-Wasserstein distance between the Gaussian fitted to the chains' iterates and the
posterior: per node, and for the network-average iterate ``Σ_i x_i / N`` ("average").
The fit pools all chains over the last ``evaluation.window`` rounds (window 1 with many
chains is exactly the paper's metric: 100 trials at one iteration).

Where the ground truth comes from (:func:`ground_truth`), computed here, once per
evaluation, and never from a node: the orchestrator does not read a node's shard, its
files or its store. Synthetic data is a pure function of the experiment's ``data.seed`` and
``data.size``: the whole data set is the model's own generator (``model.synthesize``) called
with each shard's generator (:func:`starling.node.data.shard_rng`) — the rows the nodes hold,
regenerated from the seed, not fetched. File data: the reference posterior is computed from
the file the experiment names (``data.path``, the user's input on the orchestrator's side),
read here; the nodes' shards (:mod:`starling.node.partition`) are recomputed from the experiment, so
this is the posterior given exactly the nodes' data (a held-out split or rows no shard takes are
left out). Any other source (data the nodes bring themselves) has no
ground truth here.

A sampler can diverge (plain push-sum losing its mass on lossy links, ADMM duals blowing
up): a node whose samples leave the floats is listed under ``diverged`` with the first
round that did, and every figure that would need those samples is ``None`` rather than a
NaN or an overflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from starling.node.config import NODE_SOURCE
from starling.node.data import load_shard
from starling.node.models import build_model
from starling.node.models.base import Dataset, GaussianPosterior
from starling.node.spec import DataSpec
from starling.orchestrator.experiment import Experiment
from starling.orchestrator.metrics import GaussianTarget, target_curve
from starling.orchestrator.scoring import score_beyond_w2

__all__ = [
    "Evaluation",
    "consensus_error",
    "diverged_rounds",
    "evaluate",
    "ground_truth",
    "reference_data",
]

# Beyond this, squares and covariances overflow float64: the chain has left the posterior
# by ~1e150 standard deviations, i.e. diverged.
_HUGE = 1e150


@dataclass(frozen=True)
class Evaluation:
    metrics: dict
    curves: dict[str, np.ndarray]
    """Name ("average" or a node id) -> W2 at every round, when a posterior is known."""
    tables: dict[str, list[dict]] = field(default_factory=dict)
    """CSV name (``predictive_curve``, ``distance_curve``) -> its rows, one dict each."""


def ground_truth(
    experiment: Experiment, node_data: Mapping[str, DataSpec] | None = None
) -> GaussianPosterior | None:
    """The exact posterior given every node's data, or None if the model has no exact form
    (or no node holds data). See the module docstring for where the data comes from."""
    model = build_model(experiment.model)
    if not hasattr(model, "exact_posterior"):
        return None
    data = reference_data(experiment, model, node_data)
    return model.exact_posterior(data) if data else None


def reference_data(
    experiment: Experiment, model, node_data: Mapping[str, DataSpec] | None = None
) -> list[Dataset]:
    """The experiment's whole data set, as the evaluation may know it: every data node's
    rows, regenerated from the seed (synthetic) or read from the files the experiment names
    (file), by the same plan the nodes were given (:mod:`starling.orchestrator.data_plan`). With
    ``data.source: node``, from the recipes the nodes reported when configured
    (``node_data``): only if every data node holds a synthetic shard."""
    from starling.orchestrator.data_plan import data_specs  # imports Experiment, as we do

    plan = data_specs(experiment)
    if not plan:
        return []
    if experiment.data.source == NODE_SOURCE:
        recipes = [(node_data or {}).get(node) for node in plan]
        if not all(r is not None and r.source == "synthetic" for r in recipes):
            return []  # data the orchestrator has no recipe for (a node's own file)
        plan = {node: r for node, r in zip(plan, recipes, strict=True) if r is not None}
    return [load_shard(spec, model) for spec in plan.values()]


def _sane(values: np.ndarray) -> np.ndarray:
    """Per leading index, whether every value is finite and not absurdly large."""
    flat = np.abs(np.asarray(values, dtype=float)).reshape(values.shape[0], -1)
    with np.errstate(invalid="ignore"):
        return np.all(flat < _HUGE, axis=1)  # NaN compares False


def diverged_rounds(samples: Mapping[str, np.ndarray]) -> dict[str, int]:
    """Node -> the first round whose sample is not finite (or beyond 1e150), if any."""
    out = {}
    for node, values in samples.items():
        bad = np.flatnonzero(~_sane(values))
        if bad.size:
            out[node] = int(bad[0])
    return out


def consensus_error(samples: Mapping[str, np.ndarray], rounds: int, window: int) -> float | None:
    """Mean squared distance of the nodes' iterates from their average, ``E‖x_i − x̄‖²``.

    Averaged over nodes, chains and the last ``window`` rounds; needs two or more nodes that
    recorded every round, and None if any of them diverged in the window.
    """
    complete = [s for s in samples.values() if s.shape[0] == rounds]
    if len(complete) < 2:
        return None
    stacked = np.stack([s[-window:] for s in complete])  # (nodes, window, chains, d)
    if not _sane(stacked.reshape(1, -1))[0]:
        return None
    spread = stacked - stacked.mean(axis=0, keepdims=True)
    return _finite(float(np.mean(np.sum(spread**2, axis=-1))))


def _finite(value: float) -> float | None:
    return value if np.isfinite(value) else None


def _pooled(samples: np.ndarray, window: int) -> np.ndarray:
    return samples[-window:].reshape(-1, samples.shape[-1])


def _w2(points: np.ndarray, truth: GaussianTarget) -> float | None:
    """W2 of the Gaussian fitted to ``points``; None if they diverged."""
    if not _sane(points.reshape(1, -1))[0]:
        return None
    return _finite(float(truth.w2(points[None])[0]))


def _curve(samples: np.ndarray, truth: GaussianTarget) -> np.ndarray:
    """W2 at every round; NaN from the round the chains diverged."""
    sane = _sane(samples)
    if sane.all():
        return target_curve(samples, truth)
    curve = np.full(samples.shape[0], np.nan)
    good = np.flatnonzero(sane)
    if good.size:
        curve[good] = target_curve(samples[good], truth)
    return curve


def evaluate(
    experiment: Experiment,
    samples: Mapping[str, np.ndarray],
    node_data: Mapping[str, DataSpec] | None = None,
) -> Evaluation:
    """W2 and consensus of ``samples``; ``node_data``: what nodes holding their own data
    reported (``data.source: node``), the only way such a run gets a ground truth."""
    metrics: dict = {
        "experiment": experiment.name,
        "algorithm": experiment.algorithm,
        "rounds": experiment.rounds,
        "chains": experiment.chains,
        "nodes": len(experiment.nodes),
        "samples_per_node": {node: int(s.shape[0]) for node, s in samples.items()},
    }
    curves: dict[str, np.ndarray] = {}
    diverged = diverged_rounds(samples)
    if diverged:
        metrics["diverged"] = diverged
    consensus = consensus_error(samples, experiment.rounds, experiment.evaluation.window)
    if consensus is not None or diverged:
        metrics["consensus_error"] = consensus
    window = experiment.evaluation.window
    complete = {n: s for n, s in samples.items() if s.shape[0] == experiment.rounds}
    average = None
    if complete:
        with np.errstate(over="ignore", invalid="ignore"):  # a diverged node: see _sane
            average = np.mean([complete[n] for n in sorted(complete)], axis=0)
    tables: dict[str, list[dict]] = {}
    if samples:
        series = {**({"average": average} if average is not None else {}), **samples}
        model = build_model(experiment.model)
        score_beyond_w2(
            experiment, series, metrics, tables,
            lambda: reference_data(experiment, model, node_data),
        )  # fmt: skip
    posterior = ground_truth(experiment, node_data)
    if posterior is None or not samples:
        return Evaluation(metrics, curves, tables)
    truth = GaussianTarget(posterior.mean, posterior.cov)  # its square root: once
    per_node = {n: _w2(_pooled(s, window), truth) for n, s in samples.items()}
    known = [v for v in per_node.values() if v is not None]
    metrics["w2"] = {
        "average": _w2(_pooled(average, window), truth) if average is not None else None,
        "per_node": per_node,
        "node_mean": float(np.mean(known)) if len(known) == len(per_node) else None,
        "window": window,
    }
    metrics["posterior"] = {
        "mean": truth.mean.tolist(),
        "std": np.sqrt(np.diag(truth.cov)).tolist(),
    }
    if average is not None:
        curves["average"] = _curve(average, truth)
    for node, s in samples.items():
        curves[node] = _curve(s, truth)
    if experiment.evaluation.hpd is not None:
        from starling.orchestrator.hpd import hpd_section

        model = build_model(experiment.model)
        series = {**({"average": average} if average is not None else {}), **samples}
        data = reference_data(experiment, model, node_data)
        metrics["hpd"] = hpd_section(
            model, data, posterior, series, window, experiment.evaluation.hpd
        )
    return Evaluation(metrics, curves, tables)
