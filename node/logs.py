"""Log lines for people (``text``, the default) or for log shippers (``json``).

``--log-format json`` writes one JSON object per line with the fields ``time`` (UTC,
ISO 8601 with milliseconds), ``level``, ``logger``, ``message``, ``event``, ``node``,
``experiment``, ``round`` and ``peer`` — ``null`` where not known. ``node`` and
``experiment`` come from the process's context (:func:`set_context`: a node process serves
one node; the orchestrator names its experiment), the others from the ``extra`` a call
passes (``log.info(..., extra={"event": "configured", "round": 3, "peer": "b"})``).
``event`` is a short stable name for what happened; a line without one is ``"log"``. A
field of :data:`OPTIONAL_FIELDS` appears only on the lines that give it (``verdict`` on the
orchestrator's ``"event": "verdict"`` line at the end of a run).

Secrets never appear, in either format: what the process knows to be secret (a Control
token, the run's peer secret) is registered with :func:`redact` and replaced by
``[redacted]`` in every line, whatever logged it; keys and certificates are only ever
named by path.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Iterable
from typing import IO, Any

__all__ = [
    "FORMATS",
    "JsonFormatter",
    "TextFormatter",
    "redact",
    "redact_run",
    "set_context",
    "setup",
]

FORMATS = ("text", "json")
FIELDS = ("event", "node", "experiment", "round", "peer")
OPTIONAL_FIELDS = ("verdict",)
"""Fields a JSON line carries only when its call gives them (the orchestrator's verdict of a
finished run: its line says converged, not converged or diverged as a field of its own)."""
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


def _scrub(text: str) -> str:
    with _secrets_lock:
        secrets = (*_secrets, *(secret for run in _run_secrets for secret in run))
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


class TextFormatter(logging.Formatter):
    """The default format, with secrets scrubbed."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

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
