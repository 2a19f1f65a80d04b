"""SIGTERM handled as Ctrl-C is, by ``run`` and ``simulate`` alike: the work stops, what was
done is kept and written, the run ends ``interrupted`` with exit 130
(docs/reference/exit-codes.md)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Terminated", "raise_terminated", "sigterm_interrupts"]


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where a Ctrl-C would be."""


def raise_terminated(signum, frame):  # pragma: no cover - signal path
    raise Terminated()


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` inside the block (in the main thread, the only one
    that may set a handler; elsewhere nothing changes); the previous handler is back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
