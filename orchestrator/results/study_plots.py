"""A study's plots, drawn by matplotlib into its folder: W2 against the iteration per cell
(``w2-<cell>.png``), the final figures against the cells' ``x`` (``summary.png``), [003]'s
HPD error during sampling (``hpd-<cell>.png``), and with ``bars`` one panel per cell of a
figure per variant with its interval and verdicts (``bars.png``). Without matplotlib nothing
is drawn and the tables (:mod:`starling.orchestrator.results.study_tables`) stand alone.

The HPD plots' x axis is the share of the run done, ``(round + 1) / rounds``, not the round:
the variants of one study may spend their iteration budget in different numbers of rounds
(``dglmc-logreg-hpd``: DG-LMC's 500 rounds of 10 local steps against D-SGLD's 5,000 of one
step each, both T = 500 iterations), and at one share they have spent the same part of it.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from starling.orchestrator.config.study import Study, slug
from starling.orchestrator.results.study_tables import Curve, cell_x

__all__ = ["figure_class", "plot_against_x", "plot_bars", "plot_curves", "plot_hpd_curves"]


def figure_class():
    """``Figure``, matplotlib's figure class drawn by its Agg renderer without pyplot (no
    global figure registry to close, a lighter import), or None without matplotlib."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return Figure


def _ceiling(values: list[float]) -> float | None:
    """Top of a log axis that keeps the ordinary values readable: 1000 × their median,
    unless nothing reaches it. Points beyond it (a sampler that blew up) sit on it."""
    finite = sorted(v for v in values if v is not None and np.isfinite(v) and v > 0)
    if not finite:
        return None
    top = 1e3 * finite[len(finite) // 2]
    return top if finite[-1] > top else None


def plot_against_x(out: Path, study: Study, rows: list[dict]) -> list[Path]:
    xs = cell_x(study)
    Figure = figure_class()  # noqa: N806 - a class
    if not xs or Figure is None:
        return []
    figure = Figure(figsize=(12, 4))
    axes = figure.subplots(1, 2)
    keys = (study.summary_key, "consensus_error")
    marked = {"off": False, "diverged": False}
    for ax, key in zip(axes, keys, strict=True):
        ceiling = _ceiling([r[key] for r in rows])
        top = ceiling or max((r[key] for r in rows if r[key] is not None), default=1.0)
        for variant in dict.fromkeys(r["variant"] for r in rows):
            mine = [r for r in rows if r["variant"] == variant]
            x = np.array([xs[r["cell"]] for r in mine])
            y = np.array([np.nan if r[key] is None else r[key] for r in mine], dtype=float)
            shown = np.where(y > top, top, y) if ceiling else y
            line = ax.plot(x, shown, marker="o", label=variant)[0]
            off = ceiling is not None and np.any(y > top)
            if off:
                ax.plot(x[y > top], shown[y > top], "^", ms=11, color=line.get_color())
                marked["off"] = True
            gone = np.array([r["diverged"] is not None and r[key] is None for r in mine])
            if any(gone):
                ax.plot(
                    x[gone],
                    np.full(int(gone.sum()), top),
                    "x",
                    ms=11,
                    mew=2,
                    color=line.get_color(),
                )
                marked["diverged"] = True
        ax.set_xlabel(study.x_label)
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel(f"final {study.summary_text}")
    axes[1].set_ylabel("final consensus error E|x_i - mean|^2")
    notes = []
    if marked["off"]:
        notes.append("▲ beyond the axis (blew up)")
    if marked["diverged"]:
        notes.append("✕ diverged (not finite)")
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(
        handles, labels, loc="center right", title="\n".join(notes) or None, title_fontsize="small"
    )
    figure.suptitle(study.name)
    # Fixed margins: tight_layout draws the whole figure once more to measure it (half the
    # plotting time of a study, docs/performance.md).
    figure.subplots_adjust(left=0.07, right=0.82, bottom=0.13, top=0.88, wspace=0.25)
    path = out / "summary.png"
    figure.savefig(path, dpi=110)
    return [path]


def _emptied(axes) -> None:
    """The axes as :meth:`Figure.subplots` made them, for the next cell's curves: the
    figure and its tick artists are reused (making them was a quarter of the drawing time),
    everything the previous cell drew or measured is gone."""
    for ax in axes:
        for artist in [*ax.lines, *ax.collections]:
            artist.remove()
        if ax.get_legend() is not None:
            ax.get_legend().remove()
        ax.set_prop_cycle(None)
        ax.ignore_existing_data_limits = True  # the next line added sets them afresh


def plot_curves(out: Path, study: Study, curves: list[Curve]) -> list[Path]:
    """One figure per cell: W2 of the agent and of the agent average against the iteration,
    one line per variant (the mean over the seeds, a band between the seeds' extremes)."""
    Figure = figure_class()  # noqa: N806 - a class
    if Figure is None:
        return []
    written = []
    figure = Figure(figsize=(10, 4))
    axes = figure.subplots(1, 2, sharey=True)
    for index, cell in enumerate(dict.fromkeys(c.cell for c in curves)):
        if index:
            _emptied(axes)
        for variant in dict.fromkeys(c.variant for c in curves if c.cell == cell):
            mine = [c for c in curves if c.cell == cell and c.variant == variant]
            color = None
            for ax, pick in ((axes[0], "agent"), (axes[1], "average")):
                stack = np.array([getattr(c, pick) for c in mine], dtype=float)
                x = np.arange(1, stack.shape[1] + 1)
                with warnings.catch_warnings():
                    # A round every seed diverged in is all NaN: no point there, no warning.
                    warnings.simplefilter("ignore", RuntimeWarning)
                    low, mean, high = (
                        np.nanmin(stack, axis=0),
                        np.nanmean(stack, axis=0),
                        np.nanmax(stack, axis=0),
                    )
                line = ax.semilogy(x, mean, label=variant, color=color)
                color = line[0].get_color()
                if len(mine) > 1:
                    ax.fill_between(x, low, high, color=color, alpha=0.15, linewidth=0)
        seeds = f" (mean of {study.seeds} seeds)" if study.seeds > 1 else ""
        axes[0].set_title(f"{cell}: agent {study.agent}{seeds}")
        axes[1].set_title(f"{cell}: agent average{seeds}")
        for ax in axes:
            ax.set_xlabel("iteration (updates)")
            ax.grid(True, which="both", alpha=0.3)
        axes[0].set_ylabel("W2 to the posterior")
        axes[1].legend()
        figure.suptitle(study.name)
        figure.subplots_adjust(left=0.08, right=0.98, bottom=0.13, top=0.86, wspace=0.06)
        path = out / f"w2-{slug(cell)}.png"
        figure.savefig(path, dpi=110)
        written.append(path)
    return written


def plot_hpd_curves(out: Path, name: str, rows: Sequence[dict]) -> list[Path]:
    """One figure per cell: the excess HPD error of the agent and of the average against the
    share of the run, one line per variant (mean over the seeds)."""
    Figure = figure_class()  # noqa: N806 - a class
    if not rows or Figure is None:
        return []
    written = []
    for cell in dict.fromkeys(r["cell"] for r in rows):
        figure = Figure(figsize=(10, 4))
        axes = figure.subplots(1, 2, sharey=True)
        for ax, series in zip(axes, ("agent", "average"), strict=True):
            mine = [r for r in rows if r["cell"] == cell and r["series"] == series]
            for variant in dict.fromkeys(r["variant"] for r in mine):
                shares = sorted({r["share"] for r in mine if r["variant"] == variant})
                means = [
                    np.mean(
                        [
                            r["excess_error"]
                            for r in mine
                            if r["variant"] == variant and r["share"] == s
                        ]
                    )
                    for s in shares
                ]
                ax.semilogy(shares, means, marker="o", markersize=3, label=variant)
            ax.set_title(f"{cell}: {series}")
            ax.set_xlabel("share of the run done, (round + 1) / rounds")
            ax.grid(True, which="both", alpha=0.3)
        axes[0].set_ylabel("HPD error / region height (excess)")
        axes[1].legend()
        figure.suptitle(f"{name}: HPD error during sampling")
        figure.subplots_adjust(left=0.08, right=0.98, bottom=0.13, top=0.86, wspace=0.06)
        path = out / f"hpd-{slug(cell)}.png"
        figure.savefig(path, dpi=110)
        written.append(path)
    return written


def _bar_key(study: Study, rows: list[dict], cell: str) -> str | None:
    """The first of the study's ``bars`` figures that a run of ``cell`` has."""
    mine = [r for r in rows if r["cell"] == cell]
    return next((k for k in study.bars if any(r.get(k) is not None for r in mine)), None)


def plot_bars(out: Path, study: Study, rows: list[dict]) -> list[Path]:
    """``bars.png``: one panel per cell, one bar per variant — the mean of the cell's first
    ``bars`` figure over the seeds with its 95 % interval (``rows``: the study's summary
    rows) — hatched where not every seed converged, ✕ where every seed diverged."""
    Figure = figure_class()  # noqa: N806 - a class
    if Figure is None or not study.bars or not rows:
        return []
    cells = list(dict.fromkeys(r["cell"] for r in rows))
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    columns = min(study.bars_columns, len(cells))
    lines = -(-len(cells) // columns)
    figure = Figure(figsize=(4.2 * columns, 3.2 * lines + 0.8))
    axes = np.atleast_1d(figure.subplots(lines, columns, squeeze=False)).ravel()
    colours = [f"C{k % 10}" for k in range(len(variants))]
    for ax, cell in zip(axes, cells, strict=False):
        key = _bar_key(study, rows, cell)
        ax.set_title(f"{cell}" + (f": {key}" if key else ""), fontsize="medium")
        if key is None:
            continue
        for k, variant in enumerate(variants):
            row = next((r for r in rows if r["cell"] == cell and r["variant"] == variant), None)
            if row is None:
                continue
            value, half = row.get(key), row.get(f"{key}_ci")
            if value is None:
                ax.plot([k], [0], "x", ms=10, mew=2, color=colours[k])
                continue
            partly = row.get("converged", row["seeds"]) < row["seeds"]
            ax.bar(
                [k],
                [value],
                yerr=None if half is None else [[half], [half]],
                color=colours[k],
                alpha=0.85,
                hatch="//" if partly else None,
                edgecolor="black" if partly else colours[k],
                capsize=3,
            )
        ax.set_xticks(range(len(variants)))
        ax.set_xticklabels(variants, rotation=45, ha="right", fontsize="small")
        ax.grid(True, axis="y", alpha=0.3)
    for ax in axes[len(cells) :]:
        ax.set_visible(False)
    # The seeds the rows hold, which may be fewer than the study's (a part of it run alone).
    held = sorted({int(r["seeds"]) for r in rows})
    seeds = str(held[0]) if len(held) == 1 else f"{held[0]}–{held[-1]}"
    figure.suptitle(
        f"{study.name}: mean ± 95 % interval over {seeds} seed(s); hatched: not every "
        "seed converged; ✕: no finite figure (diverged)",
        fontsize="medium",
    )
    figure.subplots_adjust(left=0.06, right=0.99, bottom=0.12, top=0.93, hspace=0.9, wspace=0.25)
    path = out / "bars.png"
    figure.savefig(path, dpi=100)
    return [path]
