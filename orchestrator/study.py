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

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from node.params import STRICT, ConfigError, Float, Str
from orchestrator.evaluation import evaluate
from orchestrator.experiment import Experiment, parse_experiment
from orchestrator.schema import validate
from orchestrator.study_report import plot_against_x, plot_curves, slug, write_tables

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
        return (
            "W2 of the agent average"
            if self.summary == "average"
            else (f"W2 of agent {self.agent}")
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
            fields["name"] = f"{name}-{slug(cell['label'])}-{slug(variant['label'])}"
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
        folder = out / slug(cell) / slug(variant)
        started = time.monotonic()
        if mode == "run":
            metrics = run_experiment(experiment, folder, say=lambda _m: None)
            if metrics.get("interrupted"):
                if rows:
                    write_tables(out, study, rows, curves)
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
    write_tables(out, study, rows, curves)
    plotted = plot_curves(out, study, curves) + plot_against_x(out, study, rows)
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
