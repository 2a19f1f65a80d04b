"""Per-link counters, updated by link threads and servicer threads, read by ``Status``."""

from __future__ import annotations

import threading

from node.protocol.contract import LinkCounters

__all__ = ["LinkCounters", "StatsBook"]


class StatsBook:
    """Counters per peer, one book for outbound links and one for inbound links."""

    MAX_PEERS = 256
    """Inbound counters are keyed by the sender a message *claims*; past this many distinct
    names, strangers share one entry so a misbehaving client cannot grow the book."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._links: dict[str, LinkCounters] = {}

    def add(self, peer: str, field: str, amount: int = 1, error: str = "") -> int:
        """Add to one counter; returns its new value."""
        with self._lock:
            counters = self._entry(peer)
            value = getattr(counters, field) + amount
            setattr(counters, field, value)
            if error:
                counters.last_error = error
            return value

    def note_staleness(self, peer: str, staleness: int) -> None:
        with self._lock:
            counters = self._entry(peer)
            counters.max_staleness = max(counters.max_staleness, staleness)

    def ensure(self, peer: str) -> None:
        with self._lock:
            self._entry(peer)

    def _entry(self, peer: str) -> LinkCounters:
        if peer not in self._links and len(self._links) >= self.MAX_PEERS:
            peer = "<other>"
        return self._links.setdefault(peer, LinkCounters())

    def snapshot(self) -> dict[str, LinkCounters]:
        with self._lock:
            return {peer: c.copy() for peer, c in sorted(self._links.items())}

    def reset(self) -> None:
        with self._lock:
            self._links.clear()
