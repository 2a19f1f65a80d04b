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
from starling.orchestrator.core.home import HOME_VARIABLE, starling_home

__all__ = ["SEAL", "check_seal", "key_path", "sealed"]

SEAL = "seal"
"""The record's field holding its seal."""


def key_path() -> Path:
    return starling_home() / "record.key"


def _key(create: bool) -> bytes | None:
    """This user's sealing key; None when there is none (or none this user can read) and
    ``create`` is False. With ``create``, one is made on first use; a key that cannot be
    read or made, or a damaged one, is a one-line error naming the file."""
    path = key_path()
    try:
        key: bytes | None = path.read_bytes()
    except FileNotFoundError:
        key = _new_key(path) if create else None
    except OSError as exc:
        if create:
            raise _unusable(path, exc.strerror or type(exc).__name__) from exc
        return None
    if key is None:
        return None
    why = _not_private(path) or (
        f"it holds {len(key)} bytes, not 32 or more" if len(key) < 32 else None
    )
    if why is not None:
        if create:
            raise _unusable(path, why)
        return None
    return key


def _not_private(path: Path) -> str | None:
    """Why the key at ``path`` is not this user's alone (None: it is). A key another user
    made, or could read or replace, would let them seal records this user trusts: one made
    in a shared folder before this user's first run (a results volume anyone may write),
    say. Root may use a key of another user's (the recovery guides run ``docker run --user
    root`` on the orchestrator's own records), never one others may read or write."""
    me = os.geteuid()
    for what, where, modes in (("the key", path, 0o077), ("its folder", path.parent, 0o022)):
        try:
            found = where.stat()
        except OSError as exc:
            return f"{what} cannot be checked ({exc.strerror or type(exc).__name__})"
        if me != 0 and found.st_uid != me:
            return f"{what} belongs to user id {found.st_uid}, not to you ({me})"
        if found.st_mode & modes:
            return f"others may {'write in' if where != path else 'read or write'} {what} " + (
                f"(mode {found.st_mode & 0o777:o})"
            )
    return None


def _new_key(path: Path) -> bytes:
    """32 random bytes in a new owner-only file at ``path`` (or the key another process
    made there first)."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first: use theirs
            return path.read_bytes()
        with os.fdopen(fd, "wb") as handle:
            handle.write(secrets.token_bytes(32))
        return path.read_bytes()
    except OSError as exc:
        raise _unusable(path, exc.strerror or type(exc).__name__) from exc


def _unusable(path: Path, why: str) -> ConfigError:
    return ConfigError(
        f"{path}: the key that seals run records cannot be used ({why}); "
        f"set {HOME_VARIABLE} to a folder of your own"
    )


def _digest(key: bytes, body: Mapping[str, Any]) -> str:
    plain = {k: v for k, v in body.items() if k != SEAL}
    text = json.dumps(plain, sort_keys=True, separators=(",", ":"), default=str)
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def sealed(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with its seal, under this user's key (made on first use)."""
    key = _key(create=True)
    assert key is not None  # made, or refused in one line
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
