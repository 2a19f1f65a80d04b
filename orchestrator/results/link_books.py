"""A run's link books: every node's counters over all of its processes, and per link.

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

Per directed link ``A->B`` (:func:`link_summary`), the sender's books say what it sent,
withheld and dropped, the receiver's what arrived in time, late or malformed. What was
*lost* is what the sender had for the receiver and the receiver did not get in time:
``withheld + dropped + sent - delivered`` (:func:`lost`); it never counts a resend, and for
books that add up (``delivered <= sent``, each message counted once) it is never negative.

A process that went unreachable (paused, cut off the network) and came back is the same
process: its counters since its configuration include everything before. Only a process
that was replaced (killed, crashed, restarted) has its last books carried over; carrying a
live one's too counted all of its messages twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from starling.node.protocol.contract import LinkCounters


class Books(Protocol):
    """Anything holding one process's link books, as a node's status does."""

    @property
    def outbound(self) -> Mapping[str, LinkCounters]: ...

    @property
    def inbound(self) -> Mapping[str, LinkCounters]: ...


__all__ = [
    "LINK_COUNTERS",
    "Books",
    "add_books",
    "link_account",
    "link_summary",
    "lost",
    "summed_books",
]


_PENDING = {
    "received": "pending_received",
    "withheld": "pending_withheld",
    "bytes": "pending_bytes",
}
"""Counter -> the part of it a process held pending (lost if the process dies)."""


def add_books(total: dict, status: Books, died: bool = False) -> None:
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


def summed_books(carried: dict, last: Books | None) -> dict:
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


LINK_COUNTERS = (
    "sent",
    "resent",
    "delivered",
    "withheld",
    "dropped",
    "late",
    "rejected",
    "screened",
    "send_errors",
    "overruns",
)
"""Per directed link: ``sent`` on the wire (each message once), ``resent`` (sent again after
its stream broke: a resend, never a new send), ``delivered`` in time for its round, ``withheld``
by an emulated fault (scheduled, or live cut/drop), ``dropped`` because the receiver could
not be reached, ``late`` (arrived after the receiver's deadline), ``rejected`` (malformed),
``screened`` (of those rejected, refused for a value beyond the receiver's screening
bound), ``send_errors`` (stream failures), ``overruns`` (an asynchronous receiver waited out its
deadline for a fresh enough message from this sender)."""


def link_summary(
    link_stats: Mapping[str, Mapping[str, Mapping[str, Mapping]]],
    cut_short: Collection[str] = (),
) -> dict:
    """``"A->B"`` -> counters, from every node's final ``outbound`` / ``inbound`` books.

    The sender knows what it sent, withheld and dropped; the receiver what it got in time,
    late or malformed. ``cut_short``: senders a process of which died after its last status
    (killed, crashed, unreachable at the end): what it sent after that was never reported,
    but its receivers counted what arrived, and a message that arrived was sent. On their
    links ``sent`` is at least ``delivered + late``, and ``sent_seen_by_receiver`` says by
    how much the receiver's count raised it (absent when it did not).
    """
    links: dict[str, dict[str, int]] = {}

    def entry(key: str) -> dict[str, int]:
        return links.setdefault(key, dict.fromkeys(LINK_COUNTERS, 0))

    for node, books in link_stats.items():
        for peer, c in (books.get("outbound") or {}).items():
            e = entry(f"{node}->{peer}")
            for name in ("sent", "resent", "withheld", "dropped", "send_errors"):
                e[name] += int(c.get(name, 0))
        for peer, c in (books.get("inbound") or {}).items():
            e = entry(f"{peer}->{node}")
            e["delivered"] += int(c.get("received", 0))
            e["late"] += int(c.get("late", 0))
            e["rejected"] += int(c.get("rejected", 0))
            e["screened"] += int(c.get("screened", 0))
            e["overruns"] += int(c.get("overruns", 0))
    for key, counts in links.items():
        arrived = counts["delivered"] + counts["late"]
        if key.split("->")[0] in cut_short and arrived > counts["sent"]:
            counts["sent_seen_by_receiver"] = arrived - counts["sent"]
            counts["sent"] = arrived
        counts["lost"] = lost(counts)
    return dict(sorted(links.items()))


def lost(counts: Mapping[str, int]) -> int:
    """Messages of one link its receiver did not get in time: those withheld by a fault,
    dropped (the receiver unreachable), and sent but not delivered (late, malformed, or
    gone with a broken stream or a dead process). Resends are not messages of their own."""
    offered = counts.get("sent", 0) + counts.get("withheld", 0) + counts.get("dropped", 0)
    return offered - counts.get("delivered", 0)


def link_account(links: Mapping[str, Mapping[str, int]]) -> list[str]:
    """Lines for the account: every link that lost something, or one line saying none did."""
    lossy = [
        (key, c)
        for key, c in links.items()
        if lost(c) > 0
        or any(
            c.get(k, 0)
            for k in ("withheld", "dropped", "late", "rejected", "send_errors", "overruns")
        )
    ]
    if not lossy:
        return [f"links: all {len(links)} links delivered every message in time"] if links else []
    total = sum(lost(c) for _, c in lossy)
    lines = [
        f"links: {len(lossy)} of {len(links)} lost messages, {total} in all "
        "(sent/delivered/withheld/dropped/late):"
    ]
    raised = {
        k: c["sent_seen_by_receiver"] for k, c in links.items() if c.get("sent_seen_by_receiver")
    }
    for key, c in lossy:
        extra = "".join(
            f" {name} {c[name]}"
            for name in ("rejected", "screened", "send_errors", "overruns", "resent")
            if c.get(name)
        )
        lines.append(
            f"  {key.replace('->', '→')}: {c.get('sent', 0)}/{c.get('delivered', 0)}/"
            f"{c.get('withheld', 0)}/{c.get('dropped', 0)}/{c.get('late', 0)}{extra}"
        )
    if raised:
        lines.append(
            "  a sender died after its last status on "
            + ", ".join(f"{k.replace('->', '→')} (+{n})" for k, n in raised.items())
            + ": sent counts what its receiver got after that"
        )
    return lines
