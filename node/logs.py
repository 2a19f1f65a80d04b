"""Log lines for people (``text``, the default) or for log shippers (``json``).

``--log-format json`` writes one JSON object per line with the fields ``time`` (UTC,
ISO 8601 with milliseconds), ``level``, ``logger``, ``message``, ``event``, ``node``,
``experiment``, ``round`` and ``peer`` — ``null`` where not known. ``node`` and
``experiment`` come from the process's context (:func:`set_context`: a node process serves
one node; the orchestrator names its experiment), the others from the ``extra`` a call
passes (``log.info(..., extra={"event": "configured", "round": 3, "peer": "b"})``).
``event`` is a short stable name for what happened; a line without one is ``"log"``. A
field of :data:`OPTIONAL_FIELDS` appears only on the lines that give it (the orchestrator's
``"event": "summary"`` line at the end of a run carries the run's ``verdict`` and its
``figures``).

Standard output may close before the process is done with it (``starling status | head
-3``, a node's ``serve | head -1``): :func:`quiet_when_closed` makes every later write to it
vanish instead of raising ``BrokenPipeError`` in the middle of a run or a shutdown.

Secrets never appear, in either format: what the process knows to be secret (a Control
token, the run's peer secret) is registered with :func:`redact` and replaced by
``[redacted]`` in every line, whatever logged it; keys and certificates are only ever
named by path.

No value can forge a line, in either format: a record is always one line. JSON escapes
what it holds; in text, the message's control characters (a newline in an experiment name
or a peer id, a carriage return, an escape sequence) are written as escapes (``\n``,
``\x1b``), and an exception's traceback follows on lines that begin with ``  | ``, which
no record's first line does.
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Iterable
from typing import IO, Any

__all__ = [
    "FORMATS",
    "ClosedQuietly",
    "JsonFormatter",
    "TextFormatter",
    "escape",
    "redact",
    "quiet_when_closed",
    "redact_run",
    "set_context",
    "setup",
]

FORMATS = ("text", "json")
FIELDS = ("event", "node", "experiment", "round", "peer")
OPTIONAL_FIELDS = ("verdict", "figures")
"""Fields a JSON line carries only when its call gives them: the orchestrator's summary of a
finished run has its verdict (converged, not converged or diverged) and its figures as
fields of their own."""
REDACTED = "[redacted]"

_context: dict[str, Any] = {}
_secrets: set[str] = set()
_run_secrets: list[frozenset[str]] = []
"""A node's secrets of its current run and of the run before it (:func:`redact_run`)."""
_secrets_lock = threading.Lock()


def set_context(**fields: Any) -> None:
    """Fields every later line carries unless its call says otherwise (node, experiment)."""
    _context.update({k: v for k, v in fields.items() if k in FIELDS})


def redact(secret: str) -> None:
    """Never write ``secret`` (at least 4 characters) in a log line from now on."""
    if secret and len(secret) >= 4:
        with _secrets_lock:
            _secrets.add(secret)


def redact_run(secrets: Iterable[str]) -> None:
    """Like :func:`redact`, for the secrets of the run a node is configured for: they
    replace those of the run before the last, so a node that serves run after run keeps two
    runs' secrets, not every run's (which grew its memory, and the cost of every log line,
    with each Configure)."""
    kept = frozenset(secret for secret in secrets if secret and len(secret) >= 4)
    with _secrets_lock:
        _run_secrets[:] = [*_run_secrets[-1:], kept]


_ESCAPES = {"\n": "\\n", "\r": "\\r"}


def escape(text: str) -> str:
    """``text`` with every character that could end or rewrite a line (C0 controls but
    tab, DEL, NEL and the Unicode line and paragraph separators) written as an escape."""
    if text.isprintable():
        return text
    return "".join(
        _ESCAPES.get(char)
        or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")
        if _breaks(char)
        else char
        for char in text
    )


def _breaks(char: str) -> bool:
    code = ord(char)
    return (code < 0x20 and char != "\t") or code in (0x7F, 0x85, 0x2028, 0x2029)


def _scrub(text: str) -> str:
    with _secrets_lock:
        secrets = (*_secrets, *(secret for run in _run_secrets for secret in run))
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


class TextFormatter(logging.Formatter):
    """The default format, with secrets scrubbed and no line forged (see module)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = escape(record.message)
        return super().formatMessage(record)

    def formatException(self, ei) -> str:  # type: ignore[no-untyped-def]  # noqa: N802
        text = super().formatException(ei)
        return "\n".join("  | " + escape(line) for line in text.splitlines())

    def formatStack(self, stack_info: str) -> str:  # noqa: N802 - logging's name
        return "\n".join("  | " + escape(line) for line in stack_info.splitlines())

    def format(self, record: logging.LogRecord) -> str:
        return _scrub(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        created = time.gmtime(record.created)
        entry: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", created) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            entry[name] = value if value is not None else _context.get(name)
        if entry["event"] is None:
            entry["event"] = "log"
        for name in OPTIONAL_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        # Scrubbed before encoding: a secret holding a quote or a backslash would not be
        # found again once JSON escaped it.
        entry = {k: _scrub(v) if isinstance(v, str) else v for k, v in entry.items()}
        return _scrub(json.dumps(entry, default=str, ensure_ascii=False))


def setup(fmt: str = "text", level: str | int = "INFO", stream: IO[str] | None = None) -> None:
    """Send the root logger's records to ``stream`` (stderr) in ``fmt``."""
    if fmt not in FORMATS:
        raise ValueError(f"log format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)


class ClosedQuietly(io.TextIOBase):
    """A text stream that passes writes on to ``stream`` until its reader goes away; then
    (``BrokenPipeError``) the file descriptor is pointed at ``/dev/null``, so that nothing
    later — a print, a log handler, rich, the interpreter's last flush — fails on it, and
    the work goes on to its end with its own exit code."""

    def __init__(self, stream: IO[str]):
        super().__init__()
        self.stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self.stream.write(text)
            except BrokenPipeError:
                self._silence()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._silence()

    def _silence(self) -> None:
        self.gone = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass

    def isatty(self) -> bool:
        return not self.gone and self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")


def quiet_when_closed() -> None:
    """From now on, ``sys.stdout`` ends quietly if its reader goes away (:class:`ClosedQuietly`)."""
    if not isinstance(sys.stdout, ClosedQuietly) and sys.stdout is not None:
        sys.stdout = ClosedQuietly(sys.stdout)
