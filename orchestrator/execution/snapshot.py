"""One look at a running experiment that never contradicts itself, for ``starling status``
and ``starling status --watch``.

Every node is asked for its status at once (one thread per node, :func:`read_all`), not one
after another: a refresh that asked node 0, then node 1 a moment later, mixed moments, and a
link showed more messages delivered than sent. Asking at once narrows the gap but cannot
close it (two nodes never answer at the same instant), so a look is two rounds of questions:
the receivers' books (what arrived) are taken from the first, the senders' books (what was
sent) and every node's state from the second. What arrived by the first moment was sent by
then, so every link shows ``delivered + late <= sent``, whatever the network does between
the two. Each link carries the rounds its two ends were at (``as_of``): the same, or marked
as different.

Counters are read as the nodes count them (:mod:`starling.orchestrator.results.link_books`),
added to what a restarted node's earlier processes counted (the run's journal,
:func:`starling.orchestrator.execution.live.carried_books`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from starling.orchestrator.core.errors import NodeUnavailable
from starling.orchestrator.execution import live
from starling.orchestrator.execution.client import NodeClient, NodeStatus
from starling.orchestrator.results.link_books import link_summary, summed_books

__all__ = ["FINISHED_STATES", "Poller", "Snapshot", "read_all"]

T = TypeVar("T")

MAX_THREADS = 32
"""Nodes asked at once; more wait for a free thread (a status is a few milliseconds)."""

FINISHED_STATES = ("done", "failed", "stopped")
"""A node's states once its rounds are over: its process may end after, and is then not
*unreachable* but finished."""


def read_all(
    clients: Mapping[str, NodeClient],
    call: Callable[[NodeClient], T],
    pool: ThreadPoolExecutor | None = None,
) -> dict[str, T | NodeUnavailable]:
    """``call`` on every client at once: node -> its answer, or the NodeUnavailable it
    raised. ``pool``: threads to use (one is made for the call without it)."""
    own = pool is None
    pool = pool or ThreadPoolExecutor(max_workers=max(1, min(MAX_THREADS, len(clients))))
    try:
        futures = {node: pool.submit(call, client) for node, client in clients.items()}
        answers: dict[str, T | NodeUnavailable] = {}
        for node, future in futures.items():
            try:
                answers[node] = future.result()
            except NodeUnavailable as exc:
                answers[node] = exc
        return answers
    finally:
        if own:
            pool.shutdown(wait=False)


@dataclass
class Snapshot:
    """A run at one look: every node's state and every link's counters."""

    nodes: dict[str, dict] = field(default_factory=dict)
    """Node -> its status as plain data (``state``, ``round``, ``samples_stored``, ...):
    ``unreachable`` with the error, or, for a node last seen finished, that state with
    ``"process": "ended"``."""
    links: dict[str, dict] = field(default_factory=dict)
    """``"A->B"`` -> the counters of :func:`~starling.orchestrator.results.link_books.link_summary`
    and ``as_of``: ``{"sender_round", "receiver_round"}``, the rounds its books were read at
    (None for an end never read)."""


@dataclass
class _Seen:
    """The last status read from a node, kept when it stops answering."""

    status: NodeStatus
    books: dict


class Poller:
    """Consistent looks at the nodes of ``record``'s run (see the module docstring)."""

    def __init__(self, record: live.RunRecord, timeout: float = 3.0, attempts: int = 1):
        from starling.orchestrator.execution.access import access_from_section

        access = access_from_section(record.access, "run record")
        self.clients = {
            node: NodeClient(address, timeout=timeout, access=access, node_id=node)
            for node, address in record.addresses.items()
        }
        self.addresses = dict(record.addresses)
        self.attempts = attempts
        self.pool = ThreadPoolExecutor(max_workers=max(1, min(MAX_THREADS, len(self.clients))))
        self.seen: dict[str, _Seen] = {}
        self.shown: dict[str, dict] = {}
        """Link -> its counters at the last look that read both its ends."""

    def look(self, events: list[dict]) -> Snapshot:
        """One look: the receivers' books first, then the senders' and every node's state
        (``events``: the run's journal so far, for the counters of earlier processes)."""
        carried = live.carried_books(events)
        status = lambda client: client.status(attempts=self.attempts)  # noqa: E731
        first = read_all(self.clients, status, self.pool)
        second = read_all(self.clients, status, self.pool)
        snapshot = Snapshot()
        inbound: dict[str, tuple[dict, int | None]] = {}
        outbound: dict[str, tuple[dict, int | None]] = {}
        for node in self.clients:
            early, late = first[node], second[node]
            books = carried.get(node, {})
            if isinstance(early, NodeStatus):
                inbound[node] = (summed_books(books, early), early.round)
                self.seen[node] = _Seen(early, inbound[node][0])
            if isinstance(late, NodeStatus):
                outbound[node] = (summed_books(books, late), late.round)
                self.seen[node] = _Seen(late, outbound[node][0])
            snapshot.nodes[node] = self._node(node, late if isinstance(late, NodeStatus) else early)
        snapshot.links = self._links(inbound, outbound)
        return snapshot

    def _node(self, node: str, answer: NodeStatus | NodeUnavailable) -> dict:
        address = self.addresses[node]
        if isinstance(answer, NodeStatus):
            return {"address": address, **dataclasses.asdict(answer), "state": _state(answer)}
        last = self.seen.get(node)
        if last is not None and _state(last.status) in FINISHED_STATES:
            # Its rounds were over and its process has ended since: finished, not a crash.
            shown = dataclasses.asdict(last.status)
            return {"address": address, **shown, "state": _state(last.status), "process": "ended"}
        return {
            "address": address,
            "state": "unreachable",
            "round": None if last is None else last.status.round,
            "error": str(answer),
        }

    def _links(
        self,
        inbound: Mapping[str, tuple[dict, int | None]],
        outbound: Mapping[str, tuple[dict, int | None]],
    ) -> dict[str, dict]:
        """Every link from this look where both its ends answered; where one did not, the
        link as the last look that read both showed it (its ``as_of`` rounds say when), or
        with only its sender's counters. A sender's books from one moment beside a
        receiver's from a later one showed more delivered than sent."""
        books = {
            node: {
                "outbound": outbound[node][0]["outbound"] if node in outbound else {},
                "inbound": inbound[node][0]["inbound"] if node in inbound else {},
            }
            for node in {*inbound, *outbound}
        }
        links = {}
        for key, counts in link_summary(books).items():
            sender, receiver = key.split("->", 1)
            counts["as_of"] = {
                "sender_round": outbound[sender][1] if sender in outbound else None,
                "receiver_round": inbound[receiver][1] if receiver in inbound else None,
            }
            if sender in outbound and receiver in inbound:
                self.shown[key] = links[key] = counts
            elif key in self.shown:
                links[key] = self.shown[key]
            elif sender in outbound:
                links[key] = counts
        for key, counts in self.shown.items():
            links.setdefault(key, counts)  # neither end answered this time
        return dict(sorted(links.items()))

    def close(self) -> None:
        self.pool.shutdown(wait=False)
        for client in self.clients.values():
            client.close()


def _state(status: NodeStatus) -> str:
    return str(getattr(status.state, "value", status.state)).lower()
