"""The results folder, a contract other tools read.

<out>/metrics.json           verdict (converged, not converged, diverged, with its reasons
                             and criteria: :mod:`starling.orchestrator.evaluation.verdict`),
                             status (complete, partial, failed, interrupted), algorithm,
                             rounds, w2 {average, per_node, ...}, predictive, distances,
                             diagnostics (:mod:`starling.orchestrator.evaluation.scoring`), run
                             account:
                             ``account`` (lines), ``faults`` (scheduled and live, node
                             events), ``links`` ("A->B" counters), ``link_stats`` (every
                             node's final outbound/inbound counters), ``program_metrics``,
                             ``refused`` (what each node refused before serving it),
                             ``traffic`` (seconds, messages, payload bytes) and
                             ``efficiency`` (ESS per second, message and kilobyte:
                             :mod:`starling.orchestrator.evaluation.efficiency`)
<out>/samples/node-<id>.npz  ``samples`` (rounds, chains, d) and ``rounds`` (indices)
<out>/experiment.yaml        the experiment exactly as it was run
<out>/w2_curve.csv           W2 per scored round (evaluation.w2_schedule: every round, or
                             log-spaced plus the final window) for the average iterate and
                             every node
<out>/predictive_curve.csv   (classifiers with evaluation.test) accuracy, AUC, log-loss per
                             scored round, for the average iterate and every node
<out>/distance_curve.csv     (reference samples) Sinkhorn and sliced W2 per scored round
<out>/hpd_curve.csv          (evaluation.hpd) [003]'s HPD error as sampling goes on: at
                             each scored round, as if the run had stopped there
<out>/summary.txt            ``verdict: ...`` (when there were samples), ``status: ...``, then
                             the table printed at the end of the run
<out>/manifest.json          every file the run wrote (:mod:`starling.orchestrator.results.folder`)
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import yaml

from starling.node.spec import DataSpec
from starling.orchestrator.core import phases
from starling.orchestrator.evaluation.efficiency import efficiency_section
from starling.orchestrator.evaluation.evaluate import Evaluation, evaluate
from starling.orchestrator.planning.plan import EvaluationPlan
from starling.orchestrator.results.account import Account, account_divergence
from starling.orchestrator.results.link_books import link_account
from starling.orchestrator.results.summary import summary_figures, summary_table

T = TypeVar("T")

__all__ = [
    "close_run",
    "default_out_dir",
    "run_status",
    "write_failure",
    "write_results",
]


def default_out_dir(name: str) -> Path:
    """The parent of a run's default folder (``results/NAME/<UTC time>``, see
    :mod:`starling.orchestrator.results.folder`)."""
    return Path("results") / name


def run_status(
    rounds: int,
    samples: Mapping[str, np.ndarray],
    interrupted: bool = False,
    failed: bool = False,
    incomplete: bool = False,
    expected: Sequence[str] = (),
) -> str:
    """How a run ended: ``interrupted`` (by the user), ``failed`` (a node failed, or no sample
    at all), ``partial`` (a node stored fewer than ``rounds`` samples — a node of
    ``expected``, the nodes that record samples, with none at all included — or was not
    finished at the end), else ``complete``."""
    if interrupted:
        return "interrupted"
    if failed or not samples:
        return "failed"
    if incomplete or any(len(values) < rounds for values in samples.values()):
        return "partial"
    if any(node not in samples for node in expected):
        return "partial"
    return "complete"


def write_failure(out: Path, experiment: str, status: str, error: str) -> None:
    """``metrics.json`` and ``summary.txt`` of a run that ended before it had results
    (unless the run wrote its own)."""
    out = Path(out)
    if (out / "metrics.json").exists():
        return
    metrics = {"status": status, "experiment": experiment, "error": error}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    (out / "summary.txt").write_text(f"status: {status} — {error}\n")


def write_results(
    out: Path,
    raw_experiment: Mapping,
    samples: Mapping[str, np.ndarray],
    sample_rounds: Mapping[str, np.ndarray],
    evaluation: Evaluation,
    extra: Mapping | None = None,
) -> Path:
    out = Path(out)
    (out / "samples").mkdir(parents=True, exist_ok=True)
    for node, values in samples.items():
        np.savez(out / "samples" / f"node-{node}.npz", samples=values, rounds=sample_rounds[node])
    (out / "experiment.yaml").write_text(yaml.safe_dump(dict(raw_experiment), sort_keys=False))
    merged = {**evaluation.metrics, **dict(extra or {})}
    for first in ("status", "verdict"):  # first, where a reader looks: verdict, then status
        if first in merged:
            merged = {first: merged.pop(first), **merged}
    metrics = _strict(merged)
    (out / "metrics.json").write_text(
        json.dumps(metrics, indent=2, default=_jsonable, allow_nan=False) + "\n"
    )
    if evaluation.curves:
        names = list(evaluation.curves)
        length = max(len(c) for c in evaluation.curves.values())
        lines = ["round," + ",".join("average" if n == "average" else f"node-{n}" for n in names)]
        scored = evaluation.curve_rounds  # the rows: the rounds scored (every one if None)
        for k in range(length) if scored is None else (int(t) for t in scored):
            cells = [
                csv_cell(evaluation.curves[n][k]) if k < len(evaluation.curves[n]) else ""
                for n in names
            ]
            lines.append(f"{k}," + ",".join(cells))
        (out / "w2_curve.csv").write_text("\n".join(lines) + "\n")
    for name, rows in evaluation.tables.items():
        (out / f"{name}.csv").write_text(table_csv(rows))
    (out / "summary.txt").write_text(summary_table(metrics) + "\n")
    return out


def csv_cell(value: Any, spec: str = ".6g") -> str:
    """One cell of any CSV file Starling writes: a number in ``spec`` (six significant
    digits unless told); a figure that does not exist (None, NaN or an infinity: a round a
    node had diverged at or had not recorded, an AUC with one class present) empty. Before,
    a diverged round read ``nan`` in two files and empty in the others."""
    if value is None:
        return ""
    if isinstance(value, float | np.floating):
        return format(float(value), spec) if math.isfinite(value) else ""
    return str(value)


def table_csv(rows: Sequence[Mapping]) -> str:
    """Rows of one curve as CSV: a header of every key in first-seen order; each cell
    :func:`csv_cell`."""
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    lines = [",".join(keys)]
    for row in rows:
        cells = [row.get(k) for k in keys]
        lines.append(",".join(csv_cell(v) for v in cells))
    return "\n".join(lines) + "\n"


def _strict(value):
    """The same structure with every NaN or infinity as None: metrics.json is strict JSON
    (a program's own figure can be NaN after it diverged)."""
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.ndarray):
        return _strict(value.tolist())
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    return value


def _jsonable(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def in_node_order(by_node: Mapping[str, T], node_ids: Sequence[str]) -> dict[str, T]:
    """``by_node`` reordered as ``node_ids`` lists the nodes (any others last, by id)."""
    rank = {node: k for k, node in enumerate(node_ids)}
    return dict(sorted(by_node.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0])))


def close_run(
    plan: EvaluationPlan,
    out_dir: Path,
    samples: dict[str, np.ndarray],
    rounds: dict[str, np.ndarray],
    account: Account,
    links: dict,
    timing: str,
    extra: dict,
    say: Callable[[str], None] | None,
    node_data: Mapping[str, DataSpec] | None = None,
    stopped_together: Collection[str] = (),
) -> dict:
    """Evaluate, close the account (links, divergence, timing), write the results folder
    and print the summary (unless ``say`` is None); returns the metrics written. ``run`` and
    ``simulate`` both end here, so their folders have the same keys. ``node_data``: what
    nodes holding their own data reported; ``stopped_together``: the nodes an interrupt
    stopped at once (both: see
    :func:`starling.orchestrator.evaluation.evaluate.evaluate`)."""
    # In the experiment's node order, whatever order the nodes were collected in: means over
    # nodes are float sums, and ``run`` must score to the last bit what ``simulate`` scores.
    samples = in_node_order(samples, plan.node_ids)
    rounds = in_node_order(rounds, plan.node_ids)
    phases.enter("evaluating")
    evaluation = evaluate(plan, samples, node_data, stopped_together)
    for line in link_account(links):
        account.plain(line)
    account_divergence(evaluation.metrics, account)
    account.plain(timing)
    extra = {"account": account.lines, "faults": account.section(), "links": links, **extra}
    efficiency = efficiency_section(evaluation.metrics.get("verdict"), extra.get("traffic"))
    if efficiency is not None:
        extra["efficiency"] = efficiency
    phases.enter("writing results")
    write_results(out_dir, plan.source, samples, rounds, evaluation, extra)
    metrics = {**evaluation.metrics, **extra}
    if say is not None:
        if getattr(say, "takes_fields", False):
            # --log-format json: the summary's line carries its figures and the verdict as
            # fields, and says its first line, which is the verdict (summary.txt's first).
            with_fields: Any = say
            with_fields(
                summary_table(metrics),
                event="summary",
                figures=summary_figures(metrics),
                verdict=(metrics.get("verdict") or {}).get("run"),
            )
        else:
            say(summary_table(metrics))
        say(f"results written to {out_dir}")
    return metrics
