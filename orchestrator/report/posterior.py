"""Each node's samples against the exact posterior: marginals and a 2-D scatter.

One column per node (at most :data:`MAX_COLUMNS`, then the network-average iterate), rows
for the first two coordinates' marginal histograms (the exact posterior's density on top)
and their joint scatter with the posterior's 1-, 2- and 3-sd ellipses. Draws are the last
rounds of every chain, enough of them for a smooth histogram
(:func:`~starling.orchestrator.report.samples.draws_window`; the caption says which and how
many). The ellipses and the posterior's density carry SVG ids (``sd-ellipse-1`` ...,
``posterior-density``) in an exported figure.
"""

from __future__ import annotations

import numpy as np

from starling.orchestrator.report.loading import MAX_POINTS, Truth
from starling.orchestrator.report.plotting import colour, data_uri, pyplot
from starling.orchestrator.report.samples import AVERAGE, MIN_DRAWS, SampleSummary

__all__ = ["posterior_figure"]

MAX_COLUMNS = 5
"""Nodes shown; with more, the first ones (the caption names which)."""
SCATTER_POINTS = 1500
"""Draws in a scatter (of the subsample; a solid cloud beyond that); histograms use all."""


def _ellipse(ax, mean: np.ndarray, cov: np.ndarray, scale: float) -> None:
    values, vectors = np.linalg.eigh(cov)
    angle = np.linspace(0, 2 * np.pi, 200)
    circle = np.stack([np.cos(angle), np.sin(angle)])
    points = vectors @ (np.sqrt(np.clip(values, 0, None))[:, None] * circle) * scale
    ax.plot(
        mean[0] + points[0],
        mean[1] + points[1],
        color="black",
        lw=1.3,
        ls="-" if scale == 1 else "--",
        gid=f"sd-ellipse-{scale:g}",
    )


def posterior_figure(summary: SampleSummary, truth: Truth | None, nodes: list[str]):
    """(data URI, caption), or None without matplotlib or samples."""
    plt = pyplot()
    if plt is None or not summary.pooled:
        return None
    node_cols = [n for n in nodes if n in summary.pooled][:MAX_COLUMNS]
    columns = node_cols + ([AVERAGE] if AVERAGE in summary.pooled else [])
    dim = summary.dim
    coords = list(range(min(dim, 2)))
    rows = len(coords) + (1 if dim >= 2 else 0)
    figure, axes = plt.subplots(
        rows,
        len(columns),
        figsize=(2.9 * len(columns) + 0.6, 2.7 * rows),
        squeeze=False,
        sharex="row",
        sharey="row",
    )
    for c, name in enumerate(columns):
        points = summary.pooled[name]
        tint = "black" if name == AVERAGE else colour(nodes.index(name))
        axes[0][c].set_title("network average" if name == AVERAGE else f"node {name}")
        for r in coords:
            _marginal(axes[r][c], points, r, tint, truth)
            if c == 0:
                axes[r][c].set_ylabel("density")
        if dim >= 2:
            _joint(axes[-1][c], points, tint, truth)
            if c == 0:
                axes[-1][c].set_ylabel("x2")
    axes[0][0].legend(loc="upper left", fontsize=9, framealpha=0.85)
    figure.tight_layout()
    caption = _caption(summary, truth, nodes, node_cols, columns, coords)
    return data_uri(figure, "posterior"), caption


def _marginal(ax, points: np.ndarray, r: int, tint: str, truth: Truth | None) -> None:
    """Coordinate ``r``'s histogram, with the exact posterior's density on top if known."""
    finite = points[np.isfinite(points[:, r]), r]
    bins = int(np.clip(np.sqrt(len(finite)), 10, 40))
    ax.hist(finite, bins=bins, density=True, color=tint, alpha=0.55, label="samples")
    ax.hist(finite, bins=bins, density=True, histtype="step", color=tint, lw=1.2)
    if truth is not None:
        sd = float(np.sqrt(truth.cov[r, r]))
        grid = np.linspace(truth.mean[r] - 4 * sd, truth.mean[r] + 4 * sd, 200)
        pdf = np.exp(-0.5 * ((grid - truth.mean[r]) / sd) ** 2) / (sd * np.sqrt(2 * np.pi))
        ax.plot(grid, pdf, color="black", lw=1.5, label="exact posterior", gid="posterior-density")
    ax.set_xlabel(f"x{r + 1}")


def _joint(ax, points: np.ndarray, tint: str, truth: Truth | None) -> None:
    """x1 against x2, with the exact posterior's 1-, 2- and 3-sd ellipses (or its mean)."""
    shown = points[:SCATTER_POINTS]
    ax.scatter(shown[:, 0], shown[:, 1], s=7, color=tint, alpha=0.6, lw=0, rasterized=True)
    if truth is not None and truth.exact:
        for scale in (1, 2, 3):
            _ellipse(ax, truth.mean[:2], truth.cov[:2, :2], scale)
    elif truth is not None:
        ax.plot(*truth.mean[:2], "k+", ms=12, mew=2)
    ax.set_xlabel("x1")


def _caption(
    summary: SampleSummary,
    truth: Truth | None,
    nodes: list[str],
    node_cols: list[str],
    columns: list[str],
    coords: list[int],
) -> str:
    dim = summary.dim
    total = max(summary.pooled_total[n] for n in columns)
    first = max(summary.rounds - summary.window, 0)
    caption = (
        f"Draws of the last {summary.window} rounds (rounds {first}–{summary.rounds - 1}) of "
        f"all {summary.chains} chains: {total} per node"
        + (f", a random {MAX_POINTS} of them drawn" if total > MAX_POINTS else "")
        + f". The window holds at least {MIN_DRAWS} draws where the second half of the run "
        f"has them (the first half is left out as burn-in), and at least the evaluation's own "
        f"window of {summary.scored} round(s). Top rows: histograms of coordinates "
        + ", ".join(f"x{r + 1}" for r in coords)
        + (" with the exact posterior's density (black)" if truth is not None else "")
        + "."
    )
    if dim >= 2:
        caption += " Bottom row: x1 against x2" + (
            f" (at most {SCATTER_POINTS} draws); solid ellipse 1 sd of the exact posterior, "
            "dashed 2 and 3 sd."
            if truth is not None and truth.exact
            else "."
        )
    if dim > 2:
        caption += f" The parameter has {dim} coordinates; the first two are shown."
    if len(node_cols) < len([n for n in nodes if n in summary.pooled]):
        caption += f" Nodes shown: {', '.join(node_cols)} (the first {MAX_COLUMNS})."
    if truth is None:
        caption += " No exact posterior is known for this run."
    return caption
