"""A study's figures: one row per run (``seeds.csv``), one summary per (cell, variant).

Every run gives the final W2 of the agent average and of the study's agent, the nodes'
mean W2, the consensus error and the share of messages lost; the study can add W2 at
chosen iterations (``report_at``), the first iteration the agent's W2 is at or below a
``threshold``, and any number of its ``metrics.json`` (``figures``). Over K seeds each is
summarised by :func:`starling.orchestrator.evaluation.replicates.interval` (mean ± 95 % Student-t);
a threshold crossing is averaged over the seeds that reach it, and the count says how many.
Iteration k means k updates (the sample of round index k − 1).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from starling.orchestrator.evaluation.replicates import (
    Interval,
    first_iteration_below,
    interval,
    iteration_value,
)

if TYPE_CHECKING:
    from starling.orchestrator.config.experiment import Experiment
    from starling.orchestrator.config.study import Study

__all__ = [
    "Curve",
    "figure_keys",
    "headline",
    "read_curves",
    "reserved_column",
    "run_row",
    "summarise",
]

BASE_KEYS = ("w2_average", "w2_agent", "w2_node_mean", "consensus_error", "lost_fraction")
FIRST_BELOW = "first_below"
_LABELS = ("cell", "variant", "seed_index", "seed", "algorithm", "diverged", "seconds")
"""The other columns of ``seeds.csv`` (:func:`run_row`) and the summary's."""


def reserved_column(name: str) -> bool:
    """Whether ``name`` is a column a study writes whatever its ``figures``."""
    at = name.startswith(("w2_agent_at_", "w2_average_at_")) and name.rsplit("_", 1)[1].isdigit()
    return name in (*BASE_KEYS, FIRST_BELOW, *_LABELS) or at


@dataclass(frozen=True)
class Curve:
    """W2 per iteration of one run: ``average`` (the agent average) and the ``agent``'s."""

    cell: str
    variant: str
    seed: int
    average: np.ndarray | None
    agent: np.ndarray | None


def read_curves(path: Path) -> dict[str, np.ndarray]:
    """A run's ``w2_curve.csv`` (written by :mod:`starling.orchestrator.results.write`): column ->
    values; empty when the run has no posterior to score against."""
    if not path.is_file():
        return {}
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    if len(rows) < 2:
        return {}
    header, body = rows[0], rows[1:]
    return {
        name: np.array([float(r[k]) if r[k] not in ("", "nan") else np.nan for r in body])
        for k, name in enumerate(header)
        if k > 0
    }


def figure_keys(study: Study) -> list[str]:
    """The figures of every row, in the order the tables print them."""
    keys = list(BASE_KEYS)
    for k in study.report_at:
        keys += [f"w2_agent_at_{k}", f"w2_average_at_{k}"]
    if study.threshold is not None:
        keys.append(FIRST_BELOW)
    return keys + list(study.figures)


def run_row(
    study: Study, experiment: Experiment, metrics: Mapping, curve: Curve, agent: str, seed: int
) -> dict[str, Any]:
    """One run's figures (see the module docstring)."""
    w2 = metrics.get("w2") or {}
    row: dict[str, Any] = {
        "cell": curve.cell,
        "variant": curve.variant,
        "seed_index": seed,
        "seed": experiment.seed,
        "algorithm": experiment.algorithm,
        "w2_average": w2.get("average"),
        "w2_agent": (w2.get("per_node") or {}).get(agent),
        "w2_node_mean": w2.get("node_mean"),
        "consensus_error": metrics.get("consensus_error"),
        "lost_fraction": lost_fraction(metrics.get("links") or {}),
        "diverged": min((metrics.get("diverged") or {}).values(), default=None),
    }
    for k in study.report_at:
        row[f"w2_agent_at_{k}"] = _at(curve.agent, k)
        row[f"w2_average_at_{k}"] = _at(curve.average, k)
    if study.threshold is not None:
        row[FIRST_BELOW] = (
            first_iteration_below(curve.agent, study.threshold) if curve.agent is not None else None
        )
    for name, path in study.figures.items():
        row[name] = _dotted(metrics, path)
    return row


def _at(curve: np.ndarray | None, k: int) -> float | None:
    return None if curve is None else iteration_value(curve, k)


def _dotted(metrics: Mapping, path: str) -> float | None:
    """The number at ``a.b.c`` in ``metrics`` (None if absent or not a finite number)."""
    value: Any = metrics
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def lost_fraction(links: Mapping[str, Mapping[str, int]]) -> float | None:
    """Share of the messages that did not reach their receiver in time, over all links."""
    total = lost = 0
    for c in links.values():
        total += c.get("sent", 0) + c.get("withheld", 0)
        lost += c.get("withheld", 0) + c.get("dropped", 0) + c.get("late", 0)
    return round(lost / total, 4) if total else None


def summarise(study: Study, rows: list[dict]) -> list[dict[str, Any]]:
    """One row per (cell, variant): each figure's mean (under its own name), interval
    half-width (``<name>_ci``, empty for one seed) and seed count (``<name>_n``)."""
    out = []
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["cell"], row["variant"]), []).append(row)
    for (cell, variant), mine in groups.items():
        summary: dict[str, Any] = {
            "cell": cell,
            "variant": variant,
            "algorithm": mine[0]["algorithm"],
            "seeds": len(mine),
        }
        for key in figure_keys(study):
            got = interval(r.get(key) for r in mine)
            summary[key] = None if got is None else got.mean
            summary[f"{key}_ci"] = None if got is None else got.half
            summary[f"{key}_n"] = 0 if got is None else got.n
        diverged = [r["diverged"] for r in mine if r["diverged"] is not None]
        summary["diverged"] = min(diverged, default=None)
        summary["diverged_seeds"] = len(diverged)
        summary["seconds"] = round(sum(r.get("seconds", 0.0) for r in mine), 2)
        out.append(summary)
    return out


def interval_of(summary: Mapping[str, Any], key: str) -> Interval | None:
    """A summary row's figure back as an :class:`Interval` (None if no seed has it)."""
    if summary.get(key) is None:
        return None
    return Interval(summary[key], summary.get(f"{key}_ci"), summary[f"{key}_n"], summary["seeds"])


def headline(study: Study, rows: list[dict]) -> list[str]:
    """What the study prints at the end: the interval rule, then the figures per cell."""
    if study.seeds == 1 and study.threshold is None:
        return []
    lines = [f"over {study.seeds} seed(s): mean ± 95 % Student-t interval; iteration k = k updates"]
    summaries = summarise(study, rows)
    keys = [
        k
        for k in ("w2_average", "w2_agent", *(k for k in figure_keys(study) if k not in BASE_KEYS))
        if k == FIRST_BELOW or any(s.get(k) is not None for s in summaries)
    ]
    for summary in summaries:
        parts = []
        for key in keys:
            got = interval_of(summary, key)
            never = "never" if key == FIRST_BELOW else "–"
            parts.append(f"{key} {never if got is None else got.text(integer=key == FIRST_BELOW)}")
        lines.append(f"{summary['cell']:>12} {summary['variant']:>12}  " + "; ".join(parts))
    return lines
