"""The HTTP side of ``--metrics ADDR``, for a node and for the orchestrator alike.

``ADDR`` is ``HOST:PORT`` or a bare ``PORT`` (then loopback: ``127.0.0.1:PORT``). Metrics
are off unless asked for, and bound to loopback unless another host is named
(``0.0.0.0:9464`` inside a container or a private network). The endpoint has no
authentication — it shows counters and names, never data, tokens or keys — so on a shared
network bind it where only the scraper reaches it. ``GET /metrics`` is ``prometheus_client``'s
WSGI app, served here by a threaded server of bounded reach: at most
:data:`MAX_CONNECTIONS` connections at once (one more is closed at once), each closed once it
sends nothing for :data:`IDLE_SECONDS`. ``prometheus_client``'s own server gave every
connection a thread for as long as it stayed open: a thousand idle connections held a
thousand threads of the node, past the systemd unit's ``TasksMax`` in two thousand.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from starling.node.params import ConfigError, host_port

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = [
    "IDLE_SECONDS",
    "MAX_CONNECTIONS",
    "MetricsServer",
    "parse_metrics_address",
    "serve_metrics",
]

MAX_CONNECTIONS = 16
"""Connections served at once: a scraper holds one, a few people with curl a few more."""

IDLE_SECONDS = 10.0
"""How long a connection may send nothing before it is closed (a scrape sends its request
at once)."""


def parse_metrics_address(text: str, field: str = "--metrics") -> tuple[str, int]:
    """(host, port) of ``HOST:PORT`` or ``PORT``; a bad one is a ConfigError naming
    ``field``."""
    host, sep, port = str(text).rpartition(":")
    if not sep:
        host = "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535 or not host:
        raise ConfigError(f"{field}: expected HOST:PORT or PORT (0..65535), got {text!r}")
    return host_port(f"{host}:{port}", field, least_port=0)


@dataclass
class MetricsServer:
    server: WSGIServer
    address: str
    """host:port really bound (the port filled in when 0 was asked)."""

    @property
    def url(self) -> str:
        host, _, port = self.address.rpartition(":")
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _QuietHandler(WSGIRequestHandler):
    """A request handler whose every read waits at most :data:`IDLE_SECONDS`, and which
    logs nothing (a scrape every few seconds is no news)."""

    timeout = IDLE_SECONDS

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


class _BoundedServer(ThreadingMixIn, WSGIServer):
    """A thread per connection, at most :data:`MAX_CONNECTIONS` of them: one more is
    closed unanswered."""

    daemon_threads = True
    request_queue_size = 128
    """The listen backlog: connections beyond the limit are accepted and closed at once,
    not left retrying their handshake for seconds."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that timed out or went away: nothing to report (socketserver would
        print a traceback to stderr)."""


def serve_metrics(
    text: str, registry: CollectorRegistry, field: str = "--metrics"
) -> MetricsServer:
    """Serve ``registry`` on ``text`` (see :func:`parse_metrics_address`); an address that
    cannot be bound is a ConfigError naming ``field``."""
    from prometheus_client import make_wsgi_app

    host, port = parse_metrics_address(text, field)
    try:
        family, *_, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        kind = type("MetricsHTTPServer", (_BoundedServer,), {"address_family": family})
        server: WSGIServer = make_server(
            str(address[0]), port, make_wsgi_app(registry), kind, handler_class=_QuietHandler
        )
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"{field}: cannot listen on {host}:{port}: {reason}") from None
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    bound = server.server_address[1]
    return MetricsServer(server, f"{host}:{bound}")
