"""``summary.txt``: a run's short account for people, status first, then its figures.

:func:`summary_table` is what ``run`` and ``simulate`` print at the end and write beside
``metrics.json``; :func:`scoring_lines` are its lines for the figures beyond W2: predictive
metrics, transport distances and ESS / R-hat (what
:mod:`starling.orchestrator.evaluation.scoring` put in ``metrics.json``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

__all__ = ["SUMMARY_FIELDS", "scoring_lines", "summary_figures", "summary_table"]

SUMMARY_FIELDS = (
    "status",
    "verdict",
    "experiment",
    "algorithm",
    "backend",
    "nodes",
    "rounds",
    "chains",
    "samples_per_node",
    "w2",
    "posterior",
    "consensus_error",
    "diverged",
    "predictive",
    "distances",
    "diagnostics",
    "links",
    "interrupted",
    "interrupted_during",
    "not_collected",
    "error",
    "account",
)
"""What :func:`summary_figures` carries, in this order, where the metrics have it."""


def summary_figures(metrics: Mapping) -> dict:
    """The summary as fields, for ``--log-format json``: the figures the table shows (and
    the account's lines), each under its ``metrics.json`` name, instead of the table as one
    string a program would have to parse back."""
    return {name: metrics[name] for name in SUMMARY_FIELDS if name in metrics}


def _num(value, spec: str = ".4f") -> str:
    """``value`` formatted, or a dash as wide (an AUC of ten classes, a diverged node)."""
    if value is None:
        width = spec.split(".")[0]
        return format("-", f">{width}") if width else "-"
    return format(value, spec)


def _node_rows(rows: list, cells: Callable[[Mapping], str]) -> list[str]:
    """One line per (name, figures) row: ``cells(figures)`` after the name; a missing
    network average is left out, a missing node's figures read ``diverged``."""
    lines = []
    for name, figures in rows:
        if figures is None:
            if name != "average":
                lines.append(f"{name:>10}  diverged")
            continue
        lines.append(f"{name:>10}  {cells(figures)}")
    return lines


def scoring_lines(metrics: Mapping) -> list[str]:
    lines: list[str] = []
    predictive = metrics.get("predictive")
    if predictive:
        test = predictive.get("test", {})
        where = test.get("path") or f"split {test.get('split')} seed {test.get('seed')}"
        lines.append(
            f"held-out {test.get('rows')} rows ({where}), last {predictive.get('window')} round(s)"
        )
        lines.append(
            f"{'node':>10}  {'accuracy':>8}  {'AUC':>8}  {'log-loss':>8}  "
            f"{'per-sample accuracy':>8}"
        )
        rows = [("average", predictive.get("average")), *predictive["per_node"].items()]
        lines += _node_rows(
            rows,
            lambda s: (
                f"{_num(s.get('predictive_accuracy'), '8.4f')}  "
                f"{_num(s.get('predictive_auc'), '8.4f')}  "
                f"{_num(s.get('predictive_log_loss'), '8.4f')}  "
                f"{_num(s.get('sample_accuracy'), '8.4f')}"
            ),
        )
    distances = metrics.get("distances")
    if distances:
        ref = distances.get("reference", {})
        lines.append(
            f"distances to {ref.get('size')} reference samples ({ref.get('method')}), "
            f"last {distances.get('window')} round(s)"
        )
        lines.append(
            f"{'node':>10}  {'Sinkhorn':>8}  {'sliced W2':>9}  "
            f"(Sinkhorn reg {distances.get('reg')}; floor: reference vs itself)"
        )
        rows = [("average", distances.get("average")), *distances["per_node"].items()]
        if distances.get("reference_floor"):
            rows.append(("floor", distances["reference_floor"]))
        lines += _node_rows(
            rows, lambda s: f"{_num(s.get('sinkhorn'), '8.4f')}  {_num(s.get('sliced_w2'), '9.4f')}"
        )
    diagnostics = metrics.get("diagnostics")
    if diagnostics and diagnostics.get("per_node"):
        lines.append(
            f"ArviZ diagnostics over rounds {diagnostics.get('draws_from')}.."
            f"{diagnostics.get('rounds', 1) - 1} (chains × draws), worst coordinate"
        )
        lines.append(f"{'node':>10}  {'ESS bulk':>8}  {'ESS tail':>8}  {'R-hat':>8}")
        for name, s in diagnostics["per_node"].items():
            if s is None:
                lines.append(f"{name:>10}  -")
                continue
            lines.append(
                f"{name:>10}  {_num(s.get('ess_bulk_min'), '8.1f')}  "
                f"{_num(s.get('ess_tail_min'), '8.1f')}  {_num(s.get('rhat_max'), '8.4f')}"
            )
    return lines


def _cell(value) -> str:
    return f"{'diverged':>8}" if value is None else f"{value:8.4f}"


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
