"""Studies: one experiment file that expands into a grid of runs, then a table and plots.

A study reproduces a figure: ``variants`` (usually algorithms, the curves of a plot) crossed
with ``cells`` (settings such as topology or link-failure probability, the panels)::

    study: admm-fig1-n5
    base: {model: ..., data: ..., rounds: 100, chains: 100, seed: 7}
    variants:
      - {label: D-ADMMS, algorithm: d-admms, hyperparameters: {rho: 5.0}}
      - {label: D-ULA, algorithm: d-ula, hyperparameters: {...},
         per_cell: {full: {hyperparameters: {...}}}}
    cells:
      - {label: ring, topology: {kind: ring, nodes: 5}}
      - {label: full, topology: {kind: full, nodes: 5}}

Each run's fields are ``base``, then the cell, then the variant, then the variant's
``per_cell`` entry for that cell, merged mapping by mapping. The study writes every run's
results folder under ``<out>/<cell>/<variant>/``, plus ``curves.csv`` (W2 per round of one
agent and of the agent average), ``table.csv`` and ``table.md`` (final W2 and consensus
error), and one plot per cell when matplotlib is installed.
"""

from __future__ import annotations

import csv
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from node.params import STRICT, ConfigError, Float, Str
from orchestrator.evaluation import evaluate
from orchestrator.experiment import Experiment, parse_experiment
from orchestrator.schema import validate

__all__ = ["Study", "is_study", "load_study", "run_study"]

SUMMARIES = ("average", "agent")


def _summary(value: Any) -> str:
    if value not in SUMMARIES:
        raise ValueError(f"expected one of {', '.join(SUMMARIES)}, got {value!r}")
    return value


class _Labelled(BaseModel):
    """A cell or a variant: a label, then experiment fields merged over ``base``."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False, frozen=True)
    label: Str
    x: Float | None = None


class StudyFile(BaseModel):
    """A study file: the schema of its own fields (the experiment fields it merges are
    checked by the experiment schema, run by run)."""

    model_config = STRICT
    study: Annotated[str, BeforeValidator(str)]
    description: Str = ""
    base: dict[str, Any] = Field(default_factory=dict)
    variants: Annotated[list[_Labelled], Field(min_length=1)]
    cells: Annotated[list[_Labelled], Field(min_length=1)] = [_Labelled(label="all")]
    agent: Annotated[str, BeforeValidator(str)] = "0"
    x_label: Str = ""
    summary: Annotated[Any, AfterValidator(_summary)] = "average"


@dataclass(frozen=True)
class Study:
    name: str
    description: str
    base: Mapping[str, Any]
    variants: tuple[Mapping[str, Any], ...]
    cells: tuple[Mapping[str, Any], ...]
    agent: str = "0"
    """The node whose curve is reported as "agent" (the paper plots one agent)."""
    x_label: str = ""
    """When every cell has a numeric ``x`` (e.g. a failure probability), the name of that
    axis: the study then also plots and tabulates the final metrics against ``x``."""
    summary: str = "average"
    """Which W2 the table against ``x`` and ``summary.png`` show: of the network-average
    iterate (``average``) or of the ``agent`` node. Use ``agent`` to compare a
    master/worker sampler, whose samples live on one node, with a decentralised one."""
    runs: tuple[tuple[str, str, Experiment], ...] = field(default=())

    @property
    def summary_key(self) -> str:
        return f"w2_{self.summary}"

    @property
    def summary_text(self) -> str:
        return "W2 of the agent average" if self.summary == "average" else (
            f"W2 of agent {self.agent}"
        )

def is_study(raw: Any) -> bool:
    return isinstance(raw, Mapping) and "study" in raw


def _merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-") or "run"


def _labelled(items: list[_Labelled], where: str) -> tuple[Mapping[str, Any], ...]:
    seen = set()
    for k, item in enumerate(items):
        if item.label in seen:
            raise ConfigError(f"{where}[{k}].label: {item.label!r} appears twice")
        seen.add(item.label)
    return tuple(item.model_dump(exclude_unset=True) for item in items)


def load_study(raw: Mapping[str, Any]) -> Study:
    spec = validate(StudyFile, {k: v for k, v in raw.items() if v is not None or k == "study"})
    base = spec.base
    variants = _labelled(spec.variants, "variants")
    cells = _labelled(spec.cells, "cells")
    name = spec.study
    summary = spec.summary
    runs = []
    for cell in cells:
        for variant in variants:
            fields = _merge(base, {k: v for k, v in cell.items() if k not in ("label", "x")})
            fields = _merge(
                fields, {k: v for k, v in variant.items() if k not in ("label", "per_cell")}
            )
            fields = _merge(fields, (variant.get("per_cell") or {}).get(cell["label"], {}))
            fields["name"] = f"{name}-{_slug(cell['label'])}-{_slug(variant['label'])}"
            try:
                experiment = parse_experiment(fields)
            except ConfigError as exc:
                raise ConfigError(
                    f"cell {cell['label']!r}, variant {variant['label']!r}: {exc}"
                ) from None
            runs.append((cell["label"], variant["label"], experiment))
    return Study(
        name=name,
        description=spec.description,
        base=base,
        variants=variants,
        cells=cells,
        agent=spec.agent,
        x_label=spec.x_label,
        summary=summary,
        runs=tuple(runs),
    )


def run_study(
    study: Study,
    out: Path,
    mode: str,
    say: Callable[[str], None] = print,
) -> list[dict]:
    """Run every (cell, variant) in ``mode`` ("simulate" or "run"); write tables and plots."""
    from orchestrator.runner import run_experiment
    from orchestrator.simulation import simulate_experiment

    out = Path(out)
    rows: list[dict] = []
    curves: list[tuple[str, str, np.ndarray, np.ndarray]] = []
    for cell, variant, experiment in study.runs:
        folder = out / _slug(cell) / _slug(variant)
        started = time.monotonic()
        if mode == "run":
            metrics = run_experiment(experiment, folder, say=lambda _m: None)
            if metrics.get("interrupted"):
                if rows:
                    _write_tables(out, study, rows, curves)
                say(f"interrupted during {cell} / {variant}; the runs before it are in {out}")
                raise KeyboardInterrupt
        else:
            metrics = simulate_experiment(experiment, folder, say=lambda _m: None, quiet=True)
        samples = _load_samples(folder)
        evaluation = evaluate(experiment, samples)
        w2 = metrics.get("w2") or {}
        agent = study.agent if study.agent in samples else sorted(samples)[0]
        row = {
            "cell": cell,
            "variant": variant,
            "algorithm": experiment.algorithm,
            "w2_average": w2.get("average"),
            "w2_agent": (w2.get("per_node") or {}).get(agent),
            "w2_node_mean": w2.get("node_mean"),
            "consensus_error": metrics.get("consensus_error"),
            "lost_fraction": _lost_fraction(metrics.get("links") or {}),
            "diverged": min((metrics.get("diverged") or {}).values(), default=None),
            "seconds": round(time.monotonic() - started, 2),
        }
        rows.append(row)
        if "average" in evaluation.curves:
            curves.append((cell, variant, evaluation.curves["average"], evaluation.curves[agent]))
        say(
            f"{cell:>12} {variant:>12}  W2 avg {_fmt(row['w2_average'])}"
            f"  agent {_fmt(row['w2_agent'])}  consensus {_fmt(row['consensus_error'])}"
            f"  ({row['seconds']} s)"
        )
    _write_tables(out, study, rows, curves)
    plotted = _plot(out, study, curves) + _plot_against_x(out, study, rows)
    if plotted:
        say(f"plots: {', '.join(str(p) for p in plotted)}")
    say(f"study written to {out}")
    return rows


def _lost_fraction(links: Mapping[str, Mapping[str, int]]) -> float | None:
    """Share of the messages that did not reach their receiver in time, over all links."""
    total = lost = 0
    for c in links.values():
        total += c.get("sent", 0) + c.get("withheld", 0)
        lost += c.get("withheld", 0) + c.get("dropped", 0) + c.get("late", 0)
    return round(lost / total, 4) if total else None


def _fmt(value) -> str:
    if value is None:
        return "   -   "
    return f"{value:7.4f}" if abs(value) < 1e3 else f"{value:7.2g}"


def _load_samples(folder: Path) -> dict[str, np.ndarray]:
    samples = {}
    for file in sorted((folder / "samples").glob("node-*.npz")):
        with np.load(file) as data:
            samples[file.stem[len("node-") :]] = data["samples"]
    return samples


def _write_tables(out: Path, study: Study, rows: list[dict], curves) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.yaml").write_text(
        yaml.safe_dump(
            {"study": study.name, "description": study.description, "base": dict(study.base),
             "variants": list(study.variants), "cells": list(study.cells), "agent": study.agent},
            sort_keys=False,
        )
    )  # fmt: skip
    with open(out / "table.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
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
    if not study.x_label or not all(isinstance(v, (int, float)) for v in xs.values()):
        return None
    return {label: float(value) for label, value in xs.items()}


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


def _plot_against_x(out: Path, study: Study, rows: list[dict]) -> list[Path]:
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


def _plot(out: Path, study: Study, curves) -> list[Path]:
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
        path = out / f"w2-{_slug(cell)}.png"
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return written
