"""A study's report: ``table.csv``, ``curves.csv``, ``table.md`` and the plots.

Written by :func:`starling.orchestrator.study.run_study` after every run (so an interrupted study
still leaves a table) and once at the end. Plots need matplotlib; without it the tables
are still written.
"""

from __future__ import annotations

import csv
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import yaml

from starling.orchestrator.study_figures import (
    FIRST_BELOW,
    Curve,
    figure_keys,
    interval_of,
    summarise,
)

if TYPE_CHECKING:
    from starling.orchestrator.study import Study

__all__ = ["figure_class", "plot_against_x", "plot_curves", "slug", "write_tables"]


def slug(label: str) -> str:
    """A label as a folder or file name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-") or "run"


def write_tables(out: Path, study: Study, rows: list[dict], curves: list[Curve]) -> None:
    """``seeds.csv`` (every run), ``table.csv`` and ``table.md`` (per cell and variant,
    mean ± interval over the seeds), ``curves.csv`` (W2 per iteration of every run)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.yaml").write_text(
        yaml.safe_dump(
            {
                "study": study.name,
                "description": study.description,
                "base": dict(study.base),
                "variants": list(study.variants),
                "cells": list(study.cells),
                "agent": study.agent,
                "seeds": study.seeds,
                "x_label": study.x_label,
                "summary": study.summary,
            },
            sort_keys=False,
        )
    )
    _csv(out / "seeds.csv", rows)
    summaries = summarise(study, rows)
    _csv(out / "table.csv", summaries)
    with open(out / "curves.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["cell", "variant", "seed", "iteration", "w2_average", "w2_agent"])
        for c in curves:
            assert c.average is not None and c.agent is not None
            for k in range(len(c.average)):
                writer.writerow(
                    [c.cell, c.variant, c.seed, k + 1, f"{c.average[k]:.6g}", f"{c.agent[k]:.6g}"]
                )
    keys = figure_keys(study)
    shown = [  # a figure no run has (W2 of a model without an exact posterior) is left out
        k
        for k in keys
        if k == FIRST_BELOW
        or (k != "w2_node_mean" and any(r.get(k) is not None for r in rows))
        or k in ("w2_average", "w2_agent")
        and any(r.get("diverged") is not None for r in rows)
    ]
    lines = [f"# {study.name}", "", study.description, ""]
    if study.seeds > 1:
        lines += [
            f"Each figure: mean ± 95 % Student-t interval over {study.seeds} seeds "
            f"(seed … seed + {study.seeds - 1}). Iteration k means k updates.",
            "",
        ]
    if study.threshold is not None:
        lines += [
            f"{FIRST_BELOW}: first iteration at which agent {study.agent}'s W2 is ≤ "
            f"{study.threshold:g}, over the seeds that reach it (n/K when not all do).",
            "",
        ]
    lines.append("| cell | variant | " + " | ".join(_title(k) for k in shown) + " | seconds |")
    lines.append("|---" * (len(shown) + 3) + "|")
    for summary in summaries:
        cells = [_md_figure(summary, k) for k in shown]
        lines.append(
            f"| {summary['cell']} | {summary['variant']} | "
            + " | ".join(cells)
            + f" | {summary['seconds']:.1f} |"
        )
    if _cell_x(study):
        lines += ["", f"{study.summary_text} / consensus error, by {study.x_label}:", ""]
        lines.append(_pivot(study, summaries))
    (out / "table.md").write_text("\n".join(lines) + "\n")


def _csv(path: Path, rows: list[dict]) -> None:
    fields = list(dict.fromkeys(k for row in rows for k in row))
    with open(path, "w", newline="") as handle:
        table = csv.DictWriter(handle, fieldnames=fields)
        table.writeheader()
        table.writerows(rows)


_TITLES = {
    "w2_average": "W2 average",
    "w2_agent": "W2 agent",
    "consensus_error": "consensus error",
    "lost_fraction": "messages lost",
    FIRST_BELOW: "first iteration ≤ threshold",
}


def _title(key: str) -> str:
    if key.startswith("w2_agent_at_"):
        return f"W2 agent at {key.removeprefix('w2_agent_at_')}"
    if key.startswith("w2_average_at_"):
        return f"W2 average at {key.removeprefix('w2_average_at_')}"
    return _TITLES.get(key, key)


def _md_figure(summary: Mapping, key: str) -> str:
    got = interval_of(summary, key)
    if got is None:
        if key == FIRST_BELOW:
            return f"never (0/{summary['seeds']})"
        return _md(None, summary)
    if key == "lost_fraction":
        return f"{100 * got.mean:.1f} %"
    return got.text(integer=key == FIRST_BELOW)


def _cell_x(study: Study) -> dict[str, float] | None:
    xs = {cell["label"]: cell.get("x") for cell in study.cells}
    numbers = {k: v for k, v in xs.items() if isinstance(v, (int, float))}
    if not study.x_label or len(numbers) < len(xs):
        return None
    return {label: float(value) for label, value in numbers.items()}


def _pivot(study: Study, rows: list[dict]) -> str:
    """Variants down, x across: "W2 (the study's summary) / consensus error" in each cell."""
    xs = _cell_x(study) or {}
    header = "| variant | " + " | ".join(f"{study.x_label} = {x:g}" for x in xs.values()) + " |"
    lines = [header, "|---" * (len(xs) + 1) + "|"]
    for variant in dict.fromkeys(r["variant"] for r in rows):
        cells = []
        for label in xs:
            row = next((r for r in rows if r["variant"] == variant and r["cell"] == label), None)
            cells.append(
                "–"
                if row is None
                else f"{_md_figure(row, study.summary_key)} / {_md_figure(row, 'consensus_error')}"
            )
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _md(value, row: Mapping | None = None) -> str:
    if value is None:
        if row is not None and row.get("diverged") is not None:
            return f"diverged (round {row['diverged']})"
        return "–"
    return f"{value:.4f}" if abs(value) < 1e3 else f"{value:.3g}"


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
    xs = _cell_x(study)
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
