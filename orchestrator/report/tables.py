"""``metrics.json`` as HTML tables, generically: a figure the evaluation adds appears
without a change here.

Every leaf of the metrics is placed by its path: a path through a node id (``w2.per_node.3``,
``program_metrics.3.weight_min``, ``ess.3``...) is a cell of a per-node table (row: the
node, column: the path without it; one table per top-level section, so none grows past the
page), anything else a row of the run's table. Headers are words with units
(:mod:`starling.orchestrator.report.labels`), never dotted keys. Every table sits in a box
that scrolls sideways if it must, so the page itself never does. The account's lines, the
faults and the link counters have sections of their own.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from typing import Any

from starling.orchestrator.report.labels import label, section_title
from starling.orchestrator.report.network import link_fractions

__all__ = ["account_block", "links_table", "node_table", "run_table", "table"]

OWN_SECTIONS = ("account", "faults", "links", "link_stats", "error", "verdict")
MAX_LIST = 4
MAX_LINK_ROWS = 60


def fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        shown = ", ".join(fmt(v) for v in value[:MAX_LIST])
        return f"[{shown}{', …' if len(value) > MAX_LIST else ''}]"
    return str(value)


def table(header: Iterable[str], rows: Iterable[Iterable[Any]], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(fmt(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    return (
        f'<div class="table-box"><table class="{cls}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def _leaves(value: Any, path: tuple[str, ...] = ()):
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(item, (*path, str(key)))
    elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        return  # records (events) belong to their own sections
    else:
        yield path, value


def _split(metrics: Mapping, nodes: set[str]):
    per_node: dict[str, dict[str, Any]] = {}
    run: list[tuple[str, Any]] = []
    for path, value in _leaves({k: v for k, v in metrics.items() if k not in OWN_SECTIONS}):
        at = next((k for k, part in enumerate(path) if part in nodes), None)
        if at is not None and at > 0:
            column = ".".join(path[:at] + path[at + 1 :])
            per_node.setdefault(path[at], {})[column] = value
        else:
            run.append((".".join(path), value))
    return per_node, run


def node_table(metrics: Mapping, nodes: list[str]) -> str:
    """One table per section of per-node figures (W2, ESS and R-hat, the sampler's own...),
    a row per node, human headers."""
    per_node, _ = _split(metrics, set(nodes))
    if not per_node:
        return ""
    columns = list(dict.fromkeys(c for row in per_node.values() for c in row))
    sections: dict[str, list[str]] = {}
    for column in columns:
        sections.setdefault(column.split(".", 1)[0], []).append(column)
    parts = []
    for key, group in sections.items():
        rows = [[n] + [per_node.get(n, {}).get(c) for c in group] for n in nodes if n in per_node]
        parts.append(
            f"<h3>{html.escape(section_title(key))}</h3>"
            + table(["node", *(label(c) for c in group)], rows, "numbers")
        )
    return "".join(parts)


def run_table(metrics: Mapping, nodes: list[str]) -> str:
    _, run = _split(metrics, set(nodes))
    return table(["figure", "value"], [(label(path), value) for path, value in run], "keyvalue")


def links_table(links: Mapping[str, Mapping[str, int]]) -> str:
    if not links:
        return "<p>No link counted a message.</p>"
    counters = list(dict.fromkeys(k for c in links.values() for k in c))
    ordered = sorted(
        links.items(), key=lambda kv: ((link_fractions(kv[1]) or {}).get("delivered", 1), kv[0])
    )
    rows: list[list[Any]] = []
    for key, c in ordered[:MAX_LINK_ROWS]:
        f = link_fractions(c)
        rows.append(
            [key.replace("->", " → ")]
            + [c.get(k, 0) for k in counters]
            + [None if f is None else f"{100 * f['delivered']:.1f} %"]
        )
    note = (
        f"<p>The {MAX_LINK_ROWS} lossiest of {len(links)} links.</p>"
        if len(links) > MAX_LINK_ROWS
        else ""
    )
    heads = [LINK_HEADS.get(c, c.replace("_", " ")) for c in counters]
    return note + table(["link", *heads, "share delivered in time"], rows, "numbers")


LINK_HEADS = {
    "sent": "sent",
    "delivered": "delivered in time",
    "withheld": "dropped by a fault",
    "dropped": "not sent: receiver down",
    "late": "late",
    "rejected": "rejected (malformed)",
    "send_errors": "stream failures (resent)",
    "overruns": "rounds waited out",
}
"""A link counter -> its column, in words (a live drop is counted ``withheld`` by the node
and shown as what it is)."""


def account_block(lines: list[str]) -> str:
    if not lines:
        return ""
    return "<pre>" + html.escape("\n".join(lines)) + "</pre>"
