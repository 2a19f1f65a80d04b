"""Per-link counters, updated by the links (on the node's event loop) and the servicers, read by
``Status``."""

from __future__ import annotations

import threading

from starling.node.protocol.contract import LinkCounters

__all__ = ["FaultTally", "LinkCounters", "StatsBook"]


class StatsBook:
    """Counters per peer, one book for outbound links and one for inbound links."""

    MAX_PEERS = 256
    """Inbound counters are keyed by the sender a message *claims*; past this many distinct
    names, strangers share one entry so a misbehaving client cannot grow the book."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._links: dict[str, LinkCounters] = {}

    def add(self, peer: str, field: str, amount: int = 1, error: str = "", nbytes: int = 0) -> int:
        """Add to one counter (and ``nbytes`` to the link's bytes); returns its new value."""
        with self._lock:
            counters = self._entry(peer)
            value = getattr(counters, field) + amount
            setattr(counters, field, value)
            if nbytes:
                counters.bytes += nbytes
            if error:
                counters.last_error = error
            return value

    def file(self, peer: str, outcome: str, nbytes: int = 0) -> None:
        """A message (``received``) or notice (``withheld``) filed for a round not run
        yet: counted, and counted as pending until :meth:`settle` - in one step, so a
        snapshot never shows one without the other."""
        with self._lock:
            counters = self._entry(peer)
            setattr(counters, outcome, getattr(counters, outcome) + 1)
            pending = f"pending_{outcome}"
            setattr(counters, pending, getattr(counters, pending) + 1)
            counters.bytes += nbytes
            counters.pending_bytes += nbytes

    def settle(self, peer: str, outcome: str, nbytes: int = 0, count: int = 1) -> None:
        """``count`` filed messages (``nbytes`` in all) whose round was run (or closed):
        no longer pending."""
        with self._lock:
            counters = self._entry(peer)
            pending = f"pending_{outcome}"
            setattr(counters, pending, getattr(counters, pending) - count)
            counters.pending_bytes -= nbytes

    def note_staleness(self, peer: str, staleness: int) -> None:
        with self._lock:
            counters = self._entry(peer)
            counters.max_staleness = max(counters.max_staleness, staleness)

    def ensure(self, peer: str) -> None:
        with self._lock:
            self._entry(peer)

    def _entry(self, peer: str) -> LinkCounters:
        counters = self._links.get(peer)
        if counters is None:
            if len(self._links) >= self.MAX_PEERS:
                peer = "<other>"
            counters = self._links.setdefault(peer, LinkCounters())
        return counters

    def snapshot(self) -> dict[str, LinkCounters]:
        with self._lock:
            return {peer: c.copy() for peer, c in sorted(self._links.items())}

    def reset(self) -> None:
        with self._lock:
            self._links.clear()


class FaultTally:
    """Faults applied through Control, by kind (``link_cut``, ``link_restore``,
    ``link_drop``, ``link_delay``, ``hold``, ``peer_down``, ``peer_up``): what the metrics
    endpoint exports as ``starling_faults_applied_total``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}

    def add(self, kind: str) -> None:
        with self._lock:
            self._counts[kind] = self._counts.get(kind, 0) + 1

    def link_change(self, up: bool | None, drop: float | None, delay_ms: float | None) -> None:
        """A ``SetLink``: a cut, a restore, a drop probability, a delay (any of them)."""
        given = {
            "link_cut": up is False,
            "link_restore": up is True,
            "link_drop": bool(drop),
            "link_delay": bool(delay_ms),
        }
        for kind, applied in given.items():
            if applied:
                self.add(kind)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._counts.items()))
