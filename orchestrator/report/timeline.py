"""What happened when, on a timeline of rounds: node kills, restarts and other node
events, scheduled and live link faults, and faults made in the kernel.

Read from ``metrics.json``'s ``faults`` section (:mod:`starling.orchestrator.results.account`): rows
are the nodes and links anything happened to, spans are the rounds a fault lasted.
"""

from __future__ import annotations

from collections.abc import Mapping

from starling.orchestrator.report.plotting import data_uri, pyplot

__all__ = ["down_nodes", "timeline_figure"]

_MARKS = {
    "killed": ("x", "#D55E00", "killed"),
    "restarted": ("^", "#009E73", "restarted"),
    "resumed": ("o", "#009E73", "resumed from checkpoint"),
    "failed": ("X", "black", "failed"),
    "down": ("v", "#D55E00", "went down unasked"),
    "given_up": ("s", "black", "given up"),
    "stopped": ("s", "#CC79A7", "stopped from outside"),
    "samples_refused": ("D", "#D55E00", "samples refused"),
}


def down_nodes(faults: Mapping) -> set[str]:
    """Nodes killed, failed or down at some point (scheduled or observed)."""
    nodes = {str(f.get("node")) for f in faults.get("scheduled_nodes") or []}
    nodes |= {
        str(e.get("node"))
        for e in faults.get("nodes") or []
        if e.get("event") in ("killed", "failed", "down", "given_up", "stopped")
    }
    return nodes


def _spans(faults: Mapping, rounds: int) -> list[tuple[str, float, float, str, str]]:
    """(row, start, stop, colour, label) of every fault that lasted some rounds."""
    spans = []
    for f in faults.get("scheduled_nodes") or []:
        stop = f.get("restart_at_round")
        spans.append(
            (
                f"node {f['node']}",
                f["kill_at_round"],
                rounds if stop is None else stop,
                "#F4B88F",
                "down (scheduled)",
            )
        )
    for f in faults.get("scheduled_links") or []:
        start, stop = f.get("rounds", [0, rounds])
        if f.get("receiver") == "*":
            row = "every link" if len(f.get("senders", [])) > 1 else f"{f['senders'][0]} → all"
        else:
            a, b = f["link"]
            row = f"link {a} {'↔' if f.get('both_ways') else '→'} {b}"
        drop = float(f.get("drop", 1.0))
        tint, label = ("#D55E00", "link cut") if drop >= 1 else ("#E69F00", "link lossy")
        spans.append((row, start, stop, tint, f"{label}" + ("" if drop >= 1 else f" p={drop:g}")))
    for f in faults.get("kernel") or []:
        if not f.get("started"):
            continue
        target = f"{f.get('node')}" + (f" → {f['peer']}" if f.get("peer") else "")
        kind = f.get("kind")
        start, stop = f.get("started_round", 0), f.get("ended_round", rounds)
        spans.append((f"kernel {kind} {target}", start, stop, "#56B4E9", f"kernel: {kind}"))
    return spans


def timeline_figure(metrics: Mapping):
    """(data URI, caption), or None without matplotlib or without any event."""
    faults = metrics.get("faults") or {}
    rounds = int(metrics.get("rounds") or 0)
    spans = _spans(faults, rounds)
    events = [e for e in faults.get("nodes") or [] if e.get("round") is not None]
    live = [e for e in faults.get("live_links") or [] if e.get("sender_round") is not None]
    plt = pyplot()
    if plt is None or not (spans or events or live):
        return None
    rows: list[str] = []
    for row, *_ in spans:
        rows.append(row)
    rows += [f"node {e['node']}" for e in events]
    rows += [f"link {e['sender']} → {e['receiver']}" for e in live]
    rows = sorted(dict.fromkeys(rows), key=lambda r: (not r.startswith("node"), r))
    y = {row: k for k, row in enumerate(rows)}
    figure, ax = plt.subplots(figsize=(12, 0.9 + 0.45 * len(rows)))
    seen: set[str] = set()
    for row, start, stop, tint, label in spans:
        ax.barh(
            y[row],
            stop - start,
            left=start,
            height=0.5,
            color=tint,
            label=None if label in seen else label,
        )
        seen.add(label)
    for e in events:
        marker, tint, label = _MARKS.get(e["event"], ("d", "0.3", e["event"]))
        # Ends of a down spell above the row, its start below: a node killed at its round 20
        # resumes at its round 20 (its own rounds stood still), and both stay visible.
        lift = 0.15 if e["event"] in ("restarted", "resumed") else -0.15
        ax.plot(
            e["round"],
            y[f"node {e['node']}"] + lift,
            marker,
            color=tint,
            ms=10,
            mew=2,
            label=None if label in seen else label,
            ls="none",
        )
        seen.add(label)
    for e in live:
        text = {"cut": "cut (live)", "restore": "restored (live)"}.get(
            e.get("action"), "set (live)"
        )
        tint = {"cut": "#D55E00", "restore": "#009E73"}.get(e.get("action"), "#E69F00")
        ax.plot(
            e["sender_round"],
            y[f"link {e['sender']} → {e['receiver']}"],
            "D",
            color=tint,
            ms=8,
            label=None if text in seen else text,
            ls="none",
        )
        seen.add(text)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.invert_yaxis()
    ax.set_xlim(0, max(rounds, 1))
    ax.set_xlabel("round (the node's own round; a link's is its sender's)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    figure.tight_layout()
    caption = (
        "Faults on a timeline of rounds: bars are spans (scheduled kills until their restart "
        "round, scheduled link cuts and losses, kernel faults); markers are what the run "
        "observed (a kill at the round the node had reached, its restart, its resume from a "
        "checkpoint, live link changes made with `starling links`)."
    )
    return data_uri(figure, "timeline"), caption
