"""The topology as a graph, each one-way link an arrow coloured by what became of its
messages, and the outcome fractions of the links as bars.

A link's messages end as ``delivered`` (in time for their round), ``late`` (after the
receiver's deadline), ``withheld`` (dropped by an emulated fault, scheduled or live: shown as
"dropped by a fault") or ``dropped`` (not sent, the receiver could not be reached: "not
sent: receiver down"); fractions are of ``sent + withheld``,
every message the sender had for that link (:mod:`starling.orchestrator.results.write`). Nodes are
placed on a circle (a star's hub in the middle, a grid as its lattice): no layout library needed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from starling.orchestrator.report.loading import RunData
from starling.orchestrator.report.plotting import OUTCOME_COLOURS, data_uri, pyplot

__all__ = ["OUTCOMES", "link_fractions", "network_figure"]

OUTCOMES = (
    ("delivered", OUTCOME_COLOURS["delivered"], "", "delivered in time"),
    ("late", OUTCOME_COLOURS["late"], "..", "late"),
    ("withheld", OUTCOME_COLOURS["withheld"], "//", "dropped by a fault"),
    ("dropped", OUTCOME_COLOURS["dropped"], "xx", "not sent: receiver down"),
)
"""Counter, colour, hatch (so a grey print tells them apart) and what it means."""
MAX_BARS = 30
MAX_LABELS = 30


def link_fractions(counts: Mapping[str, int]) -> dict[str, float] | None:
    total = counts.get("sent", 0) + counts.get("withheld", 0)
    if total <= 0:
        return None
    return {name: counts.get(name, 0) / total for name, *_ in OUTCOMES}


def _graph(data: RunData) -> tuple[list[str], list[tuple[str, str]], str, str | None, dict]:
    """Nodes, directed edges, the topology kind, the hub and the raw topology section."""
    raw = data.experiment.get("topology") or {}
    try:
        from starling.orchestrator.config.experiment import parse_experiment

        experiment = parse_experiment(data.experiment)
        graph = experiment.graph
        hub = experiment.topology.hub if experiment.topology is not None else None
        return list(graph.nodes), sorted(graph.edges), str(raw.get("kind", "")), hub, raw
    except Exception:  # noqa: BLE001 - the links the run counted still make a graph
        links = [tuple(key.split("->", 1)) for key in data.metrics.get("links") or {}]
        nodes = list(dict.fromkeys(data.nodes + [n for link in links for n in link]))
        return nodes, [(a, b) for a, b in links], str(raw.get("kind", "")), None, raw


def _layout(nodes: list[str], kind: str, hub: str | None, raw: Mapping) -> dict[str, tuple]:
    if kind == "grid" and isinstance(raw.get("cols"), int):
        cols = raw["cols"]
        return {n: (k % cols, -(k // cols)) for k, n in enumerate(nodes)}
    ring = [n for n in nodes if n != hub] if kind == "star" and hub in nodes else list(nodes)
    where = {
        n: (
            math.cos(math.pi / 2 - 2 * math.pi * k / len(ring)),
            math.sin(math.pi / 2 - 2 * math.pi * k / len(ring)),
        )
        for k, n in enumerate(ring)
    }
    if hub is not None and len(ring) < len(nodes):
        where[hub] = (0.0, 0.0)
    return where


def network_figure(data: RunData, down_nodes: set[str]):
    """(data URI, caption), or None without matplotlib or a graph."""
    plt = pyplot()
    nodes, edges, kind, hub, raw = _graph(data)
    if plt is None or not nodes:
        return None
    from matplotlib.colors import LinearSegmentedColormap
    from matplotlib.patches import FancyArrowPatch

    # Vermillion through yellow to blue: apart for every common colour-vision deficiency.
    cmap = LinearSegmentedColormap.from_list("delivered", ["#D55E00", "#F0E442", "#0072B2"])
    links = data.metrics.get("links") or {}
    fractions = {key: link_fractions(c) for key, c in links.items()}
    pos = _layout(nodes, kind, hub, raw)
    figure, (ax, bars) = plt.subplots(
        1, 2, figsize=(13, 5.6), gridspec_kw={"width_ratios": [1.1, 1]}
    )
    size = 900 if len(nodes) <= MAX_LABELS else 60
    radius = 12 if len(nodes) <= MAX_LABELS else 4
    for a, b in edges:
        f = fractions.get(f"{a}->{b}")
        tint = "#9e9e9e" if f is None else cmap(f["delivered"])
        arrow = FancyArrowPatch(
            pos[a],
            pos[b],
            arrowstyle="-|>",
            mutation_scale=14,
            connectionstyle="arc3,rad=0.12",
            color=tint,
            lw=2.2,
            shrinkA=radius,
            shrinkB=radius,
            zorder=1,
        )
        ax.add_patch(arrow)
    xy = np.array([pos[n] for n in nodes])
    edge = ["#D55E00" if n in down_nodes else "black" for n in nodes]
    widths = [3.5 if n in down_nodes else 2 for n in nodes]
    ax.scatter(xy[:, 0], xy[:, 1], s=size, c="white", edgecolors=edge, linewidths=widths, zorder=2)
    if len(nodes) <= MAX_LABELS:
        for n in nodes:
            ax.annotate(n, pos[n], ha="center", va="center", fontsize=11, zorder=3)
    ax.set_aspect("equal")
    ax.margins(0.15)
    ax.axis("off")
    mappable = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, 1))
    bar = figure.colorbar(mappable, ax=ax, fraction=0.04, pad=0.02)
    bar.set_label("fraction of the link's messages delivered in time")
    directed = any((b, a) not in set(edges) for a, b in edges)
    ax.set_title(
        f"topology: {kind or 'graph'}, {len(nodes)} nodes, {len(edges)} one-way links"
        + ("" if directed else " (both ways)")
    )
    _outcome_bars(bars, fractions)
    figure.tight_layout()
    caption = (
        "Left: each arrow is one direction of a link (sender → receiver), coloured by the "
        "fraction of its messages delivered in time (grey: no messages counted)."
    )
    if down_nodes:
        caption += (
            " Thick vermillion circles: nodes killed or down during the run "
            f"({', '.join(sorted(down_nodes))})."
        )
    caption += (
        " Right: what became of each link's messages (fractions of sent + withheld), "
        "lossiest first"
        + (f", the {MAX_BARS} lossiest of {len(fractions)}" if len(fractions) > MAX_BARS else "")
        + "."
    )
    return data_uri(figure, "network"), caption


def _outcome_bars(ax, fractions: Mapping[str, dict | None]) -> None:
    known = [(k, f) for k, f in fractions.items() if f is not None]
    known.sort(key=lambda item: (item[1]["delivered"], item[0]))
    known = known[:MAX_BARS][::-1]
    if not known:
        ax.axis("off")
        ax.text(0.5, 0.5, "no link counted a message", ha="center", transform=ax.transAxes)
        return
    y = np.arange(len(known))
    left = np.zeros(len(known))
    for name, tint, hatch, words in OUTCOMES:
        widths = np.array([f[name] for _, f in known])
        ax.barh(
            y,
            widths,
            left=left,
            color=tint,
            hatch=hatch,
            edgecolor="white",
            label=words,
            height=0.7,
        )
        left += widths
    ax.set_yticks(
        y, [k.replace("->", " → ") for k, _ in known], fontsize=10 if len(known) <= 20 else 8
    )
    ax.set_xlim(0, 1)
    ax.set_xlabel("fraction of the link's messages")
    ax.set_title("message outcomes per link")
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.06), ncol=2, frameon=False)
    ax.grid(axis="y", visible=False)
