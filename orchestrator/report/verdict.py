"""The first thing on a run's page: its verdict — can the samples be trusted?

The verdict itself is the evaluation's (the results-truth work writes it into
``metrics.json`` as ``verdict``); this module only shows it: a string, or an object whose
``summary`` (or ``label``) is the headline and whose ``reasons`` (or ``lines``) are listed
under it. Until a run has one, the box shows what a verdict would weigh, as the run's own
figures say them: how the run ended, R-hat and ESS per node at their worst, W2 against the
posterior's scale, nodes that diverged. It states no judgement of its own.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

__all__ = ["verdict_block"]

RHAT_NOTE = 1.01
"""The R-hat Vehtari et al. (2021) ask of a chain before trusting it; said beside the
worst one, not used to judge."""


def verdict_block(metrics: Mapping[str, Any]) -> str:
    """The HTML of the verdict box (``<section id="verdict">``), always present."""
    given = metrics.get("verdict")
    if given:  # written by the evaluation: shown as it is
        headline, lines = _given(given)
        body = f"<h2>Verdict: {html.escape(headline)}</h2>" + _list(lines)
    else:
        body = (
            "<h2>Verdict: not judged here; the convergence figures it rests on</h2>"
            + _list(_diagnostics(metrics))
            + '<p class="note">This run\'s results carry no verdict; the lines above are '
            "its own figures, the ones a verdict weighs.</p>"
        )
    return f'<section id="verdict" class="verdict">{body}</section>'


def _given(verdict: Any) -> tuple[str, list[str]]:
    if isinstance(verdict, Mapping):
        headline = verdict.get("summary") or verdict.get("label") or verdict.get("verdict")
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


def _diagnostics(metrics: Mapping[str, Any]) -> list[str]:
    lines = [f"the run ended {metrics.get('status') or 'without a status'}"]
    per_node = (metrics.get("diagnostics") or {}).get("per_node") or {}
    rhats = _figure(per_node, "rhat_max")
    if rhats:
        node = max(rhats, key=lambda n: rhats[n])
        lines.append(
            f"R-hat at its worst: {rhats[node]:.3f} (node {node}, worst coordinate); "
            f"{sum(r <= RHAT_NOTE for r in rhats.values())} of {len(rhats)} nodes at or "
            f"below {RHAT_NOTE}"
        )
    ess = _figure(per_node, "ess_bulk_min")
    if ess:
        node = min(ess, key=lambda n: ess[n])
        lines.append(f"bulk ESS at its lowest: {ess[node]:.0f} draws (node {node})")
    w2 = metrics.get("w2") or {}
    std = (metrics.get("posterior") or {}).get("std") or []
    scale = [s for s in std if isinstance(s, (int, float))]
    if isinstance(w2.get("average"), (int, float)):
        line = f"W2 of the network-average iterate: {w2['average']:.4g}"
        if scale:
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
