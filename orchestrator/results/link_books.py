"""A node's link counters over all of its processes.

A node's counters start from zero in every process; a kill or crash would lose them. The
run keeps the last status of the current process and *carries* those of earlier ones:
counts add, the last error and the largest staleness are kept.

Each message is counted once. A process counts a message received when it arrives, and
it may arrive for a round the process never runs: a killed node's neighbours, told not to
wait for it, run ahead and send it their messages for its restart round. Those die with
the process; its successor resumes before that round, the senders' links send them again
(marked resent) and it counts them then. So a dead process's books are carried *without*
what it held pending (``pending_received``, ``pending_withheld``, ``pending_bytes`` of its
last status): else the account showed such a link delivering one message more than was
sent. A resent message for a round before the successor's first it does not count: the
process before it did (:class:`starling.node.runtime.inbox.Inbox`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # no grpc for `starling status`'s import of this module
    from starling.orchestrator.execution.client import NodeStatus

__all__ = ["add_books", "summed_books"]


_PENDING = {
    "received": "pending_received",
    "withheld": "pending_withheld",
    "bytes": "pending_bytes",
}
"""Counter -> the part of it a process held pending (lost if the process dies)."""


def add_books(total: dict, status: NodeStatus, died: bool = False) -> None:
    """Add a status's outbound/inbound counters into ``total`` (counts add, the last error
    and the largest staleness are kept). ``died``: the status is a dead process's last,
    carried without what it held pending (module docstring)."""
    for direction in ("outbound", "inbound"):
        book = total.setdefault(direction, {})
        for peer, stats in getattr(status, direction).items():
            mine = book.setdefault(peer, {})
            counts = dataclasses.asdict(stats)
            if died:
                for key, pending in _PENDING.items():
                    counts[key] -= counts[pending]
                    counts[pending] = 0
            for key, value in counts.items():
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
