"""The run's account: what happened, as sentences for people and records for ``metrics.json``.

``run`` and ``simulate`` open it with the scheduled faults, the run loop adds node events
(killed, restarted, resumed, failed, given up) and live link changes from the journal, and
the results close it with the link table, any divergence and the timing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from starling.node.spec import LinkFault
from starling.orchestrator.faults.account import describe_link_faults, describe_node_faults
from starling.orchestrator.faults.schedule import NodeFault

__all__ = ["Account", "account_divergence", "account_schedule"]


class Account:
    """What happened during a run: sentences for people, records for ``metrics.json``."""

    def __init__(self, say: Callable[[str], None]):
        self.started = time.monotonic()
        self.started_wall = time.time()
        self.lines: list[str] = []
        self.scheduled_links: list[dict] = []
        self.scheduled_nodes: list[dict] = []
        self.live_links: list[dict] = []
        self.node_events: list[dict] = []
        self.kernel_faults: list[dict] = []
        self._say = say

    def _tell(self, text: str, **fields: Any) -> None:
        """Say ``text``; a say that takes fields (JSON output, starling.orchestrator.core.output)
        gets them too."""
        if getattr(self._say, "takes_fields", False):
            self._say(text, **fields)
        else:
            self._say(text)

    def restart_clock(self) -> None:
        self.started = time.monotonic()
        self.started_wall = time.time()

    def elapsed(self, wall: float | None = None) -> float:
        if wall is not None:
            return wall - self.started_wall
        return time.monotonic() - self.started

    def plain(self, text: str) -> None:
        self.lines.append(text)

    def node(self, node: str, event: str, text: str, echo: bool = True, **fields: Any) -> None:
        """A node event (killed, restarted, resumed, failed, given_up), stamped."""
        elapsed = self.elapsed()
        stamp = time.strftime("%H:%M:%S")
        self.node_events.append(
            {"node": node, "event": event, "clock": stamp, "elapsed": round(elapsed, 2), **fields}
        )
        self.lines.append(f"{stamp} (+{elapsed:.1f} s) node {node}: {text}")
        if echo:
            self._tell(f"node {node}: {text}", node=node, event=event, round=fields.get("round"))

    def kernel(self, record: dict, text: str) -> None:
        """A fault carried out in the kernel (starling.orchestrator.faults.kernel), stamped."""
        elapsed = self.elapsed()
        stamp = time.strftime("%H:%M:%S")
        self.kernel_faults.append({**record, "clock": stamp, "elapsed": round(elapsed, 2)})
        self.lines.append(f"{stamp} (+{elapsed:.1f} s) kernel: {text}")
        self._tell(
            f"kernel: {text}",
            node=record.get("node"),
            peer=record.get("peer"),
            event=f"kernel_{record.get('kind')}",
        )

    def live_link(self, event: dict) -> None:
        """A link change made with ``starling links``, from the run's journal."""
        wall = float(event.get("time", time.time()))
        elapsed = self.elapsed(wall)
        stamp = time.strftime("%H:%M:%S", time.localtime(wall))
        record = {
            "clock": stamp,
            "elapsed": round(elapsed, 2),
            "who": event.get("who", "?"),
            "action": event.get("action"),
            "sender": event.get("sender"),
            "receiver": event.get("receiver"),
            "up": event.get("up"),
            "drop": event.get("drop"),
            "delay_ms": event.get("delay_ms"),
            "sender_round": event.get("round"),
        }
        self.live_links.append(record)
        what = _live_change_text(record)
        at = f" at its round {record['sender_round']}" if record["sender_round"] is not None else ""
        self.lines.append(
            f"{stamp} (+{elapsed:.1f} s) live: link {record['sender']}→{record['receiver']} "
            f"{what}{at}, by {record['who']}"
        )
        self._tell(
            f"live: link {record['sender']}→{record['receiver']} {what}",
            node=record["sender"],
            peer=record["receiver"],
            event=f"link_{record['action']}",
            round=record["sender_round"],
        )

    def section(self) -> dict:
        return {
            "scheduled_links": self.scheduled_links,
            "scheduled_nodes": self.scheduled_nodes,
            "live_links": self.live_links,
            "nodes": self.node_events,
            "kernel": self.kernel_faults,
        }


def _live_change_text(record: dict) -> str:
    if record["action"] == "cut":
        return "cut"
    if record["action"] == "restore":
        return "restored"
    parts = []
    if record.get("drop") is not None:
        parts.append(f"drop {record['drop']:g}")
    if record.get("delay_ms") is not None:
        parts.append(f"delay {record['delay_ms']:g} ms")
    return "set " + ", ".join(parts)


SCHEDULE_LINES = 20
"""Scheduled faults of one kind said line by line in the account; the rest are counted."""


def account_schedule(
    account: Account,
    link_faults: tuple[tuple[str, LinkFault], ...],
    node_faults: tuple[NodeFault, ...],
    rounds: int,
    node_note: str = "",
) -> None:
    """Open the account with a run's scheduled link and node faults: every one recorded
    (``faults.scheduled_links`` / ``scheduled_nodes`` of ``metrics.json``), the first
    :data:`SCHEDULE_LINES` of each kind said in a line (a file of 10⁵ faults printed 10⁵
    lines at the end of its run)."""
    for kind, described, note in (
        ("link", describe_link_faults(link_faults, rounds), ""),
        ("node", describe_node_faults(node_faults, rounds), node_note),
    ):
        records = account.scheduled_links if kind == "link" else account.scheduled_nodes
        for k, (record, text) in enumerate(described):
            records.append(record)
            if k < SCHEDULE_LINES:
                account.plain(text + note)
        if len(described) > SCHEDULE_LINES:
            where = f"faults.scheduled_{kind}s of metrics.json"
            account.plain(
                f"scheduled: {len(described) - SCHEDULE_LINES:,} more {kind} faults "
                f"({where} lists all {len(described):,})"
            )


def account_divergence(metrics: dict, account: Account) -> None:
    """A line per diverged node: which, from which round, and what its values did."""
    for node, first in (metrics.get("diverged") or {}).items():
        account.plain(
            f"node {node}: diverged at round {first}: its samples ran away (not finite, beyond "
            "1e150, or beyond 1e6 times the exact posterior's scale where it is known)"
        )
