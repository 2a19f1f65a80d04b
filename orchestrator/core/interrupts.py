"""Ctrl-C and SIGTERM during ``run`` and ``simulate``: the work stops, what was done is kept
and written, the run ends ``interrupted`` with exit 130 (docs/reference/exit-codes.md).

Inside :func:`interrupts_remembered` both signals raise at once, as Python's own Ctrl-C does
(SIGTERM as :class:`Terminated`), and are also remembered. The remembering is for the case
Python cannot raise: a signal whose handler runs inside a finaliser (an object's
``__del__``, which gRPC's call objects have, run when the last reference goes) has its
exception printed as "Exception ignored" and dropped. Before, the run then went on sampling
to its last round as if no key had been pressed. The loops that go round (the rounds'
watch, the simulated rounds) call :func:`raise_remembered` each turn, which raises such a
lost interrupt again.

Inside :func:`interrupts_deferred` (a gRPC call made from the main thread) a signal is not
raised where it lands but when the block ends. An exception raised inside gRPC's own code
can leave a lock of the call's channel taken: every later call on that channel, the Stop and
the collection that follow a Ctrl-C among them, then waited for ever whatever its deadline,
and the run never ended. Such a block lasts at most its call's deadline.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Terminated", "interrupts_deferred", "interrupts_remembered", "raise_remembered"]


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where a Ctrl-C would be."""


_remembered: list[int] = []
"""Signals received inside :func:`interrupts_remembered` and not yet raised by
:func:`raise_remembered` (a list: appending is atomic for the handler)."""


_deferred: list[int] = []
"""Signals received inside :func:`interrupts_deferred`, raised when its block ends."""
_deferring = [0]
"""How deep the main thread is in :func:`interrupts_deferred` blocks (only the main thread
runs a signal handler, and only it counts here)."""


def _interrupt(signum: int) -> KeyboardInterrupt:
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _raise_and_remember(signum, frame):  # pragma: no cover - signal path
    _remembered.append(signum)
    if _deferring[0]:
        _deferred.append(signum)
        return
    raise _interrupt(signum)


def raise_remembered() -> None:
    """Raise an interrupt received since the block began, if there was one, once.

    Called where a raise that reached its ``except`` never comes back to (the loop it broke
    out of), so the normal case raises nothing here; a signal whose raise was dropped is
    raised now, as the interrupt it was."""
    if _remembered:
        signum = _remembered[0]
        _remembered.clear()
        _deferred.clear()
        raise _interrupt(signum)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """A Ctrl-C or SIGTERM that comes inside the block (on the main thread, inside
    :func:`interrupts_remembered`) is raised as the block ends, not inside it: around a call
    into gRPC, whose locks an exception raised inside it can leave taken (see module). The
    block must end in bounded time: a call with a deadline. On any other thread it changes
    nothing (no signal is raised there). Without an exception of its own the block raises
    the first deferred signal; with one, that exception goes on and the signal stays
    deferred to the next block's end or :func:`raise_remembered`."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _deferring[0] += 1
    try:
        yield
    finally:
        _deferring[0] -= 1
    if not _deferring[0] and _deferred:
        signum = _deferred[0]
        _deferred.clear()
        _remembered.clear()
        raise _interrupt(signum)


@contextmanager
def interrupts_remembered() -> Iterator[None]:
    """Ctrl-C raises :class:`KeyboardInterrupt` and SIGTERM :class:`Terminated` inside the
    block, each also remembered for :func:`raise_remembered`. Only the main thread may set a
    handler: elsewhere nothing changes. The previous handlers are back after the block."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _remembered.clear()
    _deferred.clear()
    # A Ctrl-C this process was started to ignore (``nohup``, a background job) stays ignored.
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    caught = (signal.SIGTERM,) if ignored else (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.signal(signum, _raise_and_remember) for signum in caught}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _remembered.clear()
        _deferred.clear()
