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
up, a step too large for the potential's curvature): a node whose samples leave the floats
(not finite, or beyond 1e150) is listed under ``diverged`` with the first round that did,
and every figure that would need those samples is ``None`` rather than a NaN or an
overflow. Where the exact posterior is known, a sample farther from the origin than
:data:`ESCAPE` times the posterior's own scale (its largest |mean| plus its largest std,
plus 1 for the N(0, I) start) counts as diverged too: no chain started there gets that far
while sampling the posterior, however slowly it mixes, so the run is reported ``diverged``
(exit 3) instead of ``complete`` with a W2 of 1e80.

Parts that need no other part's result are computed on a thread beside the one that scores
the rest, since at dim 1000 they are most of an evaluation's time and spend it in numpy
calls that let the other thread run: the exact posterior (while this thread reads every
round's extremes for the divergence checks), then the diagnostics (ESS and R-hat,
:mod:`starling.orchestrator.evaluation.diagnostics`, which need the samples alone) while
this thread scores W2; and beside the W2 curve, the estimator's floor and the figures'
standard errors (:func:`_score_w2`). Every figure is the same float either way; only the
order of ``metrics.json``'s keys shows it (``diagnostics`` comes after ``w2``). An
interrupt does not wait for a part still running beside.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from starling.node.config import NODE_SOURCE
from starling.node.data.shards import load_shard
from starling.node.models import build_model
from starling.node.models.base import Dataset, GaussianPosterior
from starling.node.spec import DataSpec
from starling.orchestrator.evaluation.diagnostics import diagnostics_section
from starling.orchestrator.evaluation.metrics import GaussianTarget
from starling.orchestrator.evaluation.network_average import NetworkAverage
from starling.orchestrator.evaluation.schedule import resolve_schedule, scored_rounds
from starling.orchestrator.evaluation.scoring import score_beyond_w2
from starling.orchestrator.evaluation.w2_error import (
    BOOTSTRAP,
    affordable_sets,
    bootstrap_se,
    w2_floor,
)
from starling.orchestrator.evaluation.w2_scores import AVERAGE, w2_scores
from starling.orchestrator.planning.plan import EvaluationPlan

__all__ = [
    "Evaluation",
    "consensus_error",
    "divergence_bound",
    "common_rounds",
    "diverged_rounds",
    "evaluate",
    "ground_truth",
    "recorded_rounds",
    "reference_data",
    "samples_per_node",
]

# Beyond this, squares and covariances overflow float64: the chain has left the posterior
# by ~1e150 standard deviations, i.e. diverged.
_HUGE = 1e150

ESCAPE = 1e6
"""How many posterior scales from the origin a sample may be before it counts as diverged,
when the posterior is known (module docstring)."""


def divergence_bound(posterior: GaussianPosterior | None) -> float:
    """The magnitude beyond which a sample counts as diverged (module docstring)."""
    if posterior is None:
        return _HUGE
    mean = np.asarray(posterior.mean, dtype=float)
    std = np.sqrt(np.clip(np.diag(np.asarray(posterior.cov, dtype=float)), 0.0, None))
    scale = float(np.max(np.abs(mean), initial=0.0) + np.max(std, initial=0.0) + 1.0)
    return min(_HUGE, ESCAPE * scale) if np.isfinite(scale) else _HUGE


@dataclass(frozen=True)
class Evaluation:
    metrics: dict
    curves: dict[str, np.ndarray]
    """Name ("average" or a node id) -> W2 per round, when a posterior is known (NaN at a
    round the schedule does not score, and at a diverged one)."""
    tables: dict[str, list[dict]] = field(default_factory=dict)
    """CSV name (``predictive_curve``, ``distance_curve``) -> its rows, one dict each."""
    curve_rounds: np.ndarray | None = None
    """The rounds ``curves`` were scored at (:mod:`starling.orchestrator.evaluation.schedule`),
    sorted; None: every round."""


def ground_truth(
    plan: EvaluationPlan,
    node_data: Mapping[str, DataSpec] | None = None,
    data: Callable[[], list[Dataset]] | None = None,
) -> GaussianPosterior | None:
    """The exact posterior given every node's data, or None if the model has no exact form
    (or no node holds data). See the module docstring for where the data comes from;
    ``data``: that data already at hand (asked only if the model has an exact form)."""
    model = build_model(plan.model)
    if not hasattr(model, "exact_posterior"):
        return None
    shards = data() if data is not None else reference_data(plan, model, node_data)
    return model.exact_posterior(shards) if shards else None


def reference_data(
    plan: EvaluationPlan, model, node_data: Mapping[str, DataSpec] | None = None
) -> list[Dataset]:
    """The experiment's whole data set, as the evaluation may know it: every data node's
    rows, regenerated from the seed (synthetic) or read from the files the experiment names
    (file), by the same plan the nodes were given (:mod:`starling.orchestrator.planning.data_plan`).
    With
    ``data.source: node``, from the recipes the nodes reported when configured
    (``node_data``): only if every data node holds a synthetic shard."""
    specs = plan.data_specs
    if not specs:
        return []
    if plan.data.source == NODE_SOURCE:
        recipes = [(node_data or {}).get(node) for node in specs]
        if not all(r is not None and r.source == "synthetic" for r in recipes):
            return []  # data the orchestrator has no recipe for (a node's own file)
        specs = {node: r for node, r in zip(specs, recipes, strict=True) if r is not None}
    return [load_shard(spec, model) for spec in specs.values()]


def samples_per_node(plan: EvaluationPlan, samples: Mapping[str, np.ndarray]) -> dict[str, int]:
    """How many samples each node recorded, in node order: every node whose role records
    samples, with 0 for one that recorded none (died before round 0, say)."""
    counts = dict.fromkeys(plan.sampling_nodes, 0)
    counts.update({node: int(s.shape[0]) for node, s in samples.items()})
    return counts


def recorded_rounds(plan: EvaluationPlan, samples: Mapping[str, np.ndarray]) -> int:
    """The run's length as its samples hold it: the longest node's rounds, which are the
    planned rounds unless every node stopped before them (a run interrupted by Ctrl-C or
    SIGTERM keeps the rounds done until then). The nodes that recorded this many rounds
    make the network average, the consensus and the run's verdict, whose burn-in is the
    first half of them as the diagnostics' is
    (:func:`~starling.orchestrator.evaluation.diagnostics.diagnostics_section`)."""
    return max((int(s.shape[0]) for s in samples.values()), default=plan.rounds)


def common_rounds(
    samples: Mapping[str, np.ndarray], together: Collection[str]
) -> tuple[dict[str, np.ndarray], int | None]:
    """``samples`` with the nodes of ``together`` cut to the rounds every one of them
    recorded, and that count (None when nothing was cut).

    Nodes whose rounds the orchestrator stopped at once (Ctrl-C during ``run``) end a round
    or two apart, as neighbours of a lockstep graph may be: evaluated as they are, only
    the nodes a round ahead would make the network average and the consensus
    (:func:`recorded_rounds`). Cut to their common rounds, every one of them does, as in
    ``simulate``, whose lockstep rounds end together. A node not among them (one that
    failed earlier) keeps its own rounds. Only what is evaluated is cut: the samples are
    written whole."""
    lengths = [samples[node].shape[0] for node in together if node in samples]
    if len(lengths) < 2 or min(lengths) == max(lengths):
        return dict(samples), None
    common = min(lengths)
    cut = {
        node: (values[:common] if node in together else values) for node, values in samples.items()
    }
    return cut, common


def _extremes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per leading index, the largest and the smallest value (NaN where any value is NaN):
    with a bound they say which rounds left the floats (:func:`_within`)."""
    flat = np.asarray(values, dtype=float).reshape(values.shape[0], -1)
    if flat.shape[1] == 0:  # nothing that could leave the floats
        return np.full(flat.shape[0], -np.inf), np.full(flat.shape[0], np.inf)
    # The largest and smallest value of each round, not |values|: no copy of the samples.
    return flat.max(axis=1), flat.min(axis=1)


def _within(extremes: tuple[np.ndarray, np.ndarray], bound: float) -> np.ndarray:
    """Whether each round of :func:`_extremes` is finite and under ``bound`` in magnitude."""
    largest, smallest = extremes
    with np.errstate(invalid="ignore"):
        return (largest < bound) & (smallest > -bound)  # NaN compares False


def _sane(values: np.ndarray, bound: float = _HUGE) -> np.ndarray:
    """Per leading index, whether every value is finite and under ``bound`` in magnitude
    (:func:`divergence_bound`)."""
    return _within(_extremes(values), bound)


def diverged_rounds(
    samples: Mapping[str, np.ndarray], sane: Mapping[str, np.ndarray] | None = None
) -> dict[str, int]:
    """Node -> the first round whose sample is not finite (or beyond 1e150), if any;
    ``sane``: :func:`_sane` of each node's samples, if already computed."""
    out = {}
    for node, values in samples.items():
        bad = np.flatnonzero(~(sane[node] if sane is not None else _sane(values)))
        if bad.size:
            out[node] = int(bad[0])
    return out


def consensus_error(
    complete: Mapping[str, np.ndarray],
    average: NetworkAverage | None,
    window: int,
    sane: Mapping[str, np.ndarray],
) -> float | None:
    """Mean squared distance of the nodes' iterates from their average, ``E‖x_i − x̄‖²``.

    Averaged over nodes, chains and the last ``window`` rounds of ``complete`` (the nodes
    that recorded every round), from ``average`` (their :class:`NetworkAverage`); needs two or more
    nodes, and None if any of them diverged in the window (``sane``: each node's
    :func:`_sane`). One node at a time against the average, in one buffer: stacking every
    node's window and its spread cost three copies of it (1.2 GB at 250 chains × d 1000 ×
    40 rounds × 5 nodes, a second on this machine).
    """
    if len(complete) < 2 or average is None:
        return None
    if not all(sane[name][-window:].all() for name in complete):
        return None
    tail = average.tail(window)
    spread = np.empty_like(tail)
    total = 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        for name in sorted(complete):
            np.subtract(complete[name][-window:], tail, out=spread)
            flat = spread.reshape(-1)
            total += float(np.dot(flat, flat))
    return _finite(total / (len(complete) * tail.shape[0] * tail.shape[1]))


def _diverged_as_nan(
    series: Mapping[str, np.ndarray], sane: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """``series`` with every round that left the divergence bound (``sane`` False) made NaN:
    the held-out, transport, HPD and diagnostic figures leave out samples that are not
    finite, and so leave out a divergence that stayed finite (1e200) alike, instead of
    scoring it or overflowing on it. Only a series with such a round is copied."""
    out: dict[str, np.ndarray] = {}
    for name, values in series.items():
        flags = sane.get(name)
        if flags is None or flags.all():
            out[name] = values
            continue
        masked = np.array(values, dtype=float)
        masked[~flags] = np.nan
        out[name] = masked
    return out


def _finite(value: float) -> float | None:
    return value if np.isfinite(value) else None


def evaluate(
    plan: EvaluationPlan,
    samples: Mapping[str, np.ndarray],
    node_data: Mapping[str, DataSpec] | None = None,
    stopped_together: Collection[str] = (),
) -> Evaluation:
    """W2 and consensus of ``samples``; ``node_data``: what nodes holding their own data
    reported (``data.source: node``), the only way such a run gets a ground truth. A node
    whose array holds no round counts as one that recorded nothing. ``stopped_together``:
    the nodes whose rounds were stopped at once (an interrupted run), evaluated over the
    rounds all of them recorded (:func:`common_rounds`)."""
    samples = {node: values for node, values in samples.items() if values.shape[0] > 0}
    metrics: dict = {
        "experiment": plan.name,
        "algorithm": plan.algorithm,
        "rounds": plan.rounds,
        "chains": plan.chains,
        "nodes": len(plan.node_ids),
        "samples_per_node": samples_per_node(plan, samples),
    }
    samples, common = common_rounds(samples, stopped_together)
    if common is not None:
        metrics["rounds_evaluated"] = common
    if not samples:  # no node recorded a round: nothing to score
        return Evaluation(metrics, {})
    curves: dict[str, np.ndarray] = {}
    curve_rounds: np.ndarray | None = None
    model = build_model(plan.model)
    known_data: list[list[Dataset]] = []

    def data() -> list[Dataset]:  # the nodes' data, regenerated or read once
        if not known_data:
            known_data.append(reference_data(plan, model, node_data))
        return known_data[0]

    # Two threads: this one and one beside it, which takes the exact posterior and then the
    # diagnostics while this one scores the rest (module docstring).
    beside = ThreadPoolExecutor(1, thread_name_prefix="beside-scoring")
    try:
        posterior, bound, sane = _truth_and_sanity(beside, plan, node_data, data, samples)
        diverged = diverged_rounds(samples, sane)
        if diverged:
            metrics["diverged"] = diverged
        window = plan.evaluation.window
        recorded = recorded_rounds(plan, samples)
        complete = {n: s for n, s in samples.items() if s.shape[0] == recorded}
        average = NetworkAverage(complete, lambda block: _sane(block, bound)) if complete else None
        consensus = consensus_error(complete, average, window, sane)
        if consensus is not None or diverged:
            metrics["consensus_error"] = consensus
        if len(complete) < len(samples):  # the average and the consensus leave some nodes out
            metrics["averaged_nodes"] = list(complete)
        # What the figures beyond W2 see: a diverged round is NaN there, finite or not.
        judged_nodes = _diverged_as_nan(samples, sane)
        known_series: list[dict[str, np.ndarray]] = []

        def judged() -> dict[str, np.ndarray]:
            """The average (first) and every node, as the figures beyond W2 see them: built
            when one of them asks, since only they read every round of the average."""
            if not known_series:
                series = judged_nodes
                if average is not None:
                    whole = average.whole()
                    flags = {AVERAGE: _sane(whole, bound)}
                    series = {**_diverged_as_nan({AVERAGE: whole}, flags), **judged_nodes}
                known_series.append(series)
            return known_series[0]

        tables: dict[str, list[dict]] = {}
        # ESS and R-hat read the samples alone (no posterior, no average): they are computed
        # beside, while this thread takes the W2 figures.
        diagnosing = (
            beside.submit(diagnostics_section, judged_nodes, plan.evaluation.burn_in)
            if plan.evaluation.diagnostics
            else None
        )
        score_beyond_w2(plan, judged, metrics, tables, data)
        if posterior is not None:
            curves, curve_rounds = _score_w2(plan, posterior, samples, average, sane, metrics)
            if plan.evaluation.hpd is not None:
                from starling.orchestrator.evaluation.hpd import hpd_section

                metrics["hpd"], tables["hpd_curve"] = hpd_section(
                    model,
                    data(),
                    posterior,
                    judged(),
                    window,
                    plan.evaluation.hpd,
                    curve_points=plan.evaluation.curve_points,
                )
        found = diagnosing.result() if diagnosing is not None else None
    finally:
        # An interrupt (Ctrl-C is KeyboardInterrupt here) does not wait for the thread beside.
        beside.shutdown(wait=False, cancel_futures=True)
    if found is not None:
        metrics["diagnostics"] = found
    metrics["verdict"] = _verdict(plan, samples, recorded, metrics, posterior is not None)
    return Evaluation(metrics, curves, tables, curve_rounds)


def _truth_and_sanity(
    beside: ThreadPoolExecutor,
    plan: EvaluationPlan,
    node_data: Mapping[str, DataSpec] | None,
    data: Callable[[], list[Dataset]],
    samples: Mapping[str, np.ndarray],
) -> tuple[GaussianPosterior | None, float, dict[str, np.ndarray]]:
    """``(posterior, bound, sane)``: the exact posterior (:func:`ground_truth`), the
    divergence bound its scale gives (:func:`divergence_bound`) and each node's rounds
    within it. The posterior (a d³ factorisation at dim 1000) is computed on the thread
    ``beside`` while this one reads every round's extremes, the one pass over the samples
    the bound then needs."""
    solving = beside.submit(ground_truth, plan, node_data, data)
    extremes = {node: _extremes(values) for node, values in samples.items()}
    posterior = solving.result()
    bound = divergence_bound(posterior)
    return posterior, bound, {node: _within(ends, bound) for node, ends in extremes.items()}


ESTIMATOR = (
    "Gaussian fit: W2 from N(mean, covariance) of every chain's draws over the last "
    "window rounds to the exact posterior ([000] §6.2.3)"
)
"""What ``w2`` figures are, in ``metrics.json``'s words."""


def _score_w2(
    plan: EvaluationPlan,
    posterior: GaussianPosterior,
    samples: Mapping[str, np.ndarray],
    average: NetworkAverage | None,
    sane: Mapping[str, np.ndarray],
    metrics: dict,
) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """``metrics.json``'s ``w2`` (with each figure's standard error and the estimator's
    floor, :mod:`starling.orchestrator.evaluation.w2_error`) and ``posterior``, for every
    node of ``samples`` and their ``average``; returns the W2 curves (the average's first)
    and the rounds they hold (None: every round)."""
    window = plan.evaluation.window
    truth = GaussianTarget(posterior.mean, posterior.cov)  # its square root: once
    settings = plan.evaluation
    schedule = resolve_schedule(settings.w2_schedule, plan.chains, truth.mean.shape[0])

    def rounds_of(length: int) -> np.ndarray:
        return scored_rounds(length, window, schedule, settings.w2_per_doubling)

    # The estimator's floor and the standard errors need the target and the final windows
    # alone: a thread beside the curve's takes them, and fills the core the curve leaves
    # idle between its nodes. The same floats as computed in line.
    beside = ThreadPoolExecutor(1, thread_name_prefix="w2-error")
    try:
        flooring = beside.submit(w2_floor, truth, plan.chains * window, plan.seed)
        round_flooring = (
            flooring if window == 1 else beside.submit(w2_floor, truth, plan.chains, plan.seed)
        )
        erring = {
            name: beside.submit(bootstrap_se, truth, samples[name][-window:], plan.seed)
            for name in samples
            if sane[name][-window:].all()
        }
        final, scored = w2_scores(truth, samples, sane, average, window, rounds_of)
        if average is not None and final.get(AVERAGE) is not None:
            erring[AVERAGE] = beside.submit(bootstrap_se, truth, average.tail(window), plan.seed)
        floor, round_floor = flooring.result(), round_flooring.result()
        # A figure that is None (a window that left the floats) has no standard error.
        errors = {
            name: future.result() for name, future in erring.items() if final[name] is not None
        }
    finally:
        beside.shutdown(wait=False, cancel_futures=True)  # an interrupt does not wait
    lengths = sorted({values.shape[0] for values in samples.values()})
    curve_rounds = np.unique(np.concatenate([rounds_of(n) for n in lengths]))
    per_node = {n: final[n] for n in samples}
    known = [v for v in per_node.values() if v is not None]
    metrics["w2"] = {
        "average": final.get("average"),
        "per_node": per_node,
        "node_mean": float(np.mean(known)) if len(known) == len(per_node) else None,
        "window": window,
        "estimator": ESTIMATOR,
        "se": {n: errors.get(n) for n in per_node},
        "average_se": errors.get("average"),
        "se_sets": affordable_sets(BOOTSTRAP, plan.chains * window, truth.mean.shape[0]),
        "floor": floor,
        "floor_round": round_floor,
        "scale": float(np.sqrt(max(truth.trace, 0.0))),
        "schedule": schedule,
        "rounds_scored": int(curve_rounds.size),
    }
    metrics["posterior"] = {
        "mean": truth.mean.tolist(),
        "std": np.sqrt(np.diag(truth.cov)).tolist(),
    }
    names = [*([AVERAGE] if average is not None else []), *samples]
    curves = {name: scored[name] for name in names}
    return curves, (None if schedule == "every" else curve_rounds)


def _verdict(
    plan: EvaluationPlan,
    samples: Mapping[str, np.ndarray],
    recorded: int,
    metrics: dict,
    known: bool,
) -> dict:
    """``metrics.json``'s ``verdict`` (:mod:`starling.orchestrator.evaluation.verdict`), on
    the diagnostics already computed or, when ``evaluation.diagnostics`` is off, on
    diagnostics computed for it alone (not written); ``recorded``: the run's length
    (:func:`recorded_rounds`); ``known``: whether the exact posterior is (then the error in
    its scale is checked too)."""
    from starling.orchestrator.evaluation.verdict import verdict_section

    diagnostics = metrics.get("diagnostics")
    if diagnostics is None:
        diagnostics = diagnostics_section(samples, plan.evaluation.burn_in)
    w2 = metrics.get("w2")
    return verdict_section(
        samples,
        diagnostics,
        recorded,
        plan.evaluation.burn_in,
        metrics.get("diverged") or {},
        w2,
        (w2 or {}).get("scale") if known else None,
    )
