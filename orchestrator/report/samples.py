"""One pass over a run's samples for every figure that needs them, memory bounded.

Each node's samples are read once (:func:`~starling.orchestrator.report.loading.node_samples`) and
reduced before the next is read: its pooled last window, subsampled for the posterior
figure, and the ±1 sd band of its W2 curve over chains. The band is a bootstrap over
chains ([000] §6.2.3 fits one Gaussian to the chains at each round, so a round has one W2;
resampling the chains with replacement and fitting again gives that figure's spread):
:data:`RESAMPLES` resamples, at no more than :data:`BAND_ROUNDS` rounds, skipped when the
work would exceed :data:`BAND_FLOPS` (large chains × dimension; the caption says so).
The network-average iterate ``Σ_i x_i / N`` is summed as the nodes go by.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from starling.orchestrator.evaluation.metrics import GaussianTarget
from starling.orchestrator.report.loading import (
    RunData,
    Truth,
    damaged,
    node_samples,
    subsample,
)

__all__ = ["AVERAGE", "SampleSummary", "summarise"]

AVERAGE = "average"
MIN_DRAWS = 2000
"""Draws per node the histograms and scatters want at least: the evaluation's window alone
(often one round, about a hundred draws) drew ragged histograms."""
RESAMPLES = 20
BAND_ROUNDS = 100
BAND_FLOPS = 4e8


def draws_window(rounds: int, chains: int, scored: int) -> int:
    """Rounds of draws the figures pool: enough for :data:`MIN_DRAWS` draws over the chains,
    at least the evaluation's own window (``scored``), and never reaching into the first
    half of the run (burn-in) beyond it."""
    want = max(scored, -(-MIN_DRAWS // max(chains, 1)))
    return max(1, min(want, max(rounds // 2, scored), rounds))


@dataclass
class SampleSummary:
    window: int
    """Rounds pooled for the figures (:func:`draws_window`)."""
    scored: int = 1
    """The evaluation's window (W2 is scored over it)."""
    rounds: int = 0
    dim: int = 0
    chains: int = 0
    pooled: dict[str, np.ndarray] = field(default_factory=dict)
    """"average" or node -> (≤ MAX_POINTS, d) draws of the last ``window`` rounds."""
    pooled_total: dict[str, int] = field(default_factory=dict)
    bands: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """Name -> (rounds, sd of W2 over bootstrap resamples of the chains)."""
    band_note: str = ""


def _sane(values: np.ndarray) -> bool:
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.abs(values) < 1e150))


def _band(values: np.ndarray, target: GaussianTarget, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rounds, chains, _ = values.shape
    picked = np.unique(np.linspace(0, rounds - 1, min(rounds, BAND_ROUNDS)).astype(int))
    draws = np.random.default_rng(seed).integers(chains, size=(RESAMPLES, chains))
    sds = np.empty(len(picked))
    for k, t in enumerate(picked):
        sds[k] = float(np.std(target.w2(values[t][draws]), ddof=1))
    return picked, sds


def _band_cost(rounds: int, chains: int, dim: int) -> float:
    return RESAMPLES * min(rounds, BAND_ROUNDS) * chains * dim * min(chains, dim)


def _agrees(
    data: RunData, node: str, values: np.ndarray, seen: SampleSummary, truth: Truth | None
) -> None:
    """A node's samples belong to the run ``metrics.json`` and ``experiment.yaml`` describe:
    its node, its number of rounds, chains and coordinates. A folder whose files come from
    two runs failed deep in a figure with a traceback; it is one line naming the file."""
    path = data.sample_files[node]
    counts = data.metrics.get("samples_per_node") or {}
    rounds, chains, dim = values.shape
    mixed = "; the folder mixes files of different runs"
    if counts and node not in counts:
        raise damaged(path, f"node {node!r} is not one of this run's nodes (metrics.json){mixed}")
    if counts.get(node) not in (None, rounds):
        raise damaged(path, f"{rounds} rounds, but metrics.json counts {counts[node]}{mixed}")
    expected = data.metrics.get("chains")
    if isinstance(expected, int) and chains != expected:
        raise damaged(path, f"{chains} chains, but metrics.json says {expected}{mixed}")
    if seen.dim and dim != seen.dim:
        raise damaged(path, f"{dim} coordinates, another node's samples {seen.dim}{mixed}")
    if truth is not None and truth.mean.size != dim:
        raise damaged(
            path, f"{dim} coordinates, but the experiment's posterior has {truth.mean.size}{mixed}"
        )


def summarise(data: RunData, truth: Truth | None) -> SampleSummary:
    declared = (data.experiment.get("evaluation") or {}).get("window")
    scored = int((data.metrics.get("w2") or {}).get("window") or declared or 1)
    summary = SampleSummary(window=scored, scored=scored)
    target = GaussianTarget(truth.mean, truth.cov) if truth is not None and truth.exact else None
    total_rounds = data.metrics.get("rounds")
    running: np.ndarray | None = None
    members = 0
    for index, (node, values, _rounds) in enumerate(node_samples(data)):
        _agrees(data, node, values, summary, truth)
        if values.ndim != 3 or not len(values):
            continue
        rounds, chains, dim = values.shape
        summary.dim, summary.chains = dim, chains
        if not summary.rounds:  # the first node fixes the window every node is shown over
            summary.rounds = rounds
            summary.window = draws_window(rounds, chains, scored)
        window = summary.window
        last = values[-window:].reshape(-1, dim)
        summary.pooled[node] = subsample(last, seed=index)
        summary.pooled_total[node] = len(last)
        # The evaluation's verdict first: it also knows runaway samples below 1e150.
        sane = _sane(values) and node not in (data.metrics.get("diverged") or {})
        if (
            target is not None
            and sane
            and chains > 2
            and _band_cost(rounds, chains, dim) <= BAND_FLOPS
        ):
            summary.bands[node] = _band(values, target, seed=index)
        elif target is not None and sane and chains > 2:
            summary.band_note = "no band: too many chains × dimensions to resample quickly"
        if rounds == total_rounds and sane:
            running = values.copy() if running is None else running + values
            members += 1
    if running is not None and members > 1:
        average = running / members
        last = average[-summary.window :].reshape(-1, summary.dim)
        summary.pooled[AVERAGE] = subsample(last, seed=999)
        summary.pooled_total[AVERAGE] = len(last)
        if target is not None and summary.chains > 2 and AVERAGE not in summary.bands:
            if _band_cost(*average.shape) <= BAND_FLOPS:
                summary.bands[AVERAGE] = _band(average, target, seed=999)
    return summary
