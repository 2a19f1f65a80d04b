"""Control tokens: one per node, derived from a master the orchestrator holds.

The orchestrator's ``token_file`` holds a *master* secret; node ``X``'s ``--token-file``
holds ``X``'s own token, :func:`node_token` of the master and ``X``:
``stn1.`` + hex HMAC-SHA256(master, "starling control token v1" NUL X). The orchestrator
derives each node's token from the master when it calls that node, so a node's token file
opens that node's Control only: a copy taken from one device opens no other. ``starling
certs tokens DIR --nodes a,b,c`` writes a master and the nodes' files.

A node's token file is re-read whenever it changes (:class:`NodeTokens`; its size, time or
inode): a token is rotated by writing the new one, and revoked by removing its line, with
no restart. The file may list several tokens, one a line (``#`` starts a comment), all
accepted: put the new token beside the old one, switch the orchestrator to the new master,
then remove the old one. A file that can no longer be read, or holds no token, admits no
one until it is fixed (logged, never silently open).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
from pathlib import Path

from starling.node.logs import redact
from starling.node.params import ConfigError
from starling.node.security import check_header_value, read_token

__all__ = ["NODE_TOKEN_PREFIX", "NodeTokens", "node_token", "read_master", "read_node_tokens"]

log = logging.getLogger("starling.node")

NODE_TOKEN_PREFIX = "stn1."
"""How a node's own token begins (a master never does): a node refuses a master given as
its token file, and the orchestrator a node's token given as the master."""

_LABEL = b"starling control token v1\x00"


def node_token(master: str, node_id: str) -> str:
    """Node ``node_id``'s Control token under ``master``."""
    digest = hmac.new(master.encode(), _LABEL + node_id.encode(), hashlib.sha256).hexdigest()
    return NODE_TOKEN_PREFIX + digest


def read_master(path: str, where: str) -> str:
    """The master in the orchestrator's token file; a node's token there is refused (it
    would be sent to every node, and none would take it)."""
    master = read_token(path, where)
    if master.startswith(NODE_TOKEN_PREFIX):
        raise ConfigError(
            f"{where}: {path!r} holds a node's token ({NODE_TOKEN_PREFIX}...), not the master "
            "the nodes' tokens derive from (starling certs tokens writes both)"
        )
    return master


def read_node_tokens(path: str, where: str) -> tuple[str, ...]:
    """The tokens a node's file lists (one a line, ``#`` comments); ConfigError naming the
    field when it cannot be read or holds something that is no node token."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read {path!r} ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: {path!r} is not text") from None
    tokens = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.partition("#")[0].strip()
        if not line:
            continue
        check_header_value(line, f"{where}: {path!r} line {number} holds")
        if not line.startswith(NODE_TOKEN_PREFIX):
            raise ConfigError(
                f"{where}: {path!r} line {number} is not a node's own token ({NODE_TOKEN_PREFIX}"
                "...): a token shared by every node would let one node's file open them all "
                "(starling certs tokens DIR --nodes ... writes one per node)"
            )
        tokens.append(line)
    if not tokens:
        raise ConfigError(f"{where}: {path!r} holds no token")
    for token in tokens:
        redact(token)
    return tuple(tokens)


class NodeTokens:
    """The tokens a node accepts, from its file, read again whenever the file changes."""

    def __init__(self, path: str, where: str = "token_file"):
        self.path = path
        self.where = where
        self._lock = threading.Lock()
        self._seen = self._stamp()
        self._tokens = read_node_tokens(path, where)  # a bad file at start: one line, no node
        self._broken = ""

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return (info.st_mtime_ns, info.st_size, info.st_ino)

    def current(self) -> tuple[str, ...]:
        """The tokens accepted now (none while the file is unreadable or holds none)."""
        stamp = self._stamp()
        with self._lock:
            if stamp != self._seen:
                self._seen = stamp
                self._reload()
            return self._tokens

    def _reload(self) -> None:
        try:
            tokens = read_node_tokens(self.path, self.where)
        except ConfigError as exc:
            self._tokens = ()
            if str(exc) != self._broken:
                self._broken = str(exc)
                log.error(
                    "%s; Control admits no one until it is fixed",
                    exc,
                    extra={"event": "token_file_broken"},
                )
            return
        changed = tokens != self._tokens
        self._tokens, self._broken = tokens, ""
        if changed:
            log.warning(
                "%s: %s changed; it now lists %d token(s)",
                self.where,
                self.path,
                len(tokens),
                extra={"event": "token_file_changed"},
            )

    def accepts(self, given: str) -> bool:
        """Whether ``given`` is one of the tokens (each compared in constant time)."""
        found = False
        for token in self.current():
            found |= hmac.compare_digest(given.encode(errors="replace"), token.encode())
        return found
