"""What the orchestrator tells its user as a run goes: text lines, or JSON objects.

``starling run|simulate|collect --log-format json`` turns every progress line (the ones
``say`` prints) and every log record into one JSON object per line on stdout, with the
fields of :mod:`starling.node.logs` — ``time``, ``level``, ``message``, ``event``, ``node``,
``experiment``, ``round``, ``peer``. The account passes what it knows (a node event names
its node and event); for the run loop's progress line ``round LOW..HIGH of N`` the round
is LOW, the round every node has reached. The summary at the end of a run is one object of
event ``summary`` whose ``figures`` hold what its table shows (status, W2 per node, ESS and
R-hat, the links' counters, the account's lines...), not the table as a string. Node
processes the local backend starts log in the same format (their ``nodes/<id>.log``). Text
stays the default.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

from starling.node import logs

__all__ = ["current_format", "say", "use_format"]

log = logging.getLogger("starling.orchestrator")

_format = ["text"]
_PROGRESS = re.compile(r"^round (\d+)\.\.(\d+) of \d+")


def use_format(fmt: str) -> None:
    """Text (the default) or json for everything this process says and logs from now on."""
    _format[0] = fmt
    logs.setup(fmt, "INFO", sys.stdout if fmt == "json" else sys.stderr)


def current_format() -> str:
    """``text`` or ``json``: local node processes are started with the same."""
    return _format[0]


def say(message: str, **fields: Any) -> None:
    """One progress line; ``fields`` (node, event, round, peer) go into the JSON form."""
    if _format[0] != "json":
        print(message, flush=True)
        return
    match = _PROGRESS.match(message)
    if match and "round" not in fields:
        fields = {"round": int(match.group(1)), "event": "progress", **fields}
    known = (*logs.FIELDS, *logs.OPTIONAL_FIELDS)
    extra = {k: v for k, v in fields.items() if k in known}
    if "figures" in fields:  # a summary: its figures as fields, its text's first line said
        message = message.splitlines()[0] if message else message
    log.info(message, extra=extra)


say.takes_fields = True  # type: ignore[attr-defined]  # the account passes its fields
