"""Metric against round, per node and for the network average, as the papers plot it.

Every ``*_curve.csv`` of the folder becomes one figure (so a metric the evaluation adds
shows up without a change here): left, each node with its ±1 sd band over chains (see
:mod:`starling.orchestrator.report.samples`); right, the network-average iterate ([000]'s "avg"
curve) beside the mean over nodes ± 1 sd across nodes.
"""

from __future__ import annotations

import warnings

import numpy as np

from starling.orchestrator.report.loading import Curve, Truth
from starling.orchestrator.report.plotting import colour, dashes, data_uri, pyplot
from starling.orchestrator.report.samples import AVERAGE, RESAMPLES, SampleSummary

__all__ = ["LABELS", "curve_figure"]

MAX_NODE_LINES = 10
"""More nodes than this are drawn as thin grey lines, without bands or legend entries."""

LABELS = {
    "w2": "W2 to the exact posterior (parameter units)",
    "predictive_accuracy": "posterior-predictive accuracy (held-out)",
    "predictive_log_loss": "posterior-predictive log-loss (nats, held-out)",
    "predictive_auc": "posterior-predictive AUC (held-out)",
    "sample_accuracy": "accuracy of a single sample (held-out)",
    "sample_log_loss": "log-loss of a single sample (nats, held-out)",
    "sample_auc": "AUC of a single sample (held-out)",
    "sinkhorn": "Sinkhorn distance to the reference samples",
    "sliced_w2": "sliced W2 to the reference samples (parameter units)",
}


def _log_scale(values: list[np.ndarray]) -> bool:
    finite = np.concatenate([v[np.isfinite(v)] for v in values] or [np.zeros(0)])
    return bool(finite.size and finite.min() > 0 and finite.max() / finite.min() > 10)


def _ceiling(values: list[np.ndarray]) -> float | None:
    """Top of the axis when a curve blows up: 1000 × the median of every value, so the
    ordinary ones stay readable (a diverged sampler leaves through the top)."""
    finite = np.concatenate([v[np.isfinite(v) & (v > 0)] for v in values] or [np.zeros(0)])
    if not finite.size:
        return None
    top = 1e3 * float(np.median(finite))
    return top if finite.max() > top else None


def _marker(curve: Curve) -> str | None:
    """A marker for every point when the curve has a single round: a line through one
    point draws nothing."""
    return "o" if len(curve.rounds) < 2 else None


def curve_figure(curve: Curve, summary: SampleSummary | None, truth: Truth | None):
    """(data URI, caption) for one metric curve, or None without matplotlib."""
    plt = pyplot()
    if plt is None:
        return None
    from matplotlib.ticker import MaxNLocator

    label = LABELS.get(curve.name, curve.name.replace("_", " "))
    nodes = [n for n in curve.series if n != AVERAGE]
    bands = _bands(curve, summary)
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.3), sharey=True)
    _each_node(left, curve, nodes, bands)
    _network(right, curve, nodes, bands)
    if curve.name == "w2" and truth is not None:
        scale = float(np.mean(np.sqrt(np.diag(truth.cov))))
        for ax in (left, right):
            ax.axhline(scale, color="0.3", ls=":", lw=1)
        right.plot(
            [], [], color="0.3", ls=":", label=f"posterior sd ({scale:.3g}, mean over coords)"
        )
    shown = list(curve.series.values())
    top = _ceiling(shown)
    for ax in (left, right):
        ax.set_xlabel("round (iteration)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # rounds are whole
        if len(curve.rounds) == 1:  # one round: it alone, in the middle
            ax.set_xticks([int(curve.rounds[0])])
            ax.set_xlim(curve.rounds[0] - 0.5, curve.rounds[0] + 0.5)
        if _log_scale(shown):
            ax.set_yscale("log")
        if top is not None:
            low = min(float(np.nanmin(v[v > 0])) for v in shown if np.any(v > 0))
            ax.set_ylim(low / 1.5, top)
        ax.legend(loc="best", framealpha=0.85)
    left.set_ylabel(label)
    figure.tight_layout()
    caption = _caption(curve, summary, label, bands, top)
    return data_uri(figure, f"convergence-{curve.name}"), caption


def _each_node(ax, curve: Curve, nodes: list[str], bands: dict) -> None:
    """Every node's curve (grey and unlabelled past :data:`MAX_NODE_LINES` nodes)."""
    many = len(nodes) > MAX_NODE_LINES
    marker = _marker(curve)
    for k, node in enumerate(nodes):
        values = curve.series[node]
        if many:  # one grey line each, one legend entry for all
            style = {"color": "0.6", "lw": 0.7}
            label = f"each of {len(nodes)} nodes" if k == 0 else None
        else:
            style = {"color": colour(k), "ls": dashes(k), "lw": 1.5}
            label = f"node {node}"
        ax.plot(curve.rounds, values, marker=marker, label=label, gid=f"curve-node-{node}", **style)
        if not many:
            _band(ax, curve, values, bands.get(node), colour(k), f"sd-band-node-{node}")
    over = "chains" if curve.name == "w2" else "samples"
    ax.set_title("each node" + (f" (±1 sd over {over}, shaded)" if bands and not many else ""))


def _network(ax, curve: Curve, nodes: list[str], bands: dict) -> None:
    """The network-average iterate's curve beside the mean of the nodes' (±1 sd across)."""
    if AVERAGE in curve.series:
        values = curve.series[AVERAGE]
        ax.plot(
            curve.rounds,
            values,
            color="black",
            lw=2,
            marker=_marker(curve),
            label="network-average iterate",
            gid="curve-average",
        )
        _band(ax, curve, values, bands.get(AVERAGE), "black", "sd-band-average")
    if nodes:
        stacked = np.vstack([curve.series[n] for n in nodes])
        with warnings.catch_warnings():  # a round every node diverged at: NaN, said elsewhere
            warnings.simplefilter("ignore", RuntimeWarning)
            mean, sd = np.nanmean(stacked, axis=0), np.nanstd(stacked, axis=0)
        ax.plot(
            curve.rounds,
            mean,
            color=colour(0),
            ls="--",
            lw=1.5,
            marker=_marker(curve),
            label=f"mean of the {len(nodes)} nodes ±1 sd across nodes",
            gid="curve-node-mean",
        )
        ax.fill_between(
            curve.rounds,
            np.maximum(mean - sd, mean / 10),
            mean + sd,
            color=colour(0),
            alpha=0.2,
            gid="sd-band-across-nodes",
        )
    ax.set_title("network average vs. the nodes")


def _caption(
    curve: Curve, summary: SampleSummary | None, label: str, bands: dict, top: float | None
) -> str:
    every = len(curve.rounds) < 2 or bool(np.all(np.diff(curve.rounds) == 1))
    at = "at every round" if every else f"at {len(curve.rounds)} scored rounds"
    caption = f"{label} {at}, from {curve.source or curve.name + '_curve.csv'}."
    if top is not None:
        caption += (
            " A curve leaving the top of the axis (1000 × the median value) blew up;"
            " its values are in the CSV file."
        )
    if bands and curve.name == "w2":
        caption += (
            f" Shaded around a curve: ±1 sd of that round's figure over {RESAMPLES} bootstrap "
            "resamples of the chains (how much it depends on which chains were drawn)."
        )
    elif bands:
        caption += f" Shaded: ±1 sd over the samples (the file's {curve.name}_std)."
    elif summary is not None and summary.band_note and curve.name == "w2":
        caption += f" ({summary.band_note}.)"
    return caption


def _bands(curve: Curve, summary: SampleSummary | None) -> dict:
    """Series -> (rounds, sd): W2's bootstrap over chains, or the file's own ``_std``."""
    if curve.name == "w2" and summary is not None:
        return summary.bands
    return {name: (curve.rounds, sd) for name, sd in curve.spread.items()}


def _band(ax, curve: Curve, values: np.ndarray, band, tint: str, gid: str) -> None:
    """The ±1 sd band of one curve (``gid``: its id in an exported SVG)."""
    if band is None:
        return
    picked, sd = band
    at = np.searchsorted(curve.rounds, picked)
    at = at[at < len(values)]
    centre = values[at]
    ax.fill_between(
        curve.rounds[at],
        np.maximum(centre - sd[: len(at)], 1e-12),
        centre + sd[: len(at)],
        color=tint,
        alpha=0.22,
        lw=0,
        gid=gid,
    )
