"""``starling status --watch``: a running experiment as a live terminal view.

Every node's round and state, every link's state (``up``, ``cut``, ``lossy p``,
``delayed N ms``) and its counters, redrawn every second from one consistent look at the
nodes (:class:`~starling.orchestrator.execution.snapshot.Poller`: all asked at once, a link's
receiver before its sender, each link marked with the rounds its books were read at; one
kept-open Control channel per node) and at once when the run's journal of live changes
grows (``starling links`` writes it before it returns), so a cut shows within a fraction of
a second. A link's state combines the live changes
(:func:`starling.orchestrator.execution.live.link_states`), the experiment's scheduled link faults
at the sender's current round and its ``link_delay``. On a terminal the view is drawn in place
(rich); otherwise a plain block is printed every second.

Started a moment before the run registers, it waits for it (``--wait`` seconds). When the
run ends it says how (``finished: complete``, ``partial``, ``failed`` or ``interrupted``,
from the results it wrote) with the final counters, and returns; Ctrl-C leaves at any time.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from starling.node.params import ConfigError
from starling.orchestrator.cli.status_view import (
    LINK_COLUMNS,
    LINK_LEGEND,
    as_of,
    finished_report,
)
from starling.orchestrator.execution import live

__all__ = ["REFRESH_SECONDS", "link_state", "watch"]

REFRESH_SECONDS = 1.0
left_by_ctrl_c: list[bool] = []
"""Set when a watch was left with Ctrl-C (the program then ends at once, see cli.main)."""
AWAIT_SECONDS = 0.2
"""How often a watch started before its run looks for it."""
JOURNAL_SECONDS = 0.1
"""How often the journal of live link changes is looked at between two refreshes."""
COUNTERS = tuple(name for name, _ in LINK_COLUMNS)


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
        from starling.orchestrator.execution.snapshot import Poller  # grpc only when watching

        self.record = record
        self.poller = Poller(record, timeout=0.8)
        self.schedule = _schedule(record.out_dir)
        self.nodes: dict[str, dict] = {}
        self.links: dict[str, dict] = {}
        self.events: list[dict] = []
        self.offset = 0
        self.finished: dict | None = None

    def poll_nodes(self) -> None:
        look = self.poller.look(self.events)
        self.nodes, self.links = look.nodes, look.links

    def end(self, report: dict) -> None:
        """The run is over: show how it ended, with its final counters."""
        self.finished = report
        self.nodes, self.links = report["nodes"], report["links"]

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
            if s.get("process") == "ended":
                state += " (process ended)"
            if s.get("holding"):
                state += " (holding)"
            if s.get("error"):
                state += f" — {s['error']}"
            extra = f"told down: {', '.join(s['peers_down'])}" if s.get("peers_down") else ""
            samples = s.get("samples_stored")
            nodes.append(
                [
                    node,
                    "–" if s.get("round") is None else str(s["round"]),
                    state,
                    "–" if samples is None else str(samples),
                    extra,
                ]
            )
        links = dict(self.links)
        states = live.link_states(self.events)
        for key in states:
            links.setdefault(key, dict.fromkeys(COUNTERS, 0))
        table = []
        for key, counts in sorted(links.items()):
            sender_round = self.nodes.get(key.split("->", 1)[0], {}).get("round")
            text = (
                "finished"
                if self.finished is not None
                else link_state(
                    key, states.get(key), self.schedule, sender_round, self.record.link_delay_ms
                )
            )
            table.append(
                [key.replace("->", " -> "), text]
                + [str(counts.get(c, 0)) for c in COUNTERS]
                + [as_of(counts)]
            )
        return nodes, table

    def title(self) -> str:
        if self.finished is None:
            return f"experiment {self.record.name}"
        note = f" — {self.finished['note']}" if self.finished.get("note") else ""
        return f"experiment {self.record.name}  finished: {self.finished['finished']}{note}"

    def close(self) -> None:
        self.poller.close()


NODE_HEADER = ["node", "round", "state", "samples", "notes"]
LINK_HEADER = ["link", "state", *(title for _, title in LINK_COLUMNS), "as of"]


def plain(view: _View) -> str:
    nodes, links = view.rows()
    lines = [f"{view.title()}  {time.strftime('%H:%M:%S')}"]
    for header, rows in ((NODE_HEADER, nodes), (LINK_HEADER, links)):
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
        for row in (header, *rows):
            lines.append(
                "  " + "  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=False))
            )
    lines.append(f"  ({LINK_LEGEND})")
    return "\n".join(lines)


def _rich(view: _View):
    from rich.console import Group
    from rich.table import Table

    nodes, links = view.rows()
    colours = {"cut": "bold red", "lossy": "yellow", "delayed": "cyan", "up": "green"}
    node_table = Table(*NODE_HEADER, title=view.title(), title_justify="left")
    for row in nodes:
        node_table.add_row(*row, style="red" if "unreachable" in row[2] else None)
    link_table = Table(*LINK_HEADER)
    for row in links:
        tint = next((c for word, c in colours.items() if row[1].startswith(word)), None)
        link_table.add_row(row[0], f"[{tint}]{row[1]}[/]" if tint else row[1], *row[2:])
    note = f"refreshed {time.strftime('%H:%M:%S')} every {REFRESH_SECONDS:g} s; Ctrl-C to leave"
    if view.finished is not None:
        note = f"the run has ended: finished: {view.finished['finished']}"
    return Group(node_table, link_table, f"({LINK_LEGEND})", note)


def watch(
    selector: str | None,
    wait: float = 60.0,
    stream: IO[str] | None = None,
    rounds: int | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Show the run ``selector`` names (or the only one) until Ctrl-C or its end
    (``rounds`` refreshes at most, for tests), waiting up to ``wait`` seconds for it to
    start; returns the exit code."""
    stream = stream or sys.stdout
    try:
        record = _await_run(selector, wait, stream, clock, sleep)
        return _show(record, stream, rounds)
    except KeyboardInterrupt:  # Ctrl-C is how a watch is left: exit 0
        left_by_ctrl_c.append(True)
        return 0


def _await_run(
    selector: str | None,
    wait: float,
    stream: IO[str],
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> live.RunRecord:
    """The run to watch, once it has registered (a watch started with the run, or just
    before it, left at once: "no running experiment found")."""
    if not 0 <= wait < 1e6:
        raise ConfigError(f"--wait: expected a number of seconds from 0, got {wait:g}")
    deadline = clock() + wait
    told = False
    while True:
        try:
            return live.find_run(selector)
        except ConfigError as exc:
            if "several experiments" in str(exc) or clock() >= deadline:
                raise
            if not told:
                what = f" {selector}" if selector else ""
                print(
                    f"waiting up to {wait:g} s for experiment{what} to start (Ctrl-C to leave)",
                    file=stream,
                    flush=True,
                )
                told = True
            sleep(AWAIT_SECONDS)


def _show(record: live.RunRecord, stream: IO[str], rounds: int | None) -> int:
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
                    view.poll_journal()
                    view.poll_nodes()
                    screen.update(_rich(view), refresh=True)
                    shown += 1
                    _wait(view, lambda: screen.update(_rich(view), refresh=True))
                if _ended(view):
                    screen.update(_rich(view), refresh=True)
        else:
            while _running(record) and (rounds is None or shown < rounds):
                if getattr(stream, "gone", False):  # `--watch | head`: its reader left
                    return 0
                view.poll_journal()
                view.poll_nodes()
                print(plain(view) + "\n", file=stream, flush=True)
                shown += 1
                _wait(view, lambda: print(plain(view) + "\n", file=stream, flush=True))
            if _ended(view):
                print(plain(view) + "\n", file=stream, flush=True)
    finally:
        view.close()
    if view.finished is not None:
        print(
            f"experiment {record.name} has ended: finished: {view.finished['finished']}",
            file=stream,
        )
    return 0


def _ended(view: _View) -> bool:
    """Whether the run is over; if so the view shows how it ended."""
    report = finished_report(view.record)
    if report is not None:
        view.end(report)
    return report is not None


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
