"""Every gRPC option the node and its clients use, in one place.

Both ends set the message size limits explicitly (:data:`MAX_MESSAGE_BYTES` sent; a server
reads at most :data:`DEFAULT_MAX_REQUEST_BYTES` a message), both ends agree on keepalive,
and both take an optional ``credentials`` argument: ``None`` means
insecure (loopback, a lab network), and TLS is a matter of passing
``grpc.ssl_server_credentials`` / ``grpc.ssl_channel_credentials`` here — nothing else
changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent import futures
from dataclasses import dataclass, field, replace

import grpc

from starling.node.protocol import MAX_MESSAGE_BYTES
from starling.node.runtime.link_proof import proof
from starling.node.runtime.peer_secrets import PeerSecrets
from starling.node.security import SENDER_KEY, TlsFiles, channel_credentials, target_override

__all__ = [
    "ChannelSettings",
    "DEFAULT_MAX_REQUEST_BYTES",
    "KEEPALIVE_TIME_MS",
    "MAX_MESSAGE_BYTES",
    "channel_options",
    "create_server",
    "open_aio_channel",
    "open_channel",
    "server_options",
]

# Why keepalive: links are long-lived streams. A peer that vanishes without closing its TCP
# connection (a powered-off device, a pulled cable, a paused or disconnected container)
# would otherwise leave the stream looking healthy for minutes while every message is lost
# in the kernel's buffers. Pinging every 10 s and giving up after 5 s without an answer
# turns that into a broken stream, which the link notices, counts and reconnects.
KEEPALIVE_TIME_MS = 10_000
KEEPALIVE_TIMEOUT_MS = 5_000

# Reconnect quickly to a peer that comes back (a restarted node), but without hammering one
# that stays away: gRPC's own backoff, bounded well below its 120 s default.
INITIAL_RECONNECT_BACKOFF_MS = 100
MAX_RECONNECT_BACKOFF_MS = 2_000

DEFAULT_MAX_WORKERS = 4
"""Threads of the server's own pool: only synchronous handlers outside every door run
there (none of Starling's; :mod:`starling.node.runtime.doors` gives each service a pool
of its own)."""

DEFAULT_MAX_PEER_STREAMS = 256
"""Concurrent inbound ``Peer.Exchange`` streams a node serves (each a task on the node's
event loop for its life, :mod:`starling.node.runtime.servicers`): well over any in-degree, with
room for a sender's reconnection overlapping its old stream. More are refused with
RESOURCE_EXHAUSTED."""

DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
"""The largest single message a node reads (``grpc.max_receive_message_length``): gRPC
reads a whole message before any handler runs, so this bounds what a caller the node does
not know yet can make it hold per call. Nothing legitimate is larger: a Configure is a few
KiB, and iterates above :data:`~starling.node.protocol.wire.PART_BYTES` cross in parts."""

MIN_MAX_REQUEST_BYTES = 2 * 1024 * 1024
"""The least ``--max-request-bytes`` a node takes: an iterate's part and its envelope fit."""


def server_options(
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_request_bytes),
        ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        ("grpc.keepalive_permit_without_calls", 1),
        # Accept the clients' pings (at the rate they send them) instead of answering
        # GOAWAY "too many pings".
        ("grpc.http2.min_ping_interval_without_data_ms", KEEPALIVE_TIME_MS // 2),
        ("grpc.http2.max_ping_strikes", 0),
        # gRPC sets SO_REUSEPORT by default on Linux, which lets a second node bind a port
        # that is already taken and silently share its traffic. A taken port must fail.
        ("grpc.so_reuseport", 0),
    ]


def channel_options(max_message_bytes: int = MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.initial_reconnect_backoff_ms", INITIAL_RECONNECT_BACKOFF_MS),
        ("grpc.min_reconnect_backoff_ms", INITIAL_RECONNECT_BACKOFF_MS),
        ("grpc.max_reconnect_backoff_ms", MAX_RECONNECT_BACKOFF_MS),
        # Peers are addressed directly (host:port); a proxy from the environment would
        # only get in the way of loopback and LAN links.
        ("grpc.enable_http_proxy", 0),
    ]


def open_channel(
    address: str,
    credentials: grpc.ChannelCredentials | None = None,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    server_id: str = "",
) -> grpc.Channel:
    """A channel to ``address``; with ``credentials`` (TLS) the server's certificate must
    name ``server_id`` (a node id, or the orchestrator's) when one is given."""
    options = _options(max_message_bytes, credentials, server_id)
    if credentials is None:
        return grpc.insecure_channel(address, options=options)
    return grpc.secure_channel(address, credentials, options=options)


def open_aio_channel(
    address: str,
    credentials: grpc.ChannelCredentials | None = None,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    server_id: str = "",
) -> grpc.aio.Channel:
    """:func:`open_channel` on ``grpc.aio``, for an event loop (the node's outbound links,
    :mod:`starling.node.runtime.links`); to be called on that loop."""
    options = _options(max_message_bytes, credentials, server_id)
    if credentials is None:
        return grpc.aio.insecure_channel(address, options=options)
    return grpc.aio.secure_channel(address, credentials, options=options)


def _options(
    max_message_bytes: int, credentials: grpc.ChannelCredentials | None, server_id: str
) -> list[tuple[str, int | str]]:
    """A channel's options; with TLS, the name the server's certificate must carry."""
    options: list[tuple[str, int | str]] = list(channel_options(max_message_bytes))
    if credentials is not None:
        options += target_override(server_id)
    return options


@dataclass(frozen=True)
class ChannelSettings:
    """How a node opens channels to its peers (its outbound links), and how its streams
    say who sends them and prove it (:mod:`starling.node.runtime.link_proof`)."""

    credentials: grpc.ChannelCredentials | None = None
    max_message_bytes: int = MAX_MESSAGE_BYTES
    sender: str = ""
    experiment: str = ""
    secrets: PeerSecrets = field(default_factory=PeerSecrets, repr=False)
    tls: TlsFiles | None = None
    """Read at every channel opened (over ``credentials``): a renewed certificate is used
    by the next links."""

    def speaking_as(self, sender: str, experiment: str, secrets: PeerSecrets) -> ChannelSettings:
        """These settings for a run's streams: from ``sender``, with the run's secrets."""
        return replace(self, sender=sender, experiment=experiment, secrets=secrets)

    @property
    def secured(self) -> bool:
        """Whether the channels are TLS (certificates carry identities)."""
        return self.tls is not None or self.credentials is not None

    def open(self, address: str, receiver: str = "") -> grpc.aio.Channel:
        """A link's channel to ``receiver`` at ``address``, on ``grpc.aio``: to be opened
        on the node's event loop (:mod:`starling.node.runtime.event_loop`)."""
        credentials = channel_credentials(self.tls) if self.tls is not None else self.credentials
        return open_aio_channel(address, credentials, self.max_message_bytes, receiver)

    def stream_metadata(self) -> tuple[tuple[str, str], ...]:
        """Metadata of a Peer.Exchange stream: who sends it."""
        return ((SENDER_KEY, self.sender),)

    def proof(self, receiver: str, challenge: str) -> str:
        """The answer of a stream to ``receiver`` to its challenge."""
        return proof(
            self.secrets.sending(receiver), self.experiment, self.sender, receiver, challenge
        )


def create_server(
    listen: str,
    *,
    credentials: grpc.ServerCredentials | None = None,
    max_workers: int = DEFAULT_MAX_WORKERS,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
) -> tuple[grpc.aio.Server, int]:
    """A ``grpc.aio`` server bound to ``listen`` (port 0: a free port), with the real port.
    To be called on the event loop it serves on (the node's:
    :mod:`starling.node.runtime.event_loop`).

    Raises ``OSError`` naming the address if it cannot be bound. Servicers are added by
    the caller before ``start()``. ``max_workers``: the threads of synchronous handlers no
    interceptor runs on threads of their own (:mod:`starling.node.runtime.doors`).
    """
    server = grpc.aio.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="starling-rpc"),
        options=server_options(max_message_bytes, max_request_bytes),
        interceptors=list(interceptors),
    )
    try:
        if credentials is None:
            port = server.add_insecure_port(listen)
        else:
            port = server.add_secure_port(listen, credentials)
    except RuntimeError as exc:
        raise OSError(f"cannot listen on {listen}: {exc}") from None
    if port == 0:
        raise OSError(f"cannot listen on {listen}: the address is in use or not available")
    return server, port
