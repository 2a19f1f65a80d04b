"""A study's report: ``table.csv``, ``curves.csv``, ``table.md`` and the plots.

Written by :func:`orchestrator.study.run_study` after every run (so an interrupted study
still leaves a table) and once at the end. Plots need matplotlib; without it the tables
are still written.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import yaml

if TYPE_CHECKING:
    from orchestrator.study import Study

__all__ = ["plot_against_x", "plot_curves", "slug", "write_tables"]


def slug(label: str) -> str:
    """A label as a folder or file name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-") or "run"


def write_tables(out: Path, study: Study, rows: list[dict], curves) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.yaml").write_text(
        yaml.safe_dump(
            {"study": study.name, "description": study.description, "base": dict(study.base),
             "variants": list(study.variants), "cells": list(study.cells), "agent": study.agent},
            sort_keys=False,
        )
    )  # fmt: skip
    with open(out / "table.csv", "w", newline="") as handle:
        table = csv.DictWriter(handle, fieldnames=list(rows[0]))
        table.writeheader()
        table.writerows(rows)
    with open(out / "curves.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["cell", "variant", "round", "w2_average", "w2_agent"])
        for cell, variant, average, agent in curves:
            for k in range(len(average)):
                writer.writerow([cell, variant, k, f"{average[k]:.6g}", f"{agent[k]:.6g}"])
    lines = [f"# {study.name}", "", study.description, ""]
    lines.append(
        "| cell | variant | W2 average | W2 agent | consensus error | messages lost | seconds |"
    )
    lines.append("|---|---|---|---|---|---|---|")
    for row in rows:
        lost = "–" if row["lost_fraction"] is None else f"{100 * row['lost_fraction']:.1f} %"
        lines.append(
            f"| {row['cell']} | {row['variant']} | {_md(row['w2_average'], row)} | "
            f"{_md(row['w2_agent'], row)} | {_md(row['consensus_error'], row)} | {lost} | "
            f"{row['seconds']:.1f} |"
        )
    if _cell_x(study):
        lines += ["", f"{study.summary_text} / consensus error, by {study.x_label}:", ""]
        lines.append(_pivot(study, rows))
    (out / "table.md").write_text("\n".join(lines) + "\n")


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
                else f"{_md(row[study.summary_key], row)} / {_md(row['consensus_error'], row)}"
            )
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _md(value, row: Mapping | None = None) -> str:
    if value is None:
        if row is not None and row.get("diverged") is not None:
            return f"diverged (round {row['diverged']})"
        return "–"
    return f"{value:.4f}" if abs(value) < 1e3 else f"{value:.3g}"


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


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
    plt = _pyplot()
    if not xs or plt is None:
        return []
    figure, axes = plt.subplots(1, 2, figsize=(12, 4))
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
                ax.plot(x[gone], np.full(int(gone.sum()), top), "x", ms=11, mew=2,
                        color=line.get_color())  # fmt: skip
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
    figure.legend(handles, labels, loc="center right", title="\n".join(notes) or None,
                  title_fontsize="small")  # fmt: skip
    figure.suptitle(study.name)
    figure.tight_layout(rect=(0, 0, 0.84, 1))
    path = out / "summary.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return [path]


def plot_curves(out: Path, study: Study, curves) -> list[Path]:
    plt = _pyplot()
    if plt is None:
        return []
    written = []
    for cell in dict.fromkeys(c for c, *_ in curves):
        figure, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
        for c, variant, average, agent in curves:
            if c != cell:
                continue
            line = axes[0].semilogy(agent, label=variant)[0]
            axes[1].semilogy(average, label=variant, color=line.get_color())
        axes[0].set_title(f"{cell}: agent {study.agent}")
        axes[1].set_title(f"{cell}: agent average")
        for ax in axes:
            ax.set_xlabel("iteration")
            ax.grid(True, which="both", alpha=0.3)
        axes[0].set_ylabel("W2 to the posterior")
        axes[1].legend()
        figure.suptitle(study.name)
        figure.tight_layout()
        path = out / f"w2-{slug(cell)}.png"
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return written
