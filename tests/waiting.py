"""Waiting on a condition instead of a fixed sleep.

:func:`wait_until` returns as soon as the condition holds (fails naming it after
``timeout``); :func:`holds_for` checks that something stays true over a stretch of time
(that a held node stays put, that a node keeps waiting a deadline per round) and fails at
the first moment it does not. Both poll at ``every`` seconds: a polling interval, never an
assumption about how long the system takes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["holds_for", "wait_until"]


def wait_until(
    condition: Callable[[], bool], timeout: float, what: str = "the condition", every: float = 0.05
) -> float:
    """Poll ``condition`` until true; returns the time it took, fails naming ``what``."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)
    return time.monotonic() - start


def holds_for(
    condition: Callable[[], bool], seconds: float, what: str = "the condition", every: float = 0.05
) -> None:
    """Poll ``condition`` for ``seconds``; fails naming ``what`` the first time it is false."""
    end = time.monotonic() + seconds
    while True:
        if not condition():
            raise AssertionError(f"{what} stopped holding")
        if time.monotonic() >= end:
            return
        time.sleep(every)
