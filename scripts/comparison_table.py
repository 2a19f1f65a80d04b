"""The comparison page's table and bars from saved study folders, without running anything.

``starling simulate examples/compare-samplers.yaml`` writes one folder with the whole grid
(``table.md``, ``bars.png``). When the grid was run in parts (some problems alone, with
fewer seeds, or one sampler apart because it is slow), this puts the parts back together:

    python scripts/comparison_table.py examples/compare-samplers.yaml PART... --out DIR

Each PART is a study folder (its ``seeds.csv`` and ``study.yaml``). Every run is checked
against the study file first: its cell (model, data, rounds, chains, faults) and its
variant (algorithm, topology, hyperparameters for that cell) must be the file's, or the
script stops with one line naming them; a run given twice (same cell, sampler and seed) is
taken from the first PART that has it. It then summarises the runs with the study's own
code (:func:`~starling.orchestrator.results.study_tables.summarise`: mean ± 95 % Student-t
interval over the seeds), draws ``bars.png`` with
:func:`~starling.orchestrator.results.study_plots.plot_bars`, and writes ``table.md``: one
line per problem × fault × sampler with the verdicts, the error held once arrived (agent
0's stationary W2 where the posterior is exact, else the nodes' mean Sinkhorn distance),
held-out accuracy and log-loss, and the ESS with its price per second, message and kB.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from starling.orchestrator.config.load import load
from starling.orchestrator.config.study import Study
from starling.orchestrator.results.study_plots import plot_bars
from starling.orchestrator.results.study_tables import summarise

TEXT_COLUMNS = ("cell", "variant", "algorithm", "verdict")
ERRORS = (("w2_stationary_agent", "W2"), ("sinkhorn", "Sinkhorn"))
"""The error shown per problem: the first of these a cell's runs have."""


def read_runs(folder: Path) -> list[dict[str, Any]]:
    """``seeds.csv`` as the study wrote its rows: numbers as floats, empty as None."""
    rows = []
    with open(folder / "seeds.csv", newline="") as handle:
        for raw in csv.DictReader(handle):
            row: dict[str, Any] = {}
            for key, value in raw.items():
                if key in TEXT_COLUMNS:
                    row[key] = value
                elif value == "":
                    row[key] = None
                else:
                    row[key] = float(value)
            row["seed_index"] = int(row["seed_index"])
            rows.append(row)
    return rows


def check_definition(folder: Path, study: Study, rows: list[dict[str, Any]]) -> None:
    """Stop unless every run's cell and variant in ``folder/study.yaml`` are the study's."""
    saved = yaml.safe_load((folder / "study.yaml").read_text())
    if _unseeded(saved.get("base") or {}) != _unseeded(study.base) or saved.get(
        "vary_data", False
    ) != bool(study.vary_data):
        sys.exit(f"comparison_table: {folder}: its base settings are not the study file's")
    cells = {c["label"]: c for c in study.cells}
    variants = {v["label"]: v for v in study.variants}
    saved_cells = {c["label"]: c for c in saved["cells"]}
    saved_variants = {v["label"]: v for v in saved["variants"]}
    for cell, variant in {(r["cell"], r["variant"]) for r in rows}:
        ours, theirs = variants.get(variant), saved_variants.get(variant)
        if cells.get(cell) != saved_cells.get(cell):
            sys.exit(f"comparison_table: {folder}: cell {cell!r} is not the study file's")
        if ours is None or theirs is None or _variant_in(ours, cell) != _variant_in(theirs, cell):
            sys.exit(
                f"comparison_table: {folder}: variant {variant!r} in cell {cell!r} is not "
                "the study file's"
            )


def _unseeded(base: Mapping[str, Any]) -> dict[str, Any]:
    """A study's base settings but its sampler seed (a part may start at a later one)."""
    return {k: v for k, v in base.items() if k != "seed"}


def _variant_in(variant: Mapping[str, Any], cell: str) -> dict[str, Any]:
    """What a variant runs in one cell: everything but the other cells' settings."""
    shown = {k: v for k, v in variant.items() if k != "per_cell"}
    shown["per_cell"] = (variant.get("per_cell") or {}).get(cell)
    return shown


def merged_runs(study: Study, folders: list[Path]) -> list[dict[str, Any]]:
    """Every checked run of the parts, each (cell, variant, seed) once, in the study's
    order of cells and variants.

    A part may have been run from a later base seed (``base.seed: 2, seeds: 2`` for the
    study's second and third replicates): each run's ``seed_index`` is set to its
    replicate in the study file, from its sampler seed, so paired differences pair the
    same seeds whichever part a run came from."""
    first_seed = {(cell, variant): experiment.seed for cell, variant, experiment in study.runs}
    taken: dict[tuple[str, str, int], dict[str, Any]] = {}
    for folder in folders:
        rows = read_runs(folder)
        check_definition(folder, study, rows)
        for row in rows:
            index = int(row["seed"]) - first_seed[(row["cell"], row["variant"])]
            if not 0 <= index < study.seeds:
                sys.exit(
                    f"comparison_table: {folder}: run of {row['variant']!r} in cell "
                    f"{row['cell']!r} has seed {int(row['seed'])}, not one of the study "
                    f"file's {study.seeds} replicates"
                )
            row["seed_index"] = index
            taken.setdefault((row["cell"], row["variant"], index), row)
    cell_order = [c["label"] for c in study.cells]
    variant_order = [v["label"] for v in study.variants]
    return sorted(
        taken.values(),
        key=lambda r: (
            cell_order.index(r["cell"]),
            variant_order.index(r["variant"]),
            r["seed_index"],
        ),
    )


def _figure(summary: dict[str, Any], key: str, spec: str, scale: float = 1.0) -> str:
    value = summary.get(key)
    if value is None:
        return "–"
    half = summary.get(f"{key}_ci")
    text = format(value * scale, spec)
    return text if half is None else f"{text} ± {format(half * scale, '.2g')}"


def _verdicts(summary: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    mine = [r for r in runs if (r["cell"], r["variant"]) == (summary["cell"], summary["variant"])]
    diverged = sum(1 for r in mine if r.get("verdict") == "diverged")
    text = f"{summary['converged']}/{summary['seeds']}"
    return text + (f" ({diverged} diverged)" if diverged else "")


def table_lines(summaries: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| problem / fault | sampler | converged | error (± 95 %) | accuracy % | log-loss "
        "| ESS | ESS/s | ESS/message | ESS/kB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        cell_runs = [r for r in runs if r["cell"] == s["cell"]]
        error = "–"
        for key, name in ERRORS:
            if any(r.get(key) is not None for r in cell_runs):
                error = f"{name} {_figure(s, key, '.3f')}"
                break
        lines.append(
            f"| {s['cell']} | {s['variant']} | {_verdicts(s, runs)} | {error} "
            f"| {_figure(s, 'accuracy', '.2f', 100.0)} | {_figure(s, 'log_loss', '.3f')} "
            f"| {_figure(s, 'ess', '.3g')} | {_figure(s, 'ess_per_second', '.3g')} "
            f"| {_figure(s, 'ess_per_message', '.3g')} "
            f"| {_figure(s, 'ess_per_kilobyte', '.3g')} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", type=Path, help="the study file the parts were run from")
    parser.add_argument("parts", type=Path, nargs="+", help="study folders, first wins")
    parser.add_argument("--out", type=Path, required=True, help="folder for table.md, bars.png")
    args = parser.parse_args(argv)
    study = load(args.study)
    if not isinstance(study, Study):
        sys.exit(f"comparison_table: {args.study} is not a study file")
    runs = merged_runs(study, args.parts)
    summaries = summarise(study, runs)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text("\n".join(table_lines(summaries, runs)) + "\n")
    drawn = plot_bars(args.out, study, summaries)
    print(f"{len(runs)} runs, {len(summaries)} rows: {args.out / 'table.md'}", *drawn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
