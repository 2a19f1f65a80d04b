"""User values echoed in error lines, kept short: the one place that cuts them.

An error names the field and echoes what the user gave (``got 'five'``). A value can be
anything a file holds — a 10 kB string as a node id, a list of a million numbers — and an
error line must stay one readable line. :func:`shown` is a value's ``repr`` cut in the
middle past :data:`MAX_SHOWN` characters, saying how long it was; :func:`shorten` applies
the same cut to every quoted value (and every overlong unbroken run of characters) of a
finished message. :class:`starling.node.params.ConfigError` passes its message through
:func:`shorten`, and the ``starling`` command does the same for every error line it prints,
so no message needs to remember to.
"""

from __future__ import annotations

import re
import reprlib
from typing import Any

__all__ = ["MAX_SHOWN", "name_too_long_line", "one_line", "shorten", "shown"]

MAX_SHOWN = 100
"""Longest echoed value kept whole: as long as the longest name (a node id, an experiment
name) may be, so a valid name is always shown in full."""

MAX_RUN = 200
"""Longest run of non-blank characters outside quotes kept whole (a number's digits, a
list written without spaces)."""

_HEAD, _TAIL = 60, 20

# A quoted value as repr() writes it: a quote not right after a letter, digit or quote (so
# the apostrophe of "node's" opens nothing), up to the same quote, escapes skipped.
_QUOTED = re.compile(r"""(?<![\w'"])(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""", re.DOTALL)
_RUN = re.compile(rf"\S{{{MAX_RUN + 1},}}")


# Every character str.splitlines() breaks at, and the other C0/C1 controls: a key or value
# that holds one, written raw into an error line, would split it or move the terminal's cursor.
_BREAKS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(message: str) -> str:
    """``message`` with each line break and control character written as its escape
    (``\\n``, ``\\x1b``), so a name or value that holds one cannot break the line it is
    echoed in. Tabs are kept."""
    return _BREAKS.sub(lambda m: repr(m.group(0))[1:-1], message)


def _cut(text: str, length: int, limit: int) -> str:
    """``text`` (already quoted, or a bare run) cut in the middle when over ``limit``."""
    if len(text) <= limit:
        return text
    quote = text[0] if text[0] in "'\"" and text[-1] == text[0] and len(text) > 1 else ""
    body = text[1:-1] if quote else text
    return f"{quote}{body[:_HEAD]}…{body[-_TAIL:]}{quote} ({length:,} characters)"


_CONTAINER = reprlib.Repr()
_CONTAINER.maxlevel, _CONTAINER.maxlist, _CONTAINER.maxtuple = 3, 8, 8
_CONTAINER.maxdict, _CONTAINER.maxset, _CONTAINER.maxother = 8, 8, MAX_SHOWN
_CONTAINER.maxstring = MAX_SHOWN
"""A list or mapping is shown from its first items, never walked whole: a file's value may
be a million numbers, or (through YAML aliases) a few lists shared a billion times over."""


def shown(value: Any) -> str:
    """``repr(value)``, or for one longer than :data:`MAX_SHOWN` characters its start and
    end around an ellipsis, with the full length: ``'aaaa…aaaa' (10,000 characters)``. A
    container is shown by its first items and how many it holds."""
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        text = _CONTAINER.repr(value)
        if len(text) > MAX_SHOWN:
            text = text[: MAX_SHOWN - 1] + "…"
        return text + (f" ({len(value):,} items)" if len(value) > _CONTAINER.maxlist else "")
    text = repr(value)
    length = len(value) if isinstance(value, str) else len(text)
    return _cut(text, length, MAX_SHOWN + 2 if isinstance(value, str) else MAX_SHOWN)


def shorten(message: str) -> str:
    """``message`` on one line (:func:`one_line`), with each quoted value longer than
    :data:`MAX_SHOWN` characters, and each run of more than :data:`MAX_RUN` non-blank
    characters, cut as :func:`shown` cuts."""
    message = one_line(message)
    if len(message) <= MAX_SHOWN:
        return message

    def quoted(match: re.Match[str]) -> str:
        text = match.group(0)
        return _cut(text, len(text) - 2, MAX_SHOWN + 2)

    message = _QUOTED.sub(quoted, message)
    return _RUN.sub(lambda m: _cut(m.group(0), len(m.group(0)), MAX_RUN), message)


def name_too_long_line(exc: OSError) -> str:
    """The one line for a path given with a name longer than the file system takes, which
    ``Path.exists()`` and its kin raise rather than answer (both commands' guards)."""
    return f"{shown(str(exc.filename))}: {exc.strerror or exc}; not a path this system can use"
