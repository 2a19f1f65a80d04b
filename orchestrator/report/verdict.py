"""The first thing on a report: the verdict — can the samples be trusted?

The verdict itself is the evaluation's (:mod:`starling.orchestrator.evaluation.verdict`
writes it into ``metrics.json`` as ``verdict``: ``run`` is converged, not converged or
diverged, ``reasons`` why, ``per_node`` each node's); this module only shows it, in one box
coloured by it, with under it the run's own figures the verdict weighed (how the run ended,
R-hat and ESS at their worst, W2 against the posterior's scale, nodes that diverged). A
results folder written before verdicts existed has none: the box then shows those figures
alone and says it judges nothing. A study's box (:func:`study_verdict_block`) counts its
runs' verdicts from ``seeds.csv`` and names those that did not converge.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

__all__ = ["study_verdict_block", "verdict_block"]

RHAT_NOTE = 1.01
"""The R-hat Vehtari et al. (2021) ask of a chain before trusting it; said beside the
worst one, not used to judge, when the metrics hold no verdict (whose own limit, which grows
with the chains, is said instead)."""


def verdict_block(metrics: Mapping[str, Any]) -> str:
    """The HTML of the verdict box (``<section id="verdict">``), always present."""
    given = metrics.get("verdict")
    figures = _diagnostics(metrics)
    if given:  # written by the evaluation: shown as it is
        headline, lines = _given(given)
        body = (
            f"<h2>Verdict: {html.escape(headline)}</h2>"
            + _list(lines)
            + '<p class="note">The figures it weighed:</p>'
            + _list(figures)
        )
        return _box(body, headline)
    body = (
        "<h2>Verdict: not judged here; the convergence figures it rests on</h2>"
        + _list(figures)
        + '<p class="note">This run\'s results carry no verdict; the lines above are '
        "its own figures, the ones a verdict weighs.</p>"
    )
    return _box(body, "")


def study_verdict_block(rows: list[dict[str, str]]) -> str:
    """The study's box: how many of its runs converged (``seeds.csv``'s ``verdict``), and
    the first five that did not; empty when no run has a verdict."""
    said = [r.get("verdict") for r in rows if r.get("verdict")]
    if not said:
        return ""
    good = sum(1 for v in said if v == "converged")
    failing = [
        f"{r.get('cell')} / {r.get('variant')}"
        + (f", seed {r['seed_index']}" if r.get("seed_index") not in (None, "") else "")
        + f": {r.get('verdict')}"
        for r in rows
        if r.get("verdict") and r.get("verdict") != "converged"
    ]
    shown = failing[:5] + ([f"and {len(failing) - 5} more"] if len(failing) > 5 else [])
    headline = f"{good} of {len(said)} runs converged"
    body = f"<h2>Verdict: {html.escape(headline)}</h2>" + _list(shown)
    return _box(body, "converged" if good == len(said) else "not converged")


def _box(body: str, verdict: str) -> str:
    """The section, coloured by ``verdict`` (``verdict-converged``, ``verdict-not-converged``,
    ``verdict-diverged``) when it is one."""
    colour = f" verdict-{verdict.replace(' ', '-')}" if verdict in _VERDICTS else ""
    return f'<section id="verdict" class="verdict{colour}">{body}</section>'


_VERDICTS = ("converged", "not converged", "diverged")


def _given(verdict: Any) -> tuple[str, list[str]]:
    """The headline and the lines of a verdict: the evaluation's (``run``, ``reasons``), or
    an older or hand-written one (``summary``/``label`` and ``lines``), or a bare string."""
    if isinstance(verdict, Mapping):
        headline = (
            verdict.get("run")
            or verdict.get("summary")
            or verdict.get("label")
            or verdict.get("verdict")
        )
        lines = verdict.get("reasons") or verdict.get("lines") or []
        if not isinstance(lines, list):
            lines = [lines]
        return str(headline or "given"), [str(line) for line in lines]
    return str(verdict), []


def _list(lines: list[str]) -> str:
    if not lines:
        return ""
    return "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"


def _figure(per_node: Mapping[str, Any], name: str) -> dict[str, float]:
    """Node -> its figure ``name`` (a number), for the nodes that have one."""
    found: dict[str, float] = {}
    for node, figures in per_node.items():
        value = figures.get(name) if isinstance(figures, Mapping) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            found[str(node)] = float(value)
    return found


def _rhat_limit(verdict: Any) -> tuple[float, str]:
    """The R-hat to count nodes against and its words: the verdict's own limit
    (``criteria.rhat_max``) when the metrics hold one, else :data:`RHAT_NOTE`."""
    criteria = verdict.get("criteria") if isinstance(verdict, Mapping) else None
    limit = criteria.get("rhat_max") if isinstance(criteria, Mapping) else None
    if isinstance(limit, (int, float)) and not isinstance(limit, bool):
        return float(limit), f"the verdict's limit {limit:.3f}"
    return RHAT_NOTE, f"{RHAT_NOTE}"


def _diagnostics(metrics: Mapping[str, Any]) -> list[str]:
    lines = [f"the run ended {metrics.get('status') or 'without a status'}"]
    per_node = (metrics.get("diagnostics") or {}).get("per_node") or {}
    rhats = _figure(per_node, "rhat_max")
    if rhats:
        node = max(rhats, key=lambda n: rhats[n])
        limit, named = _rhat_limit(metrics.get("verdict"))
        lines.append(
            f"R-hat at its worst: {rhats[node]:.3f} (node {node}, worst coordinate); "
            f"{sum(r <= limit for r in rhats.values())} of {len(rhats)} nodes at or "
            f"below {named}"
        )
    ess = _figure(per_node, "ess_bulk_min")
    if ess:
        node = min(ess, key=lambda n: ess[n])
        lines.append(f"bulk ESS at its lowest: {ess[node]:.0f} draws (node {node})")
    w2 = metrics.get("w2") or {}
    std = (metrics.get("posterior") or {}).get("std") or []
    scale = [s for s in std if isinstance(s, (int, float))]
    if isinstance(w2.get("average"), (int, float)):
        over = metrics.get("averaged_nodes")  # the nodes that recorded every round
        of = ""
        if isinstance(over, list) and over:
            of = (
                f" of node {over[0]} only"
                if len(over) == 1
                else f" of nodes {', '.join(map(str, over))} only"
            )
        line = f"W2 of the network-average iterate{of}: {w2['average']:.4g}"
        if isinstance(w2.get("scale"), (int, float)):  # what the verdict measures error in
            line += f" (the posterior's scale sqrt(tr Σ): {w2['scale']:.4g})"
        elif scale:  # a folder written before w2.scale existed
            line += f" (posterior sd, mean over coordinates: {sum(scale) / len(scale):.4g})"
        lines.append(line)
    if isinstance(w2.get("node_mean"), (int, float)):
        lines.append(f"W2 per node, mean over nodes: {w2['node_mean']:.4g}")
    diverged = metrics.get("diverged") or {}
    if diverged:
        lines.append(
            "diverged: " + ", ".join(f"node {n} from round {r}" for n, r in diverged.items())
        )
    if not (rhats or ess or w2):
        lines.append("no convergence figure was recorded (no exact posterior, no diagnostics)")
    return lines
