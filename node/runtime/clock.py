"""The clock a node's deadlines are read on, and waited on: real time in a node, a test's own.

A deadline (a round's gather, a held message's expiry, a live delay) is a reading of a
clock's :meth:`~Clock.now`; a wait for something to arrive before it lasts until woken or
until a timeout *on that clock*. A node runs on :data:`MONOTONIC` (``time.monotonic`` and
the waited-on object's own ``wait``). A test hands its own clock, one that moves only when
the code waits on it, and checks deadline logic to the instant, without sleeping.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["MONOTONIC", "Clock", "MonotonicClock", "Waitable"]


class Waitable(Protocol):
    """What a clock waits on: a ``threading.Condition`` (its lock held) or ``Event``."""

    def wait(self, timeout: float | None = None) -> bool: ...


class Clock(Protocol):
    def now(self) -> float:
        """Seconds, from an arbitrary start; never goes back."""
        ...

    def wait(self, on: Waitable, timeout: float) -> None:
        """Wait on ``on`` until it is woken or ``timeout`` seconds of this clock have
        passed, whichever comes first (a caller re-checks what it waits for)."""
        ...


class MonotonicClock:
    """Real time: ``time.monotonic`` and ``on.wait(timeout)``."""

    def now(self) -> float:
        return time.monotonic()

    def wait(self, on: Waitable, timeout: float) -> None:
        on.wait(timeout)


MONOTONIC: Clock = MonotonicClock()
"""The clock of every node process."""
