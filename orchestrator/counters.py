"""A node's link counters over all of its processes.

A node's counters start from zero in every process; a kill or crash would lose them. The
run keeps the last status of the current process and *carries* those of earlier ones:
counts add, the last error and the largest staleness are kept.
"""

from __future__ import annotations

import dataclasses

from starling.orchestrator.client import NodeStatus

__all__ = ["add_books", "summed_books"]


def add_books(total: dict, status: NodeStatus) -> None:
    """Add a status's outbound/inbound counters into ``total`` (counts add, the last error
    and the largest staleness are kept)."""
    for direction in ("outbound", "inbound"):
        book = total.setdefault(direction, {})
        for peer, stats in getattr(status, direction).items():
            mine = book.setdefault(peer, {})
            for key, value in dataclasses.asdict(stats).items():
                if key == "last_error":
                    mine[key] = value or mine.get(key, "")
                elif key == "max_staleness":
                    mine[key] = max(mine.get(key, 0), value)
                else:
                    mine[key] = mine.get(key, 0) + value


def summed_books(carried: dict, last: NodeStatus | None) -> dict:
    """{outbound, inbound}: peer -> counters, earlier processes' plus the current one's."""
    total: dict = {}
    for direction, book in carried.items():
        total[direction] = {peer: dict(c) for peer, c in book.items()}
    if last is not None:
        add_books(total, last)
    return {
        "outbound": dict(sorted(total.get("outbound", {}).items())),
        "inbound": dict(sorted(total.get("inbound", {}).items())),
    }
