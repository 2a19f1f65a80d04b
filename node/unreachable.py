"""Why a gRPC call reached no node, in a few words: the reason gRPC's own error text gives
for a channel that never connected (a refused port, an unknown host, a failed TLS handshake).

``unavailable`` alone sends a user looking at the network when a certificate is at fault (a
CA of another testbed, a node listed under another node's id, a TLS node dialled without
TLS); ``starling node health`` and the inventory's wait for its nodes print this instead.
Only gRPC's error text is read, never a certificate or a key.
"""

from __future__ import annotations

import grpc

__all__ = ["is_tls_reason", "tls_hint", "unreachable_reason"]

_NOT_NAMED = "its TLS certificate does not name node {node} (another node's address?)"
_TLS = "TLS: "
# (fragments of gRPC's error text, lower case; what they mean), first match wins.
_WITH_TLS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("hostname verification",), _NOT_NAMED),
    (
        ("certificate has expired", "certificate_expired", "certificate is not yet valid"),
        _TLS + "a certificate is expired or not yet valid",
    ),
    (("wrong_version_number",), _TLS + "the node does not speak TLS (started --insecure?)"),
    (
        (
            "certificate signature failure",
            "bad_signature",
            "unknown_ca",
            "unknown ca",
            "unable to get local issuer",
            "certificate verify failed",
            "certificate_verify_failed",
        ),
        _TLS + "the node's certificate is not signed by the CA given (tls.ca)",
    ),
    (
        ("socket closed", "connection reset"),
        _TLS + "the node closed the handshake: it does not take this client's certificate "
        "(signed by another CA?)",
    ),
    (("handshake",), _TLS + "the handshake failed"),
)
_PLAIN: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("socket closed", "connection reset"),
        "the node closed the connection at once: does it want TLS (tls: / --tls-*)?",
    ),
)
_NETWORK: tuple[tuple[tuple[str, ...], str], ...] = (
    (("connection refused",), "connection refused: nothing listens on that port"),
    (
        (
            "domain name not found",
            "name or service not known",
            "errors resolving",
            "dns resolution failed",
        ),
        "host name not found",
    ),
    (("no route to host", "network is unreachable"), "no route to that host"),
)


def unreachable_reason(exc: grpc.RpcError, tls: bool, node: str = "") -> str:
    """A few words on why ``exc`` (a failed call) reached no node: its code in lower case,
    plus gRPC's reason where it names one (``unavailable: connection refused: ...``).
    ``tls``: whether the channel was a TLS one; ``node``: the id it was to name."""
    code = exc.code() if callable(getattr(exc, "code", None)) else None
    name = code.name.lower() if isinstance(code, grpc.StatusCode) else "failed"
    text = exc.details() if callable(getattr(exc, "details", None)) else ""
    said = (text or "").lower()
    tables = (*(_WITH_TLS if tls else _PLAIN), *_NETWORK)
    for fragments, meaning in tables:
        if any(fragment in said for fragment in fragments):
            return f"{name}: {meaning.format(node=repr(node) if node else '(its id)')}"
    return name


def is_tls_reason(reason: str) -> bool:
    """Whether :func:`unreachable_reason` blamed the TLS files rather than the network."""
    return "TLS" in reason


def tls_hint(tls: bool) -> str:
    """What to check when every reason was a TLS one (:func:`is_tls_reason`)."""
    if not tls:
        return "the nodes want TLS: give the orchestrator's certificate in tls: {ca, cert, key}"
    return (
        "check the TLS files: one CA for every party, each node's certificate naming its "
        "id, the orchestrator's naming 'orchestrator'"
    )
