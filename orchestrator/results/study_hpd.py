"""A study's HPD curves: [003] Fig. 3's error "during the sampling procedure", per variant.

Each run with ``evaluation.hpd`` writes ``hpd_curve.csv``
(:mod:`starling.orchestrator.evaluation.hpd`): the HPD error of the samples from its window's start
up to each scored round. A study gathers the agent's and the average's rows of every run into
``hpd_curves.csv`` and plots them per cell, ``hpd-<cell>.png``.

The x axis is the share of the run done, ``(round + 1) / rounds``, not the round: the
variants of one study may spend their iteration budget in different numbers of rounds
(``dglmc-logreg-hpd``: DG-LMC's 500 rounds of 10 local steps against D-SGLD's 5,000 of one
step each, both T = 500 iterations), and at one share they have spent the same part of it.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from starling.orchestrator.results.study_tables import figure_class, slug

__all__ = ["HEADER", "plot_hpd_curves", "read_hpd_rows", "write_hpd_curves"]

HEADER = ("cell", "variant", "seed", "series", "round", "share", "relative_error", "excess_error")


def read_hpd_rows(
    folder: Path, cell: str, variant: str, seed: int, agent: str, rounds: int
) -> list[dict]:
    """The agent's and the average's rows of ``folder/hpd_curve.csv`` (none if absent)."""
    path = folder / "hpd_curve.csv"
    if not path.is_file():
        return []
    picked = {agent: "agent", "average": "average"}
    rows = []
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            series = picked.get(row["node"])
            if series is None or row["relative_error"] == "":
                continue
            at = int(row["round"])
            rows.append(
                {
                    "cell": cell,
                    "variant": variant,
                    "seed": seed,
                    "series": series,
                    "round": at,
                    "share": (at + 1) / rounds,
                    "relative_error": float(row["relative_error"]),
                    "excess_error": float(row["excess_error"]),
                }
            )
    return rows


def write_hpd_curves(out: Path, rows: Sequence[dict]) -> None:
    """``out/hpd_curves.csv``: every gathered row (nothing written without any)."""
    if not rows:
        return
    with open(out / "hpd_curves.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=HEADER)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: f"{v:.6g}" if isinstance(v, float) else v for k, v in row.items()})


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
