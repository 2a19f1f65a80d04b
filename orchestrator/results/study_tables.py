"""A study's figures and tables: one row per run, one summary per (cell, variant).

Every run gives its verdict, the final W2 of the agent average and of the study's agent, the
stationary W2 of both (the mean per-round W2 over the verdict's window: the error held once
arrived), the W2 floor at its chain count, the nodes' mean W2, the consensus error and the
share of messages lost; the study can add W2 at chosen iterations (``report_at``), the first
iteration the agent's W2 is at or below a ``threshold``, and any number of its
``metrics.json`` (``figures``). Over K seeds each is summarised by
:func:`starling.orchestrator.evaluation.replicates.interval` (mean ± 95 % Student-t); a
threshold crossing is a censored time
(:func:`~starling.orchestrator.evaluation.replicates.hitting_summary`: Kaplan–Meier median
and restricted mean, runs that never got there counted, not dropped). Cells and variants
are compared paired by seed (:mod:`starling.orchestrator.results.study_paired`,
``paired.csv``). Iteration k means k updates (the sample of round index k − 1).

Written into the study's folder by :func:`starling.orchestrator.execution.study.run_study`
after every run (so an interrupted study still leaves a table) and once at the end:
``seeds.csv`` (every run), ``table.csv`` and ``table.md`` (per cell and variant),
``paired.csv`` (the paired differences), ``curves.csv`` (W2 per iteration of every run)
and, with ``evaluation.hpd``, ``hpd_curves.csv``: [003] Fig. 3's error "during the sampling
procedure", the agent's and the average's rows of every run's ``hpd_curve.csv``
(:mod:`starling.orchestrator.evaluation.hpd`). The plots are
:mod:`starling.orchestrator.results.study_plots`'.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from starling.orchestrator.config.study import BASE_KEYS, FIRST_BELOW, Study
from starling.orchestrator.evaluation.replicates import (
    Hitting,
    Interval,
    first_iteration_below,
    hitting_summary,
    interval,
    iteration_value,
)
from starling.orchestrator.planning.plan import EvaluationPlan
from starling.orchestrator.results.study_paired import paired_lines, write_paired
from starling.orchestrator.results.write import csv_cell

__all__ = [
    "HEADER",
    "Curve",
    "cell_x",
    "figure_keys",
    "headline",
    "hitting_of",
    "interval_of",
    "lost_fraction",
    "read_curves",
    "read_hpd_rows",
    "run_row",
    "stationary_mean",
    "summarise",
    "write_hpd_curves",
    "write_tables",
]


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
                "baseline": study.baseline,
                "vary_data": study.vary_data,
                "threshold": study.threshold,
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
                    [c.cell, c.variant, c.seed, k + 1, csv_cell(c.average[k]), csv_cell(c.agent[k])]
                )
    keys = figure_keys(study)
    shown = [  # a figure no run has (W2 of a model without an exact posterior) is left out
        k
        for k in keys
        if k == FIRST_BELOW
        or (
            k not in ("w2_node_mean", "w2_floor", "w2_floor_round")
            and any(r.get(k) is not None for r in rows)
        )
        or k in ("w2_average", "w2_agent")
        and any(r.get("diverged") is not None for r in rows)
    ]
    lines = [f"# {study.name}", "", study.description, ""]
    lines += _rules(study, rows)
    lines.append(
        "| cell | variant | verdict | " + " | ".join(_title(k) for k in shown) + " | seconds |"
    )
    lines.append("|---" * (len(shown) + 4) + "|")
    for summary in summaries:
        cells = [_md_figure(summary, k) for k in shown]
        lines.append(
            f"| {summary['cell']} | {summary['variant']} | "
            f"{summary['converged']}/{summary['seeds']} converged | "
            + " | ".join(cells)
            + f" | {summary['seconds']:.1f} |"
        )
    if cell_x(study):
        lines += ["", f"{study.summary_text} / consensus error, by {study.x_label}:", ""]
        lines.append(_pivot(study, summaries))
    lines += paired_lines(study, rows, shown, _title)
    write_paired(out, study, rows, keys)
    (out / "table.md").write_text("\n".join(lines) + "\n")


def _rules(study: Study, rows: list[dict]) -> list[str]:
    """What the table's figures are: the interval, whether it covers the data, the
    stationary W2 and the censored hitting time."""
    lines = []
    if study.seeds > 1:
        lines += [
            f"Each figure: mean ± 95 % Student-t interval over {study.seeds} seeds "
            f"(seed … seed + {study.seeds - 1}). Iteration k means k updates. "
            + (
                "Each seed also draws the data anew (data.seed + r, and a held-out split's "
                "seed + r, `vary_data`): the intervals cover a new data set as well as new "
                "chains (for file data: a new deal of the file's rows among the nodes and a "
                "new held-out split; the rows themselves stay the file's)."
                if study.vary_data
                else "Every seed samples the same data (data.seed fixed): the intervals "
                "cover new chains on this data set, not a new data set (`vary_data: true` "
                "draws one per seed)."
            ),
            "",
        ]
    if any(r.get("w2_stationary_agent") is not None for r in rows):
        lines += [
            "W2 stationary: the mean per-round W2 over the second half of each run (the "
            "verdict's window), the error a sampler holds once it has arrived; each round's "
            "W2 is fitted to that round's chains alone, so it includes the floor a perfect "
            "sampler would score with that many chains (`w2_floor_round` in table.csv; "
            "`w2_floor` is the final figures', at chains × window).",
            "",
        ]
    if study.threshold is not None:
        lines += [
            f"{FIRST_BELOW}: first iteration at which agent {study.agent}'s W2 is ≤ "
            f"{study.threshold:g}, a censored time: a run that never gets there counts as "
            "more than its iterations, never dropped. Kaplan–Meier median, restricted mean "
            "E min(τ, T) ± its interval, and how many runs got there by T. It measures how "
            "fast the mean arrives, not how well a sampler samples: read it with W2 "
            "stationary.",
            "",
        ]
    return lines


def _csv(path: Path, rows: list[dict]) -> None:
    fields = list(dict.fromkeys(k for row in rows for k in row))
    with open(path, "w", newline="") as handle:
        table = csv.DictWriter(handle, fieldnames=fields)
        table.writeheader()
        table.writerows({k: csv_cell(v, "") for k, v in row.items()} for row in rows)


_TITLES = {
    "w2_average": "W2 average",
    "w2_agent": "W2 agent",
    "w2_stationary_average": "W2 stationary average",
    "w2_stationary_agent": "W2 stationary agent",
    "w2_floor": "W2 floor",
    "w2_floor_round": "W2 floor (one round)",
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
    if key == FIRST_BELOW:
        hitting = hitting_of(summary)
        return "–" if hitting is None else hitting.text()
    got = interval_of(summary, key)
    if got is None:
        return _md(None, summary)
    if key == "lost_fraction":
        return f"{100 * got.mean:.1f} %"
    return got.text()


def cell_x(study: Study) -> dict[str, float] | None:
    xs = {cell["label"]: cell.get("x") for cell in study.cells}
    numbers = {k: v for k, v in xs.items() if isinstance(v, (int, float))}
    if not study.x_label or len(numbers) < len(xs):
        return None
    return {label: float(value) for label, value in numbers.items()}


def _pivot(study: Study, rows: list[dict]) -> str:
    """Variants down, x across: "W2 (the study's summary) / consensus error" in each cell."""
    xs = cell_x(study) or {}
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
    # Indexed by round: a curve scored on a schedule (evaluation.w2_schedule) has rows for
    # some rounds only, and the rounds between them are NaN here.
    rounds = [int(r[0]) for r in body]
    out = {}
    for k, name in enumerate(header):
        if k > 0:
            values = np.full(max(rounds) + 1, np.nan)
            values[rounds] = [float(r[k]) if r[k] not in ("", "nan") else np.nan for r in body]
            out[name] = values
    return out


def figure_keys(study: Study) -> list[str]:
    """The figures of every row, in the order the tables print them: the first iteration
    below the threshold (when asked) right after the stationary W2s it must be read with."""
    keys = list(BASE_KEYS)
    if study.threshold is not None:
        keys.insert(keys.index("w2_stationary_agent") + 1, FIRST_BELOW)
    for k in study.report_at:
        keys += [f"w2_agent_at_{k}", f"w2_average_at_{k}"]
    return keys + list(study.figures)


def run_row(
    study: Study, plan: EvaluationPlan, metrics: Mapping, curve: Curve, agent: str, seed: int
) -> dict[str, Any]:
    """One run's figures (see the module docstring)."""
    w2 = metrics.get("w2") or {}
    start = plan.rounds // 2 if plan.evaluation.burn_in is None else plan.evaluation.burn_in
    row: dict[str, Any] = {
        "cell": curve.cell,
        "variant": curve.variant,
        "seed_index": seed,
        "seed": plan.seed,
        "data_seed": plan.data.seed,
        "algorithm": plan.algorithm,
        "verdict": (metrics.get("verdict") or {}).get("run"),
        "w2_average": w2.get("average"),
        "w2_agent": (w2.get("per_node") or {}).get(agent),
        "w2_stationary_average": stationary_mean(curve.average, start),
        "w2_stationary_agent": stationary_mean(curve.agent, start),
        "w2_floor": (w2.get("floor") or {}).get("mean"),
        "w2_floor_round": (w2.get("floor_round") or {}).get("mean"),
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
        row["iterations"] = len(curve.agent) if curve.agent is not None else plan.rounds
    for name, path in study.figures.items():
        row[name] = _dotted(metrics, path)
    return row


def stationary_mean(curve: np.ndarray | None, start: int) -> float | None:
    """The mean of a per-round W2 curve from round ``start`` on: the error a sampler holds
    once it has arrived, beside how fast it arrived. None without a curve, or if a round of
    that window has no W2 (it diverged)."""
    if curve is None or len(curve) <= start:
        return None
    window = np.asarray(curve[start:], dtype=float)
    return float(window.mean()) if np.all(np.isfinite(window)) else None


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
    half-width (``<name>_ci``, empty for one seed) and seed count (``<name>_n``); the first
    iteration below the threshold as a censored time (``first_below`` its Kaplan–Meier
    median, ``first_below_rmean`` ± ``first_below_rmean_ci`` its restricted mean,
    ``first_below_reached`` how many runs got there within ``first_below_horizon``)."""
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
            "converged": sum(1 for r in mine if r.get("verdict") == "converged"),
        }
        for key in figure_keys(study):
            if key == FIRST_BELOW:
                summary.update(_hitting_columns(mine))
                continue
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


def _hitting_columns(rows: list[dict]) -> dict[str, Any]:
    """The censored summary of the runs' first iterations below the threshold."""
    got = hitting_summary(
        [r.get(FIRST_BELOW) for r in rows], [int(r.get("iterations") or 0) for r in rows]
    )
    if got is None:
        return {FIRST_BELOW: None}
    return {
        FIRST_BELOW: got.median,
        f"{FIRST_BELOW}_rmean": got.restricted.mean,
        f"{FIRST_BELOW}_rmean_ci": got.restricted.half,
        f"{FIRST_BELOW}_reached": got.reached,
        f"{FIRST_BELOW}_horizon": got.horizon,
    }


def hitting_of(summary: Mapping[str, Any]) -> Hitting | None:
    """A summary row's censored hitting time back as a :class:`Hitting` (None if the
    study has no threshold)."""
    if f"{FIRST_BELOW}_rmean" not in summary or summary.get(f"{FIRST_BELOW}_rmean") is None:
        return None
    restricted = Interval(
        summary[f"{FIRST_BELOW}_rmean"],
        summary.get(f"{FIRST_BELOW}_rmean_ci"),
        summary["seeds"],
        summary["seeds"],
    )
    return Hitting(
        summary.get(FIRST_BELOW),
        restricted,
        int(summary[f"{FIRST_BELOW}_reached"]),
        summary["seeds"],
        int(summary[f"{FIRST_BELOW}_horizon"]),
    )


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
    base = ("w2_average", "w2_agent", "w2_stationary_agent")
    keys = [
        k
        for k in (*base, *(k for k in figure_keys(study) if k not in BASE_KEYS))
        if k == FIRST_BELOW or any(s.get(k) is not None for s in summaries)
    ]
    for summary in summaries:
        parts = [f"{summary['converged']}/{summary['seeds']} converged"]
        for key in keys:
            parts.append(f"{key} {_md_figure(summary, key)}")
        lines.append(f"{summary['cell']:>12} {summary['variant']:>12}  " + "; ".join(parts))
    return lines


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
            writer.writerow({k: csv_cell(v) for k, v in row.items()})
