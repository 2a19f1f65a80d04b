"""How the orchestrator proves itself to nodes, the run it speaks for, and its secrets.

An :class:`Access` holds the orchestrator's own TLS files (``backend.tls`` of the
experiment, or ``tls`` of an inventory file), or else the master of the Control tokens
(``backend.token_file``): node ``X`` is sent ``X``'s own token, derived from the master
(:func:`starling.node.tokens.node_token`), never the master, so one node's token opens no
other node. It also holds the run's peer secret, from which every directed link gets a
secret of its own that only its two ends are handed in ``Configure``
(:meth:`Access.link_secrets`, :mod:`starling.node.runtime.peer_secrets`), and the run's id,
which every Control call names (a node refuses a call for another run). With TLS a channel
to node ``X`` checks that the node's certificate names ``X``. Loopback runs need none of it:
the secret is made here, and a node started without a token file leaves Control open on
loopback.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starling.node.logs import redact
from starling.node.security import ORCHESTRATOR_ID, TlsFiles, bearer, others_can_read, tls_files
from starling.node.tokens import node_token, read_master

__all__ = ["Access", "access_from_section", "access_paths"]


def new_secret() -> str:
    """A fresh peer secret: 256 random bits."""
    return secrets.token_urlsafe(32)


def new_run_id() -> str:
    """A fresh run id: 64 random bits, as hex (not secret: nodes show it in Status)."""
    return secrets.token_hex(8)


@dataclass(frozen=True)
class Access:
    tls: TlsFiles | None = None
    token: str | None = field(default=None, repr=False)
    """The master of the nodes' Control tokens (each node is sent its own)."""
    peer_secret: str = field(default_factory=new_secret, repr=False)
    run_id: str = field(default_factory=new_run_id)
    """The run every Control call names (``NodeConfig.run_id`` and the requests')."""

    def __post_init__(self) -> None:
        # Never in a log line, whatever logs it (starling.node.logs).
        redact(self.peer_secret)
        if self.token:
            redact(self.token)

    def link_secret(self, sender: str, receiver: str) -> str:
        """The secret of the link ``sender → receiver``: an HMAC of the run's peer secret, so
        it is the same at every Configure of the run (a restarted node) and tells nothing of
        any other link's."""
        label = f"{sender}\n{receiver}".encode()  # node ids hold no newline (plain names)
        return hmac.new(self.peer_secret.encode(), label, hashlib.sha256).hexdigest()

    def link_secrets(
        self, node: str, out_peers: Iterable[str], in_peers: Iterable[str]
    ) -> tuple[str, dict[str, str], dict[str, str]]:
        """What ``node`` is handed in Configure: a secret of its own in place of the run's
        (which would let it derive every link's), and the secrets of its links to
        ``out_peers`` (by receiver) and from ``in_peers`` (by sender)."""
        own = self.link_secret(node, "")
        send = {peer: self.link_secret(node, peer) for peer in out_peers}
        accept = {peer: self.link_secret(peer, node) for peer in in_peers}
        for secret in (own, *send.values(), *accept.values()):
            redact(secret)
        return own, send, accept

    def node_token(self, node_id: str) -> str | None:
        """The Control token of node ``node_id`` (None without a master, or without a node
        id to derive it for: the master itself is never sent)."""
        if self.token is None or not node_id:
            return None
        token = node_token(self.token, node_id)
        redact(token)
        return token

    def channel(self, address: str, node_id: str = ""):
        """A channel to the node ``node_id`` at ``address`` that sends our credentials."""
        import grpc

        from starling.node.runtime.transport import open_channel
        from starling.node.security import channel_credentials

        credentials = channel_credentials(self.tls) if self.tls else None
        channel = open_channel(address, credentials, server_id=node_id)
        token = self.node_token(node_id)
        if token is None:
            return channel
        return grpc.intercept_channel(channel, _BearerInterceptor(bearer(token)))


def access_paths(section: Any, access: Access | None = None) -> dict[str, Any]:
    """The ``tls`` and ``token_file`` of a backend section as plain paths, and the run id
    of ``access`` (for records: the live commands speak for the run)."""
    tls = getattr(section, "tls", None)
    out: dict[str, Any] = {"run_id": access.run_id} if access is not None else {}
    if tls is not None:
        out["tls"] = {k: str(Path(getattr(tls, k)).resolve()) for k in ("ca", "cert", "key")}
    if getattr(section, "token_file", ""):
        out["token_file"] = str(Path(section.token_file).resolve())
    return out


def access_from_section(section: Mapping[str, Any] | Any, where: str = "backend") -> Access:
    """From a backend section (a mapping or the schema's model): ``tls`` and ``token_file``,
    and the run id a run record names (else a new run's)."""
    get = section.get if isinstance(section, Mapping) else lambda k, d=None: getattr(section, k, d)
    raw_tls = get("tls", None)
    if raw_tls is not None and not isinstance(raw_tls, Mapping):
        raw_tls = raw_tls.model_dump()
    tls = tls_files(dict(raw_tls) if raw_tls else None, f"{where}.tls")
    # Files no handshake could use are one line naming the field, not every node
    # "unreachable" (after the ready timeout).
    warnings = tls.check(ORCHESTRATOR_ID, f"{where}.tls") if tls is not None else []
    token_file = get("token_file", "") or ""
    token = read_master(token_file, f"{where}.token_file") if token_file else None
    if token_file:
        warnings += [w for w in [others_can_read(token_file, f"{where}.token_file")] if w]
    for warning in warnings:
        logging.getLogger("starling.orchestrator").warning(warning)
    run_id = get("run_id", None)
    if isinstance(run_id, str) and run_id:
        return Access(tls=tls, token=token, run_id=run_id)
    return Access(tls=tls, token=token)


def _interceptor_base():
    import grpc

    return (
        grpc.UnaryUnaryClientInterceptor,
        grpc.UnaryStreamClientInterceptor,
        grpc.StreamUnaryClientInterceptor,
        grpc.StreamStreamClientInterceptor,
    )


class _BearerInterceptor(*_interceptor_base()):  # type: ignore[misc]
    """Adds the Control token to every call's metadata."""

    def __init__(self, extra: tuple[tuple[str, str], ...]):
        self.extra = extra

    def _details(self, details):
        metadata = tuple(details.metadata or ()) + self.extra
        return details._replace(metadata=metadata)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, iterator):
        return continuation(self._details(details), iterator)

    def intercept_stream_stream(self, continuation, details, iterator):
        return continuation(self._details(details), iterator)
