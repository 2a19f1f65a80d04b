"""gRPC's own log lines, through the node's logger and counted.

gRPC's C core writes its log lines straight to file descriptor 2, past Python's logging: a
refused TLS handshake (``I1127 22:56:09.206678 11209 ssl_transport_security.cc:2563]
Handshake failed with error SSL_ERROR_SSL: ...``), a failed bind. In a node started with
``--log-format json`` they broke the one-object-a-line format, no secret scrubbing applied
to them, and nothing counted the handshakes they reported.

:func:`capture` points fd 2 at a pipe and keeps the real stderr for Python (``sys.stderr``
becomes a duplicate of it, where the node's log handler writes). A thread reads the pipe
line by line and logs each line through the ``grpc.core`` logger, at the level its first
letter gives (E error, W warning, I info, D debug; a line of another shape, from any other
native library, is a warning of ``native``), with ``event`` ``grpc_core``. A line that
reports a failed TLS handshake is counted (``tls:handshake`` in the node's refusals; it
counts the node's own outbound attempts that failed too: gRPC's line does not say which
side it was). Lines from one source line of gRPC are logged the first
:data:`LOG_FIRST` times and then one in :data:`LOG_EVERY`, so a flood of handshakes cannot
flood the log; all are counted.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import sys
import threading

__all__ = ["NativeLog", "capture"]

LOG_FIRST = 10
LOG_EVERY = 1000

_LINE = re.compile(r"^([EWID])\d{4} [\d:.]+\s+\d+\s+([^\]\s]+)\]\s?(.*)$")
_LEVELS = {"E": logging.ERROR, "W": logging.WARNING, "I": logging.INFO, "D": logging.DEBUG}
HANDSHAKE = "tls:handshake"


class NativeLog:
    """What the native log lines counted, for the node's status and metrics."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refused: collections.Counter[str] = collections.Counter()
        self._by_source: collections.Counter[str] = collections.Counter()

    def refusals(self) -> dict[str, int]:
        with self._lock:
            return dict(self._refused)

    def take(self, raw: str) -> None:
        """Log (and count) one line written to fd 2."""
        line = raw.rstrip("\r\n")
        if not line.strip():
            return
        match = _LINE.match(line)
        if match is None:
            logging.getLogger("native").warning("%s", line, extra={"event": "native_stderr"})
            return
        letter, source, message = match.groups()
        with self._lock:
            if "Handshake failed" in message:
                self._refused[HANDSHAKE] += 1
            self._by_source[source] += 1
            seen = self._by_source[source]
        if seen <= LOG_FIRST or seen % LOG_EVERY == 0:
            suffix = f" ({seen} so far from {source})" if seen > LOG_FIRST else ""
            logging.getLogger("grpc.core").log(
                _LEVELS[letter],
                "%s: %s%s",
                source,
                message,
                suffix,
                extra={"event": "grpc_core"},
            )


def capture() -> NativeLog:
    """Route fd 2 through the node's logger (see module); returns what it counts. Call it
    before the log handlers are set up: they write to the ``sys.stderr`` it leaves."""
    native = NativeLog()
    sys.stderr.flush()
    real = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    sys.stderr = os.fdopen(real, "w", buffering=1, encoding="utf-8", errors="backslashreplace")

    def pump() -> None:
        with os.fdopen(read_end, "rb") as pipe:
            for raw in pipe:
                try:
                    native.take(raw.decode("utf-8", errors="backslashreplace"))
                except Exception:  # noqa: BLE001 - the pump must outlive any line
                    pass

    threading.Thread(target=pump, name="native-log", daemon=True).start()
    return native
