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
    "LINK_WORDS",
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


LINK_WORDS = {
    "withheld": "dropped by a fault",
    "dropped": "not sent (receiver unreachable)",
}
"""How people are told two counters whose names say how the node counts them, not what
happened: ``withheld`` is a message a fault took out (a cut, a live ``--drop``, a
scheduled loss), ``dropped`` one never sent because its receiver did not answer."""


def link_account(links: Mapping[str, Mapping[str, int]]) -> list[str]:
    """Lines for the account: what became of the messages of every link that did not
    deliver all of them in time, or one line saying every link did. Each line says what
    happened, in words (``120 sent, 117 delivered in time, 3 dropped by a fault``); a
    stream that broke and whose messages were sent again and arrived is no loss, and is
    said as such."""
    missed = [(key, c) for key, c in links.items() if _missed(c)]
    resent = sum(int(c.get("send_errors", 0)) for c in links.values())
    again = (
        f"; {resent} stream failure{'s' if resent != 1 else ''}, their messages sent again"
        if resent
        else ""
    )
    if not missed:
        return (
            [f"links: all {len(links)} links delivered every message in time{again}"]
            if links
            else []
        )
    lines = [f"links: {len(missed)} of {len(links)} did not deliver every message in time{again}:"]
    for key, c in missed:
        lines.append(f"  {key.replace('->', '→')}: {_what_happened(c)}")
    raised = {
        k: c["sent_seen_by_receiver"] for k, c in links.items() if c.get("sent_seen_by_receiver")
    }
    if raised:
        lines.append(
            "  a sender died after its last status on "
            + ", ".join(f"{k.replace('->', '→')} (+{n})" for k, n in raised.items())
            + ": sent counts what its receiver got after that"
        )
    return lines


def _missed(c: Mapping[str, int]) -> bool:
    """Whether some message of a link did not arrive in time (for any reason)."""
    missing = ("withheld", "dropped", "late", "rejected", "overruns")
    return any(c.get(k, 0) for k in missing) or lost(c) > 0


def _what_happened(c: Mapping[str, int]) -> str:
    sent, delivered = int(c.get("sent", 0)), int(c.get("delivered", 0))
    late, rejected = int(c.get("late", 0)), int(c.get("rejected", 0))
    parts = [f"{sent} sent", f"{delivered} delivered in time"]
    if late:
        parts.append(f"{late} late")
    screened = int(c.get("screened", 0))
    if rejected - screened > 0:
        parts.append(f"{rejected - screened} rejected as malformed")
    if screened:
        parts.append(f"{screened} screened (a value beyond the receiver's bound)")
    never = sent - delivered - late - rejected
    if never > 0:
        parts.append(f"{never} sent but never arrived")
    for name, words in LINK_WORDS.items():
        if c.get(name):
            parts.append(f"{c[name]} {words}")
    if c.get("overruns"):
        parts.append(f"{c['overruns']} rounds its receiver waited out for it")
    if c.get("send_errors"):
        parts.append(f"{c['send_errors']} stream failures (messages sent again)")
    if c.get("resent"):
        parts.append(f"{c['resent']} messages sent again")
    return ", ".join(parts)
