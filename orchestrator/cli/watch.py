"""``starling status --watch``: a running experiment as a live terminal view.

Every node's round and state, every link's state (``up``, ``cut``, ``lossy p``,
``delayed N ms``) and its counters, redrawn every second from the nodes' own status
(one kept-open Control channel per node) and at once when the run's journal of live changes
grows (``starling links`` writes it before it returns), so a cut shows within a fraction of
a second. A link's state combines the live changes
(:func:`starling.orchestrator.execution.live.link_states`), the experiment's scheduled link faults
at the sender's current round and its ``link_delay``. On a terminal the view is drawn in place
(rich); otherwise a plain block is printed every second. It ends with Ctrl-C, or by itself when the
run's orchestrator is gone.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from starling.orchestrator.core.errors import NodeUnavailable
from starling.orchestrator.execution import live
from starling.orchestrator.results.link_books import link_summary, summed_books

__all__ = ["REFRESH_SECONDS", "link_state", "watch"]

REFRESH_SECONDS = 1.0
JOURNAL_SECONDS = 0.1
"""How often the journal of live link changes is looked at between two refreshes."""
COUNTERS = ("sent", "delivered", "withheld", "dropped", "late")


def _schedule(out_dir: str) -> tuple[tuple[str, Any], ...]:
    """The experiment's scheduled link faults, from the experiment file the run wrote."""
    try:
        from starling.orchestrator.config.experiment import load_experiment

        return load_experiment(Path(out_dir) / "experiment.yaml").faults
    except Exception:  # noqa: BLE001 - the view still shows live changes and counters
        return ()


def link_state(
    key: str, live_state: Mapping | None, schedule, sender_round: int | None, base_delay_ms: float
) -> str:
    """``up``, ``cut``, ``lossy 0.3`` and/or ``delayed 20 ms`` for link ``A->B``."""
    sender, receiver = key.split("->", 1)
    state = {"up": True, "drop": 0.0, "delay_ms": base_delay_ms, **(live_state or {})}
    scheduled = ""
    if sender_round is not None:
        for who, fault in schedule:
            if who == sender and fault.receiver in (receiver, "*"):
                if fault.start <= sender_round < fault.stop:
                    scheduled = "cut" if fault.drop >= 1.0 else f"lossy {fault.drop:g}"
    words = []
    if not state.get("up", True):
        words.append("cut")
    elif scheduled:
        words.append(f"{scheduled} (scheduled)")
    elif state.get("drop"):
        words.append(f"lossy {state['drop']:g}")
    if state.get("delay_ms"):
        words.append(f"delayed {state['delay_ms']:g} ms")
    return ", ".join(words) or "up"


class _View:
    def __init__(self, record: live.RunRecord):
        from starling.orchestrator.execution.access import access_from_section
        from starling.orchestrator.execution.client import (
            NodeClient,  # grpc only for the commands that dial
        )

        self.record = record
        access = access_from_section(record.access, "run record")
        self.clients = {
            node: NodeClient(address, timeout=0.8, access=access, node_id=node)
            for node, address in record.addresses.items()
        }
        self.schedule = _schedule(record.out_dir)
        self.nodes: dict[str, dict] = {}
        self.books: dict[str, dict] = {}
        self.events: list[dict] = []
        self.offset = 0

    def poll_nodes(self) -> None:
        for node, client in self.clients.items():
            try:
                status = client.status(attempts=1)
            except NodeUnavailable:
                self.nodes[node] = {"state": "unreachable", "round": None}
                continue
            self.nodes[node] = dataclasses.asdict(status)
            # The whole run's counts: a restarted node's earlier processes carried over.
            self.books[node] = summed_books(live.carried_books(self.events).get(node, {}), status)

    def poll_journal(self) -> bool:
        """True when new live changes arrived."""
        events, self.offset = live.read_events(self.record.out_dir, self.offset)
        self.events += events
        return bool(events)

    def rows(self) -> tuple[list[list[str]], list[list[str]]]:
        nodes = []
        for node in self.record.addresses:
            s = self.nodes.get(node, {"state": "…", "round": None})
            state = str(s.get("state", "?")).lower().replace("nodestate.", "")
            if s.get("holding"):
                state += " (holding)"
            if s.get("error"):
                state += f" — {s['error']}"
            extra = f"told down: {', '.join(s['peers_down'])}" if s.get("peers_down") else ""
            nodes.append(
                [
                    node,
                    "–" if s.get("round") is None else str(s["round"]),
                    state,
                    str(s.get("samples_stored", "–")),
                    extra,
                ]
            )
        links = link_summary(self.books)
        states = live.link_states(self.events)
        for key in states:
            links.setdefault(key, dict.fromkeys(COUNTERS, 0))
        table = []
        for key, counts in sorted(links.items()):
            sender_round = self.nodes.get(key.split("->", 1)[0], {}).get("round")
            text = link_state(
                key, states.get(key), self.schedule, sender_round, self.record.link_delay_ms
            )
            table.append(
                [key.replace("->", " -> "), text] + [str(counts.get(c, 0)) for c in COUNTERS]
            )
        return nodes, table

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


NODE_HEADER = ["node", "round", "state", "samples", "notes"]
LINK_HEADER = ["link", "state", *COUNTERS]


def plain(view: _View) -> str:
    nodes, links = view.rows()
    lines = [f"experiment {view.record.name}  {time.strftime('%H:%M:%S')}"]
    for header, rows in ((NODE_HEADER, nodes), (LINK_HEADER, links)):
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
        for row in (header, *rows):
            lines.append(
                "  " + "  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=False))
            )
    return "\n".join(lines)


def _rich(view: _View):
    from rich.console import Group
    from rich.table import Table

    nodes, links = view.rows()
    colours = {"cut": "bold red", "lossy": "yellow", "delayed": "cyan", "up": "green"}
    node_table = Table(*NODE_HEADER, title=f"experiment {view.record.name}", title_justify="left")
    for row in nodes:
        node_table.add_row(*row, style="red" if "unreachable" in row[2] else None)
    link_table = Table(*LINK_HEADER)
    for row in links:
        tint = next((c for word, c in colours.items() if row[1].startswith(word)), None)
        link_table.add_row(row[0], f"[{tint}]{row[1]}[/]" if tint else row[1], *row[2:])
    note = f"refreshed {time.strftime('%H:%M:%S')} every {REFRESH_SECONDS:g} s; Ctrl-C to leave"
    return Group(node_table, link_table, note)


def watch(record: live.RunRecord, stream: IO[str] | None = None, rounds: int | None = None) -> int:
    """Show ``record``'s experiment until Ctrl-C or its end (``rounds`` refreshes at most,
    for tests); returns the exit code."""
    stream = stream or sys.stdout
    view = _View(record)
    use_rich = stream.isatty()
    if use_rich:
        try:
            from rich.console import Console
            from rich.live import Live
        except ImportError:
            use_rich = False
    shown = 0
    try:
        if use_rich:
            with Live(console=Console(file=stream), auto_refresh=False) as screen:
                while _running(record) and (rounds is None or shown < rounds):
                    view.poll_nodes()
                    view.poll_journal()
                    screen.update(_rich(view), refresh=True)
                    shown += 1
                    _wait(view, lambda: screen.update(_rich(view), refresh=True))
        else:
            while _running(record) and (rounds is None or shown < rounds):
                view.poll_nodes()
                view.poll_journal()
                print(plain(view) + "\n", file=stream, flush=True)
                shown += 1
                _wait(view, lambda: print(plain(view) + "\n", file=stream, flush=True))
    except KeyboardInterrupt:
        return 0
    finally:
        view.close()
    if not _running(record):
        print(f"experiment {record.name} has ended (its orchestrator is gone)", file=stream)
    return 0


def _wait(
    view: _View,
    redraw: Callable[[], None],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Until the next refresh, redraw at once whenever the journal of live changes grows
    (``clock`` and ``sleep``: real time, unless a test hands its own)."""
    end = clock() + REFRESH_SECONDS
    while clock() < end:
        sleep(JOURNAL_SECONDS)
        if view.poll_journal():
            redraw()


def _running(record: live.RunRecord) -> bool:
    return live._pid_alive(record.orchestrator_pid)
