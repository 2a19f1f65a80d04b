"""Running a study: every (cell, variant, seed) of a
:class:`~starling.orchestrator.config.study.Study` in one engine, then its tables and plots."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from starling.orchestrator.config.study import slug
from starling.orchestrator.core.progress import Progress
from starling.orchestrator.execution.simulation import simulate_experiment
from starling.orchestrator.planning.plan import StudyPlan
from starling.orchestrator.results.study_plots import (
    plot_against_x,
    plot_bars,
    plot_curves,
    plot_hpd_curves,
)
from starling.orchestrator.results.study_tables import (
    Curve,
    headline,
    read_curves,
    read_hpd_rows,
    run_row,
    summarise,
    write_hpd_curves,
    write_tables,
)

__all__ = ["run_study"]


def run_study(
    plan: StudyPlan,
    out: Path,
    mode: str,
    say: Callable[[str], None] = print,
    progress: Progress | None = None,
) -> list[dict]:
    """Run every (cell, variant, seed) in ``mode`` ("simulate" or "run"); write the
    per-seed figures, their intervals, tables and plots. Returns one row per run.
    ``progress`` shows the runs done and each run's rounds."""
    out = Path(out)
    rows: list[dict] = []
    curves: list[Curve] = []
    hpd_rows: list[dict] = []
    progress = progress or Progress()
    inner = progress.inner()
    study = plan.study
    total = len(plan.runs)
    for done, (cell, variant, r, run) in enumerate(plan.runs):
        folder = out / slug(cell) / slug(variant)
        if study.seeds > 1:
            folder = folder / f"seed-{r}"
        started = time.monotonic()
        seed = f", seed {r}" if study.seeds > 1 else ""
        progress.cells(done, total, f"{cell} / {variant}{seed}")
        if mode == "run":
            # Loaded here: a simulated study never loads grpc (tests/orchestrator).
            from starling.orchestrator.execution.runner import run_experiment

            metrics = run_experiment(run, folder, say=lambda _m: None, progress=inner)
        else:
            metrics = simulate_experiment(
                run, folder, say=lambda _m: None, quiet=True, progress=inner
            )
        if metrics.get("interrupted"):  # Ctrl-C or SIGTERM, in either engine
            if rows:
                write_tables(out, study, rows, curves)
                write_hpd_curves(out, hpd_rows)
            # The message is the line the user reads last (the command's own would name
            # the phase of the run before, long over: "while the results were written").
            raise KeyboardInterrupt(
                f"interrupted during {cell} / {variant}{seed}; the runs before it are in "
                f"{out} (seeds.csv and the tables)"
            )
        samples_of = {n: c for n, c in (metrics.get("samples_per_node") or {}).items() if c}
        agent = study.agent if study.agent in samples_of else min(samples_of, default=study.agent)
        hpd_rows += read_hpd_rows(folder, cell, variant, r, agent, run.rounds)
        read = read_curves(folder / "w2_curve.csv")
        curve = Curve(cell, variant, r, read.get("average"), read.get(f"node-{agent}"))
        row = run_row(study, run.evaluation, metrics, curve, agent, r)
        row["seconds"] = round(time.monotonic() - started, 2)
        rows.append(row)
        if curve.average is not None and curve.agent is not None:
            curves.append(curve)
        say(
            f"{cell:>12} {variant:>12}{f' seed {r}' if study.seeds > 1 else ''}"
            f"  W2 avg {_fmt(row['w2_average'])}  agent {_fmt(row['w2_agent'])}"
            f"  consensus {_fmt(row['consensus_error'])}  {row.get('verdict') or ''}"
            f"  ({row['seconds']} s)"
        )
    progress.cells(total, total)
    write_tables(out, study, rows, curves)
    write_hpd_curves(out, hpd_rows)
    summaries = summarise(study, rows)
    plotted = plot_curves(out, study, curves) + plot_against_x(out, study, summaries)
    plotted += plot_hpd_curves(out, study.name, hpd_rows) + plot_bars(out, study, summaries)
    if plotted:
        say(f"plots: {', '.join(str(p) for p in plotted)}")
    for line in headline(study, rows):
        say(line)
    say(f"study written to {out}")
    return rows


def _fmt(value) -> str:
    if value is None:
        return "   -   "
    return f"{value:7.4f}" if abs(value) < 1e3 else f"{value:7.2g}"
