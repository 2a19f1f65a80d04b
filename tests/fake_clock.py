"""A clock that moves only when the code under test waits on it, or the test moves it.

Deadline logic takes a clock (a round's gather, :mod:`starling.node.runtime.clock`; a link's
hold time; the orchestrator's patience with a silent node; the pauses between retries).
Handed a :class:`FakeClock`, it is checked to the instant — a wait lasts exactly its timeout,
a deadline falls exactly where it should — without sleeping, and without a wall-clock bound
that a loaded machine breaks.

What would happen meanwhile in another thread (a message arriving, a node stopped) is
scheduled on the clock with :meth:`FakeClock.at`: a wait whose timeout reaches it moves the
clock there and runs it, in the waiting thread, and returns as a woken wait does (the code
re-checks what it waits for). A condition's lock is re-entrant, so the action may take it.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

__all__ = ["FakeClock"]


class FakeClock:
    """``clock()`` or ``clock.now()`` reads it; ``wait`` and ``sleep`` move it."""

    def __init__(self, start: float = 1000.0):
        self._now = start
        self._due: list[tuple[float, int, Callable[[], object]]] = []
        self._order = itertools.count()
        self.waits: list[float] = []
        """Every timeout waited on (:meth:`wait`) or slept (:meth:`sleep`), in order."""

    def now(self) -> float:
        return self._now

    __call__ = now  # a plain Callable[[], float], where code takes ``clock=time.monotonic``

    def at(self, when: float, action: Callable[[], object]) -> None:
        """Run ``action`` when the clock reaches ``when`` (in whichever wait gets there)."""
        heapq.heappush(self._due, (when, next(self._order), action))

    def advance(self, seconds: float) -> None:
        """Move on by ``seconds``, running what is due on the way, in order."""
        end = self._now + seconds
        while self._due and self._due[0][0] <= end:
            when, _, action = heapq.heappop(self._due)
            self._now = max(self._now, when)
            action()
        self._now = end

    def sleep(self, seconds: float) -> None:
        """``time.sleep`` on this clock."""
        self.waits.append(seconds)
        self.advance(seconds)

    def wait(self, on: object, timeout: float) -> None:
        """``on.wait(timeout)`` with nothing else running: the clock moves to the first
        action due within ``timeout`` and runs it (a wake-up), or by the whole timeout."""
        self.waits.append(timeout)
        end = self._now + timeout
        if self._due and self._due[0][0] <= end:
            when, _, action = heapq.heappop(self._due)
            self._now = max(self._now, when)
            action()
        else:
            self._now = end
