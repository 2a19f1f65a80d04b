"""The results folder, a contract other tools read.

<out>/metrics.json           status (complete, partial, failed, interrupted), algorithm,
                             rounds, w2 {average, per_node, ...}, predictive, distances,
                             diagnostics (:mod:`starling.orchestrator.scoring`), run account:
                             ``account`` (lines), ``faults`` (scheduled and live, node
                             events), ``links`` ("A->B" counters), ``link_stats`` (every
                             node's final outbound/inbound counters), ``program_metrics``
<out>/samples/node-<id>.npz  ``samples`` (rounds, chains, d) and ``rounds`` (indices)
<out>/experiment.yaml        the experiment exactly as it was run
<out>/w2_curve.csv           W2 per round for the average iterate and every node
<out>/predictive_curve.csv   (classifiers with evaluation.test) accuracy, AUC, log-loss per
                             scored round, for the average iterate and every node
<out>/distance_curve.csv     (reference samples) Sinkhorn and sliced W2 per scored round
<out>/hpd_curve.csv          (evaluation.hpd) [003]'s HPD error as sampling goes on: at
                             each scored round, as if the run had stopped there
<out>/summary.txt            ``status: ...`` then the table printed at the end of the run
<out>/manifest.json          every file the run wrote (:mod:`starling.orchestrator.outdir`)
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
import yaml

from starling.node.spec import DataSpec
from starling.orchestrator import phases
from starling.orchestrator.account import Account, account_divergence
from starling.orchestrator.evaluation import Evaluation, evaluate
from starling.orchestrator.experiment import Experiment
from starling.orchestrator.summary_lines import scoring_lines

T = TypeVar("T")

__all__ = [
    "LINK_COUNTERS",
    "close_run",
    "default_out_dir",
    "link_account",
    "link_summary",
    "run_status",
    "summary_table",
    "write_failure",
    "write_results",
]

LINK_COUNTERS = (
    "sent",
    "delivered",
    "withheld",
    "dropped",
    "late",
    "rejected",
    "screened",
    "send_errors",
    "overruns",
)
"""Per directed link: ``sent`` on the wire, ``delivered`` in time for its round, ``withheld``
by an emulated fault (scheduled, or live cut/drop), ``dropped`` because the receiver could
not be reached, ``late`` (arrived after the receiver's deadline), ``rejected`` (malformed),
``screened`` (of those rejected, refused for a value beyond the receiver's screening
bound), ``send_errors`` (stream failures), ``overruns`` (an asynchronous receiver waited out its
deadline for a fresh enough message from this sender)."""


def link_summary(link_stats: Mapping[str, Mapping[str, Mapping[str, Mapping]]]) -> dict:
    """``"A->B"`` -> counters, from every node's final ``outbound`` / ``inbound`` books.

    The sender knows what it sent, withheld and dropped; the receiver what it got in time,
    late or malformed.
    """
    links: dict[str, dict[str, int]] = {}

    def entry(key: str) -> dict[str, int]:
        return links.setdefault(key, dict.fromkeys(LINK_COUNTERS, 0))

    for node, books in link_stats.items():
        for peer, c in (books.get("outbound") or {}).items():
            e = entry(f"{node}->{peer}")
            for name in ("sent", "withheld", "dropped", "send_errors"):
                e[name] += int(c.get(name, 0))
        for peer, c in (books.get("inbound") or {}).items():
            e = entry(f"{peer}->{node}")
            e["delivered"] += int(c.get("received", 0))
            e["late"] += int(c.get("late", 0))
            e["rejected"] += int(c.get("rejected", 0))
            e["screened"] += int(c.get("screened", 0))
            e["overruns"] += int(c.get("overruns", 0))
    return dict(sorted(links.items()))


def link_account(links: Mapping[str, Mapping[str, int]]) -> list[str]:
    """Lines for the account: every link that lost something, or one line saying none did."""
    lossy = [
        (key, c)
        for key, c in links.items()
        if any(
            c.get(k, 0)
            for k in ("withheld", "dropped", "late", "rejected", "send_errors", "overruns")
        )
    ]
    if not lossy:
        return [f"links: all {len(links)} links delivered every message in time"] if links else []
    lines = [
        f"links: {len(lossy)} of {len(links)} lost messages (sent/delivered/withheld/dropped/late):"
    ]
    for key, c in lossy:
        extra = "".join(
            f" {name} {c[name]}"
            for name in ("rejected", "screened", "send_errors", "overruns")
            if c.get(name)
        )
        lines.append(
            f"  {key.replace('->', '→')}: {c.get('sent', 0)}/{c.get('delivered', 0)}/"
            f"{c.get('withheld', 0)}/{c.get('dropped', 0)}/{c.get('late', 0)}{extra}"
        )
    return lines


def default_out_dir(name: str) -> Path:
    """The parent of a run's default folder (``results/NAME/<UTC time>``, see
    :mod:`starling.orchestrator.outdir`)."""
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
    if "status" in merged:  # first, where a reader looks
        merged = {"status": merged.pop("status"), **merged}
    metrics = _strict(merged)
    (out / "metrics.json").write_text(
        json.dumps(metrics, indent=2, default=_jsonable, allow_nan=False) + "\n"
    )
    if evaluation.curves:
        names = list(evaluation.curves)
        length = max(len(c) for c in evaluation.curves.values())
        lines = ["round," + ",".join("average" if n == "average" else f"node-{n}" for n in names)]
        for k in range(length):
            cells = [
                f"{evaluation.curves[n][k]:.6g}" if k < len(evaluation.curves[n]) else ""
                for n in names
            ]
            lines.append(f"{k}," + ",".join(cells))
        (out / "w2_curve.csv").write_text("\n".join(lines) + "\n")
    for name, rows in evaluation.tables.items():
        (out / f"{name}.csv").write_text(table_csv(rows))
    (out / "summary.txt").write_text(summary_table(metrics) + "\n")
    return out


def table_csv(rows: Sequence[Mapping]) -> str:
    """Rows of one curve as CSV: a header of every key in first-seen order; numbers to six
    significant digits, a missing figure (an AUC with one class present) empty."""
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    lines = [",".join(keys)]
    for row in rows:
        cells = [row.get(k) for k in keys]
        lines.append(
            ",".join(
                "" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v) for v in cells
            )
        )
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


def _cell(value) -> str:
    return f"{'diverged':>8}" if value is None else f"{value:8.4f}"


def _jsonable(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def summary_table(metrics: Mapping) -> str:
    """A short human-readable account of a run; the first line is its status."""
    lines = [
        f"status: {metrics.get('status', 'complete')}",
        f"experiment {metrics.get('experiment')}: {metrics.get('algorithm')}, "
        f"{metrics.get('nodes')} nodes, {metrics.get('rounds')} rounds, "
        f"{metrics.get('chains')} chains",
    ]
    w2 = metrics.get("w2")
    if w2:
        posterior = metrics.get("posterior", {})
        std = posterior.get("std")
        if std:
            # A coordinate whose std left the floats (data near 1e308) is stored as None.
            shown = ("not finite" if s is None else f"{s:.4f}" for s in std)
            lines.append("posterior std per coordinate: " + ", ".join(shown))
        lines.append(f"{'node':>10}  {'W2':>8}  samples")
        counts = metrics.get("samples_per_node", {})
        for node, value in w2["per_node"].items():
            lines.append(f"{node:>10}  {_cell(value)}  {counts.get(node, '')}")
        for node in (n for n, count in counts.items() if not count and n not in w2["per_node"]):
            lines.append(f"{node:>10}  {'-':>8}  0")  # no sample to score
        if w2.get("average") is not None or metrics.get("diverged"):
            lines.append(
                f"{'average':>10}  {_cell(w2.get('average'))}  (W2 of the network-average iterate)"
            )
    lines.extend(scoring_lines(metrics))
    if metrics.get("consensus_error") is not None:
        lines.append(f"consensus error E|x_i - mean|^2: {metrics['consensus_error']:.4g}")
    diverged = metrics.get("diverged")
    if diverged:
        lines.append(
            "diverged: " + ", ".join(f"node {n} from round {r}" for n, r in diverged.items())
        )
    account = metrics.get("account")
    if account:
        lines.append("what happened:")
        lines.extend(f"  {line}" for line in account)
    return "\n".join(lines)


def in_node_order(by_node: Mapping[str, T], node_ids: Sequence[str]) -> dict[str, T]:
    """``by_node`` reordered as ``node_ids`` lists the nodes (any others last, by id)."""
    rank = {node: k for k, node in enumerate(node_ids)}
    return dict(sorted(by_node.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0])))


def close_run(
    experiment: Experiment,
    out_dir: Path,
    samples: dict[str, np.ndarray],
    rounds: dict[str, np.ndarray],
    account: Account,
    links: dict,
    timing: str,
    extra: dict,
    say: Callable[[str], None] | None,
    node_data: Mapping[str, DataSpec] | None = None,
) -> dict:
    """Evaluate, close the account (links, divergence, timing), write the results folder
    and print the summary (unless ``say`` is None); returns the metrics written. ``run`` and
    ``simulate`` both end here, so their folders have the same keys. ``node_data``: what
    nodes holding their own data reported (see
    :func:`starling.orchestrator.evaluation.evaluate`)."""
    # In the experiment's node order, whatever order the nodes were collected in: means over
    # nodes are float sums, and ``run`` must score to the last bit what ``simulate`` scores.
    samples = in_node_order(samples, experiment.node_ids)
    rounds = in_node_order(rounds, experiment.node_ids)
    phases.enter("evaluating")
    evaluation = evaluate(experiment, samples, node_data)
    for line in link_account(links):
        account.plain(line)
    account_divergence(evaluation.metrics, account)
    account.plain(timing)
    extra = {"account": account.lines, "faults": account.section(), "links": links, **extra}
    phases.enter("writing results")
    write_results(out_dir, experiment.source, samples, rounds, evaluation, extra)
    metrics = {**evaluation.metrics, **extra}
    if say is not None:
        say(summary_table(metrics))
        say(f"results written to {out_dir}")
    return metrics
