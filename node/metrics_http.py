"""The metrics endpoint's HTTP server, of bounded reach: a thread per connection, at most
:data:`MAX_CONNECTIONS` connections at once (one more is closed at once), each closed once
it sends nothing for :data:`IDLE_SECONDS`.

``prometheus_client``'s own server gave every connection a thread for as long as it stayed
open: a thousand idle connections held a thousand threads of the node, past the systemd
unit's ``TasksMax`` in two thousand. Imported only when ``--metrics`` is asked for
(:func:`starling.node.exporter.serve_metrics`): ``wsgiref`` brings ``http.server`` and
``email`` with it, 1.5 MB of a node that serves no metrics.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

__all__ = ["IDLE_SECONDS", "MAX_CONNECTIONS", "bounded_server"]

MAX_CONNECTIONS = 16
"""Connections served at once: a scraper holds one, a few people with curl a few more."""

IDLE_SECONDS = 10.0
"""How long a connection may send nothing before it is closed (a scrape sends its request
at once)."""


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


def bounded_server(host: str, port: int, app: Callable[..., Any]) -> WSGIServer:
    """A server of ``app`` bound to ``host:port`` (IPv4 or IPv6, as ``host`` resolves), not
    yet serving: call its ``serve_forever`` on a thread. Raises OSError when it cannot
    bind."""
    family, *_, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    kind = type("MetricsHTTPServer", (_BoundedServer,), {"address_family": family})
    return make_server(str(address[0]), port, app, kind, handler_class=_QuietHandler)
