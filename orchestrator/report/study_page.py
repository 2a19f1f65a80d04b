"""The report of a study: one page comparing all cells (``report.html`` in the study's
folder), from the files the study wrote (:mod:`starling.orchestrator.results.study_tables`).

The banner counts the runs' verdicts (``seeds.csv``) and names those that did not
converge; the paired differences (``paired.csv``) have a table of their own. Every metric
column of ``curves.csv`` is drawn against round, one row of panels per cell,
one line per variant; where a (cell, variant) has several curves (replicates over seeds:
a ``seed`` or ``replicate`` column, or repeated rounds) the line is their mean with ±1 sd
over them shaded. When every cell has a numeric ``x``, the final figures of ``table.csv``
are drawn against it, with ±1 sd error bars over replicates.
"""

from __future__ import annotations

import base64
import csv
import html
from collections import defaultdict
from pathlib import Path

import numpy as np

from starling.node.params import ConfigError
from starling.node.yaml_input import load_yaml
from starling.orchestrator.report.loading import damaged
from starling.orchestrator.report.page import Section, figure_html, page
from starling.orchestrator.report.plotting import colour, data_uri, pyplot
from starling.orchestrator.report.tables import table
from starling.orchestrator.report.verdict import study_verdict_block

__all__ = ["write_study_report"]

KEYS = ("cell", "variant", "round", "iteration", "seed", "seed_index", "replicate")
PAIRED = "Paired by seed: each variant minus the baseline, each cell minus the first"
NAMES = {
    "w2_average": "W2 of the network-average iterate",
    "w2_agent": "W2 of agent {agent}",
    "w2_node_mean": "mean W2 over nodes",
    "consensus_error": "consensus error E|x_i − x̄|²",
}


def _ceiling(values) -> float | None:
    """Top of a log axis that keeps ordinary values readable: 1000 × the median of the
    finite positive values, when something lies beyond it (a sampler that blew up)."""
    finite = np.array([v for v in values if np.isfinite(v) and v > 0])
    if not finite.size:
        return None
    top = 1e3 * float(np.median(finite))
    return top if finite.max() > top else None


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))
    except OSError as exc:
        raise damaged(path, f"unreadable ({exc.strerror or exc})") from None
    except (ValueError, csv.Error):
        raise damaged(path, "not a CSV file") from None


def _study_file(path: Path) -> tuple[str, dict]:
    """``study.yaml``'s text and its mapping."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise damaged(path, f"unreadable ({exc.strerror or exc})") from None
    except ValueError:  # not UTF-8
        raise damaged(path, "not a text file") from None
    try:
        study = load_yaml(text, str(path)) or {}
    except ConfigError as exc:
        raise damaged(path, str(exc).removeprefix(f"{path}:").strip()) from None
    if not isinstance(study, dict):
        raise damaged(path, f"expected a mapping, got {type(study).__name__}")
    return text, study


def _number(text: str | None) -> float:
    try:
        return float(text) if text not in (None, "", "None") else np.nan
    except ValueError:
        return np.nan


def _cell(text: str | None) -> str | float | None:
    """A table.csv cell as the page shows it: a fraction as a float (the table prints it to
    4 significant figures, not the file's 16 digits), anything else as written."""
    if text is None or not any(mark in text for mark in ".eE") or text.strip() in ("", "None"):
        return text
    try:
        return float(text)
    except ValueError:
        return text  # a label with a dot in it


def _label(column: str, study: dict) -> str:
    return NAMES.get(column, column.replace("_", " ")).format(agent=study.get("agent", "0"))


def _curves_figure(rows: list[dict[str, str]], study: dict):
    plt = pyplot()
    if plt is None or not rows:
        return None
    metrics = [c for c in rows[0] if c not in KEYS]
    step = "iteration" if "iteration" in rows[0] else "round"
    cells = list(dict.fromkeys(r["cell"] for r in rows))
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    grouped: dict[tuple[str, str, str], dict[int, list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for r in rows:
        for m in metrics:
            grouped[(r["cell"], r["variant"], m)][int(r[step])].append(_number(r[m]))
    figure, axes = plt.subplots(
        len(cells),
        len(metrics),
        figsize=(6 * len(metrics), 3.2 * len(cells)),
        squeeze=False,
        sharex=True,
    )
    replicated = capped = False
    for i, cell in enumerate(cells):
        for j, m in enumerate(metrics):
            ax = axes[i][j]
            ends = [_number(r[m]) for r in rows if r["cell"] == cell]
            top = _ceiling(ends)
            for k, variant in enumerate(variants):
                by_round = grouped.get((cell, variant, m))
                if not by_round:
                    continue
                x = np.array(sorted(by_round))
                values = [np.array(by_round[t]) for t in x]
                with np.errstate(invalid="ignore"), _quiet():
                    mean = np.array([np.nanmean(v) for v in values])
                    sd = np.array([np.nanstd(v) if len(v) > 1 else 0.0 for v in values])
                ax.plot(x, mean, color=colour(k), lw=1.4, label=variant)
                if any(len(v) > 1 for v in values):
                    replicated = True
                    ax.fill_between(x, mean - sd, mean + sd, color=colour(k), alpha=0.15, lw=0)
            ax.set_yscale("log")
            if top is not None:
                low = min(
                    (
                        float(np.nanmin(line.get_ydata()))
                        for line in ax.get_lines()
                        if np.isfinite(line.get_ydata()).any()
                    ),
                    default=top / 1e4,
                )
                ax.set_ylim(max(low, top / 1e6) / 1.5, top)
                capped = True
            ax.set_title(f"{cell}: {_label(m, study)}")
            if i == len(cells) - 1:
                ax.set_xlabel("iteration (updates done)" if step == "iteration" else "round")
            ax.set_ylabel("W2 (parameter units)" if m.startswith("w2") else m)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(
        handles,
        labels,
        loc="upper center",
        ncol=min(len(variants), 6),
        bbox_to_anchor=(0.5, 1.0),
        frameon=False,
    )
    figure.tight_layout(rect=(0, 0, 1, 1 - 0.12 / len(cells)))
    caption = (
        "Each cell's metrics at every round, one line per variant (curves.csv; W2 in the "
        "parameter's units, log scale)."
        + (" Shaded: ±1 sd over the replicates (seeds) of a cell." if replicated else "")
        + (
            " A curve that leaves the top of a panel blew up (its values are in curves.csv);"
            " identical curves (e.g. two variants that agree without faults) overlap."
            if capped
            else ""
        )
    )
    return data_uri(figure, "study-curves"), caption


class _quiet:
    """numpy's "mean of empty slice" for a round no replicate reached, silenced."""

    def __enter__(self):
        import warnings

        self._catch = warnings.catch_warnings()
        self._catch.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)


def _against_x(rows: list[dict[str, str]], study: dict):
    plt = pyplot()
    xs = {c.get("label"): c.get("x") for c in study.get("cells") or []}
    if plt is None or not rows or not xs:
        return None
    if not all(isinstance(v, (int, float)) for v in xs.values()):
        return None
    x_label = study.get("x_label") or "x"
    metrics = [m for m in ("w2_average", "w2_agent", "consensus_error") if m in rows[0]]
    figure, axes = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 4), squeeze=False)
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    for ax, m in zip(axes[0], metrics, strict=True):
        finite = [_number(r[m]) for r in rows]
        ceiling = _ceiling(finite)
        top = ceiling or max((v for v in finite if np.isfinite(v)), default=1.0)
        for k, variant in enumerate(variants):
            points = defaultdict(list)
            for r in rows:
                if r["variant"] == variant and r["cell"] in xs:
                    points[float(xs[r["cell"]])].append(_number(r[m]))
            x = np.array(sorted(points))
            with np.errstate(invalid="ignore"), _quiet():
                mean = np.array([np.nanmean(points[v]) for v in x])
                sd = np.array([np.nanstd(points[v]) if len(points[v]) > 1 else 0 for v in x])
            shown = np.where(mean > top, top, mean)
            ax.errorbar(
                x,
                shown,
                yerr=np.where(mean > top, 0, sd),
                marker="o",
                color=colour(k),
                capsize=3,
                label=variant,
            )
            beyond = x[mean > top]
            if beyond.size:
                ax.plot(beyond, np.full(beyond.size, top), "^", color=colour(k), ms=11)
            missing = x[~np.isfinite(mean)]
            if missing.size:
                ax.plot(missing, np.full(missing.size, top), "x", color=colour(k), ms=11, mew=2)
        ax.set_yscale("log")
        ax.set_xlabel(x_label)
        ax.set_ylabel(f"final {_label(m, study)}")
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False)
    figure.tight_layout()
    caption = (
        f"Final figures against {x_label} (table.csv); ✕ at the top marks a variant "
        "that diverged there (no finite figure), ▲ one beyond the axis (1000 × the median). "
        "Error bars: ±1 sd over replicates, where a cell has "
        "several."
    )
    return data_uri(figure, "study-against-x"), caption


def write_study_report(folder: Path) -> Path:
    folder = Path(folder)
    text, study = _study_file(folder / "study.yaml")
    table_rows = _rows(folder / "table.csv")
    run_rows = _rows(folder / "seeds.csv") or table_rows  # one row per run, where written
    curve_rows = _rows(folder / "curves.csv")
    plots = pyplot() is not None
    runs = [
        f"<li><code>{html.escape(str(p.parent.relative_to(folder)))}</code></li>"
        for p in sorted(folder.rglob("metrics.json"))
        if p.parent != folder
    ]
    no_plots = '<p class="note">Figures need matplotlib (starling-mcmc[plots]).</p>'
    curves = figure_html(_curves_figure(curve_rows, study), "curves") if plots else no_plots
    final = (
        table(
            [_label(column, study) for column in table_rows[0]],
            [[_cell(value) for value in r.values()] for r in table_rows],
            "numbers",
        )
        if table_rows
        else ""
    )
    listing = (
        "<p>Each run's results folder; <code>starling report FOLDER</code> writes its own "
        "report (per-node posteriors, topology, faults).</p><ul>" + "".join(runs) + "</ul>"
        if runs
        else ""
    )
    paired_rows = _rows(folder / "paired.csv")
    paired = (
        table(list(paired_rows[0]), [list(r.values()) for r in paired_rows], "numbers")
        if paired_rows
        else ""
    )
    study_text = html.escape(text)
    sections = [
        Section("Every variant in every cell", _png(folder / "bars.png")),
        Section("Against the cells' setting", figure_html(_against_x(run_rows, study), "summary")),
        Section("Convergence in every cell", curves),
        Section("Final figures", final),
        Section(PAIRED, paired),
        Section("Runs", listing),
        Section("Study file", f"<pre>{study_text}</pre>"),
    ]
    meta = html.escape(
        f"{len(study.get('cells') or [])} cells × {len(study.get('variants') or [])} variants · "
        f"{folder.resolve()}"
    )
    title = f"Starling study: {study.get('study', folder.name)}"
    description = study.get("description") or ""
    if description:
        sections.insert(0, Section("What it compares", f"<p>{html.escape(description)}</p>"))
    out = folder / "report.html"
    out.write_text(page(title, None, meta, sections, study_verdict_block(run_rows)))
    return out


def _png(path: Path) -> str:
    """``bars.png`` embedded (the study's drawing,
    :func:`~starling.orchestrator.results.study_plots.plot_bars`), or nothing."""
    if not path.is_file():
        return ""
    uri = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")
    caption = (
        "Each cell's first figure of the study's bars, one bar per variant: mean ± 95 % "
        "interval over the seeds; hatched where not every seed converged."
    )
    return figure_html((uri, caption), path.stem)
