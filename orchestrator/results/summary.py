"""``summary.txt``: a run's short account for people: its verdict first (converged, not
converged or diverged, and why: :mod:`starling.orchestrator.evaluation.verdict`), then its
status, then its figures, each with its standard error where it has one.

:func:`summary_table` is what ``run`` and ``simulate`` print at the end and write beside
``metrics.json``; :func:`scoring_lines` are its lines for the figures beyond W2: predictive
metrics, transport distances and ESS / R-hat (what
:mod:`starling.orchestrator.evaluation.scoring` put in ``metrics.json``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from starling.orchestrator.evaluation.verdict import verdict_line

__all__ = ["SUMMARY_FIELDS", "scoring_lines", "summary_figures", "summary_table"]

SUMMARY_FIELDS = (
    "verdict",
    "status",
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
    "efficiency",
    "links",
    "interrupted",
    "interrupted_during",
    "not_collected",
    "error",
    "account",
)
"""What :func:`summary_figures` carries, in this order (the verdict first, as in
``summary.txt`` and ``metrics.json``), where the metrics have it."""


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


def _with_se(figures: Mapping, key: str) -> str:
    """``figures[key] ± figures[key_se]`` in 17 characters (the error blank without one)."""
    se = figures.get(f"{key}_se")
    return f"{_num(figures.get(key), '8.4f')}" + (f" ± {se:.4f}" if se is not None else " " * 9)


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
            f"{'node':>10}  {'Sinkhorn ± se':>17}  {'sliced W2 ± se':>17}  "
            f"(Sinkhorn reg {distances.get('reg')}; {distances.get('points')} points, mean of "
            f"{distances.get('repeats', 1)} subsamples; floor: reference vs itself)"
        )
        rows = [("average", distances.get("average")), *distances["per_node"].items()]
        if distances.get("reference_floor"):
            rows.append(("floor", distances["reference_floor"]))
        lines += _node_rows(
            rows,
            lambda s: f"{_with_se(s, 'sinkhorn')}  {_with_se(s, 'sliced_w2')}",
        )
    diagnostics = metrics.get("diagnostics")
    if diagnostics and diagnostics.get("per_node"):
        lines.append(
            "MCMC diagnostics (rank-normalised, Vehtari et al. 2021) over rounds "
            f"{diagnostics.get('draws_from')}..{diagnostics.get('rounds', 1) - 1} "
            "(chains × draws), worst coordinate"
        )
        lines.append(f"{'node':>10}  {'ESS bulk':>8}  {'ESS tail':>8}  {'R-hat':>8}  verdict")
        judged = (metrics.get("verdict") or {}).get("per_node") or {}
        for name, s in diagnostics["per_node"].items():
            said = (judged.get(name) or {}).get("verdict", "")
            if s is None:
                lines.append(f"{name:>10}  {'-':>8}  {'-':>8}  {'-':>8}  {said}")
                continue
            lines.append(
                f"{name:>10}  {_num(s.get('ess_bulk_min'), '8.1f')}  "
                f"{_num(s.get('ess_tail_min'), '8.1f')}  {_num(s.get('rhat_max'), '8.4f')}  {said}"
            )
    return lines


def _cell(value, se=None) -> str:
    if value is None:
        return f"{'diverged':>8}"
    return f"{value:8.4f}" + (f" ± {se:.4f}" if se is not None else " " * 9)


def _averaged(metrics: Mapping) -> str:
    """`` of nodes 1, 3 only, ...`` when the network average and the consensus leave out a
    node that stopped before the others (``averaged_nodes``), else nothing."""
    nodes = metrics.get("averaged_nodes")
    if not nodes:
        return ""
    which = f"node {nodes[0]}" if len(nodes) == 1 else "nodes " + ", ".join(map(str, nodes))
    return f" of {which} only, which recorded every round"


def _verdict_lines(metrics: Mapping) -> list[str]:
    """The verdict's line, the other reasons (a line each), and what it was judged by."""
    verdict = metrics.get("verdict")
    line = verdict_line(verdict, count_others=False)
    if line is None:
        return []
    lines = [line]
    for reason in (verdict or {}).get("reasons", [])[1:]:
        lines.append(f"  {reason}")
    criteria = (verdict or {}).get("criteria") or {}
    if criteria:
        window = criteria.get("window") or ["?", "?"]
        critical = (criteria.get("stationarity") or {}).get("critical_t")
        scale = (metrics.get("w2") or {}).get("scale")
        checks = [f"bulk and tail ESS ≥ {criteria.get('ess_min', 0):.0f}"]
        if (metrics.get("chains") or 0) > 1:  # one chain has no R-hat to check
            checks.insert(0, f"R-hat ≤ {criteria.get('rhat_max', 0):.3f}")
        if criteria.get("distinct_chains"):
            checks.append("no chain a copy of another")
        if critical is not None:
            checks.append(f"no drift between the window's halves beyond t = {critical:.1f}")
        if scale and "w2_over_scale_max" in criteria:
            checks.append(f"W2 < sqrt(tr Σ) = {scale:.4f}")
        lines.append(f"  (judged on rounds {window[0]}..{window[1]}: {', '.join(checks)})")
    return lines


LISTED_STDS = 10
"""Up to this many coordinates the summary lists the posterior's std of each; beyond, their
range (every one is in ``metrics.json``)."""


def _posterior_std_line(std: list) -> str:
    """The posterior's std per coordinate, or their range when there are more than
    :data:`LISTED_STDS`. A coordinate whose std left the floats (data near 1e308) is stored
    as None: "not finite"."""
    if len(std) <= LISTED_STDS:
        shown = ("not finite" if s is None else f"{s:.4f}" for s in std)
        return "posterior std per coordinate: " + ", ".join(shown)
    finite = [s for s in std if s is not None]
    spread = f"from {min(finite):.4f} to {max(finite):.4f}" if finite else "none finite"
    missing = len(std) - len(finite)
    return (
        f"posterior std over {len(std)} coordinates: {spread}"
        + (f", {missing} not finite" if finite and missing else "")
        + " (each in metrics.json, posterior.std)"
    )


def summary_table(metrics: Mapping) -> str:
    """A short human-readable account of a run; the first line is its verdict (when it
    had samples to judge), then its status."""
    lines = [
        *_verdict_lines(metrics),
        f"status: {metrics.get('status', 'complete')}",
        f"experiment {metrics.get('experiment')}: {metrics.get('algorithm')}, "
        f"{metrics.get('nodes')} nodes, {metrics.get('rounds')} rounds, "
        f"{metrics.get('chains')} chains",
    ]
    if metrics.get("rounds_evaluated") is not None:
        lines.append(
            f"evaluated over the first {metrics['rounds_evaluated']} rounds, which every node "
            "the interrupt stopped recorded (samples/ holds every round)"
        )
    w2 = metrics.get("w2")
    if w2:
        posterior = metrics.get("posterior", {})
        std = posterior.get("std")
        if std:
            lines.append(_posterior_std_line(std))
        lines.append(f"{'node':>10}  {'W2 ± se':>17}  samples  verdict")
        counts = metrics.get("samples_per_node", {})
        errors = w2.get("se") or {}
        judged = (metrics.get("verdict") or {}).get("per_node") or {}
        for node, value in w2["per_node"].items():
            said = (judged.get(node) or {}).get("verdict", "")
            lines.append(
                f"{node:>10}  {_cell(value, errors.get(node))}  {counts.get(node, ''):>7}  {said}"
            )
        for node in (n for n, count in counts.items() if not count and n not in w2["per_node"]):
            lines.append(f"{node:>10}  {'-':>8}  0")  # no sample to score
        if w2.get("average") is not None or metrics.get("diverged"):
            lines.append(
                f"{'average':>10}  {_cell(w2.get('average'), w2.get('average_se'))}  "
                f"(W2 of the network-average iterate{_averaged(metrics)})"
            )
        floor = w2.get("floor")
        if floor:
            lines.append(f"W2: {w2.get('estimator', 'Gaussian fit')}")
            lines.append(
                f"  ± its bootstrap se over chains; floor: {floor['points']} exact posterior "
                f"draws score {floor['mean']:.4f} ± {floor['sd']:.4f} (the estimator's bias)"
            )
    lines.extend(scoring_lines(metrics))
    if metrics.get("consensus_error") is not None:
        lines.append(
            f"consensus error E|x_i - mean|^2{_averaged(metrics)}: {metrics['consensus_error']:.4g}"
        )
    efficiency = metrics.get("efficiency")
    if efficiency:
        per = [
            f"{efficiency[k]:.4g} per {unit}"
            for k, unit in (
                ("ess_per_second", "second"),
                ("ess_per_message", "message"),
                ("ess_per_kilobyte", "kB sent"),
            )
            if efficiency.get(k) is not None
        ]
        lines.append(
            f"ESS {efficiency['ess_bulk']:.0f} (median over nodes of the worst coordinate) for "
            f"{efficiency['seconds']:.2f} s, {efficiency['messages']} messages, "
            f"{efficiency['bytes'] / 1e3:.1f} kB: " + ", ".join(per)
        )
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
