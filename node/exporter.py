"""The HTTP side of ``--metrics ADDR``, for a node and for the orchestrator alike.

``ADDR`` is ``HOST:PORT`` or a bare ``PORT`` (then loopback: ``127.0.0.1:PORT``). Metrics
are off unless asked for, and bound to loopback unless another host is named
(``0.0.0.0:9464`` inside a container or a private network). The endpoint has no
authentication — it shows counters and names, never data, tokens or keys — so on a shared
network bind it where only the scraper reaches it. ``GET /metrics`` is ``prometheus_client``'s
WSGI app, served by a threaded server of bounded reach (:mod:`starling.node.metrics_http`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starling.node.params import ConfigError, host_port

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client import CollectorRegistry

__all__ = ["MetricsServer", "parse_metrics_address", "serve_metrics"]


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


def serve_metrics(
    text: str, registry: CollectorRegistry, field: str = "--metrics"
) -> MetricsServer:
    """Serve ``registry`` on ``text`` (see :func:`parse_metrics_address`); an address that
    cannot be bound is a ConfigError naming ``field``."""
    from prometheus_client import make_wsgi_app

    from starling.node.metrics_http import bounded_server

    host, port = parse_metrics_address(text, field)
    try:
        server = bounded_server(host, port, make_wsgi_app(registry))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"{field}: cannot listen on {host}:{port}: {reason}") from None
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    bound = server.server_address[1]
    return MetricsServer(server, f"{host}:{bound}")
