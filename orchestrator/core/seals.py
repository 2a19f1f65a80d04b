"""Records the orchestrator writes for itself and reads back later, sealed with a key of
the user's own, so that a file is data, never an order.

``run.json`` tells the live commands (``starling status|links|nodes|stop``) where a run's
nodes listen and which TLS files or token reach them; ``start.json`` tells ``starling
collect`` the same of a run whose orchestrator died. Whoever can write such a file could
make those commands send the user's credentials to an address of their choosing. So each
is sealed when written — an HMAC-SHA256 of its canonical JSON under a key only the user can
read (``$STARLING_HOME/record.key``, default ``~/.starling``, 32 random bytes, made owner-only
on first use) — and a command that dials a node refuses a record whose seal does not match:
a record another user wrote, one changed since, or one with no seal. In the compose testbed
the run's user is ``starling``; a live command run as another user (``docker compose exec``
runs as root) is refused in one line that names the form that works.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from starling.node.params import ConfigError

__all__ = ["SEAL", "check_seal", "key_path", "sealed"]

SEAL = "seal"
"""The record's field holding its seal."""


def key_path() -> Path:
    return Path(os.environ.get("STARLING_HOME", Path.home() / ".starling")) / "record.key"


def _key(create: bool) -> bytes | None:
    path = key_path()
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        if not create:
            return None
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first: use theirs
            return path.read_bytes()
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(32))
        return path.read_bytes()
    return key if len(key) >= 32 else None


def _digest(key: bytes, body: Mapping[str, Any]) -> str:
    plain = {k: v for k, v in body.items() if k != SEAL}
    text = json.dumps(plain, sort_keys=True, separators=(",", ":"), default=str)
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def sealed(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with its seal, under this user's key (made on first use)."""
    key = _key(create=True)
    assert key is not None
    return {**body, SEAL: _digest(key, body)}


def check_seal(body: Mapping[str, Any], path: Path, use: str) -> None:
    """Refuse ``body`` (read from ``path``) unless this user's key sealed it as it is;
    ``use``: what the command would do with it, for the line that says why not."""
    key = _key(create=False)
    given = body.get(SEAL)
    if (
        key is not None
        and isinstance(given, str)
        and hmac.compare_digest(given, _digest(key, body))
    ):
        return
    raise ConfigError(
        f"{path}: not a record this user's starling wrote (its seal does not match "
        f"{key_path()}), so it is not trusted to {use}; run the command as the user who "
        "started the run (in the compose testbed: docker compose exec -u starling "
        "orchestrator starling ...)"
    )
