"""How a Peer stream proves it comes from a sender that holds its link's secret, without the
secret ever crossing the wire.

The construction (challenge and response, one round trip at stream open):

1. The sender opens ``Peer.Exchange`` naming itself (metadata ``starling-sender``).
2. The receiver, once the sender is one of its in-neighbours (and, with TLS, its certificate
   names it), answers with a fresh *challenge* in its initial metadata
   (:data:`CHALLENGE_KEY`): 128 random bits from :func:`secrets.token_hex`, never used for
   another stream.
3. The sender's first message carries only ``proof``:
   ``HMAC-SHA256(link secret, "starling link proof v1" | run | sender | receiver | challenge)``
   in hex, each field length-prefixed (:func:`_framed`) so that no two field lists frame to
   the same bytes.
4. The receiver computes the same MAC with the secret of the link from that sender (handed
   to it in ``Configure``, :mod:`starling.node.runtime.peer_secrets`) and compares in
   constant time; only then does it read an iterate of the stream.

What it gives: someone who captures a stream's opening (its metadata, its proof) learns
neither the secret nor anything it can present again. Another stream gets another challenge;
the proof names the run, the sender and the receiver, so it opens no stream of another run,
from another sender or to another node. What it does not give: without TLS nothing protects
the bytes of a stream once it is open, so a party that can rewrite traffic on the path can
still inject into or alter a stream it sits in the middle of (TLS prevents that), and the
secrets travel to the nodes in ``Configure``, which only TLS (or loopback) keeps private.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable

__all__ = ["CHALLENGE_KEY", "challenge_of", "new_challenge", "proof", "proof_matches"]

CHALLENGE_KEY = "starling-challenge"
"""Initial metadata of a Peer stream's receiver: the challenge the sender's proof answers."""

_LABEL = "starling link proof v1"


def new_challenge() -> str:
    """A fresh challenge: 128 random bits, as 32 hex characters."""
    return secrets.token_hex(16)


def _framed(fields: Iterable[str]) -> bytes:
    """The fields as one byte string: each its UTF-8 length (4 bytes, big-endian) then its
    bytes, so that no other list of fields frames to the same bytes."""
    out = bytearray()
    for text in fields:
        data = text.encode("utf-8", errors="surrogatepass")
        out += len(data).to_bytes(4, "big") + data
    return bytes(out)


def proof(secret: str, run: str, sender: str, receiver: str, challenge: str) -> str:
    """The answer to ``challenge`` for the link ``sender → receiver`` of ``run``."""
    message = _framed((_LABEL, run, sender, receiver, challenge))
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def proof_matches(
    given: str, secret: str, run: str, sender: str, receiver: str, challenge: str
) -> bool:
    """Whether ``given`` is the proof of ``secret`` for that challenge (constant time)."""
    expected = proof(secret, run, sender, receiver, challenge)
    return hmac.compare_digest(given.encode(errors="replace"), expected.encode())


def challenge_of(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The challenge in a receiver's initial metadata (None when it sent none: it refused
    the stream, or the call ended first)."""
    for key, value in metadata or ():
        if key == CHALLENGE_KEY and isinstance(value, str):
            return value
    return None
