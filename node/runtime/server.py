"""The node's gRPC server: Control, Peer, health and reflection
(:mod:`starling.node.runtime.standard`), an optional Prometheus endpoint
(:mod:`starling.node.runtime.metrics`), and one shutdown path."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from starling.node.config import HomeData
from starling.node.exporter import MetricsServer
from starling.node.protocol import MAX_MESSAGE_BYTES
from starling.node.protocol.starling.v1 import control_pb2_grpc, peer_pb2_grpc
from starling.node.runtime.gate import Gate
from starling.node.runtime.runtime import NodeRuntime
from starling.node.runtime.servicers import ControlServicer, PeerServicer
from starling.node.runtime.standard import NodeHealth, enable_reflection
from starling.node.runtime.transport import (
    DEFAULT_MAX_PEER_STREAMS,
    ChannelSettings,
    create_server,
    server_threads,
)
from starling.node.security import TlsFiles, channel_credentials, server_credentials

__all__ = ["NodeServer", "SHUTDOWN_GRACE"]

log = logging.getLogger("starling.node")

SHUTDOWN_GRACE = 1.0
"""Seconds in-flight RPCs get to finish at shutdown (well inside the 5 s an orchestrator
waits after SIGTERM before it kills)."""


class NodeServer:
    """A bound, not yet started node server; ``address`` holds the real port."""

    def __init__(
        self,
        listen: str,
        state_dir: str | Path,
        *,
        tls: TlsFiles | None = None,
        token: str | None = None,
        data_dir: str | Path | None = None,
        max_workers: int | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        node_id: str = "",
        data: HomeData | None = None,
        max_peer_streams: int = DEFAULT_MAX_PEER_STREAMS,
        reflection: bool = True,
        metrics: str = "",
    ):
        """``reflection``: serve gRPC reflection; ``metrics``: HOST:PORT (or PORT, on
        loopback) of a Prometheus endpoint, none if empty."""
        self.runtime = NodeRuntime(
            state_dir,
            ChannelSettings(channel_credentials(tls) if tls else None, max_message_bytes),
            node_id=node_id,
            data=data,
            data_dir=data_dir,
        )
        self._server, port = create_server(
            listen,
            credentials=server_credentials(tls) if tls else None,
            max_workers=server_threads(max_peer_streams, max_workers),
            max_message_bytes=max_message_bytes,
        )
        host = listen.rpartition(":")[0]
        self.address = f"{host}:{port}"
        gate = Gate(self.runtime, tls=tls is not None, token=token)
        control_pb2_grpc.add_ControlServicer_to_server(
            ControlServicer(self.runtime, gate), self._server
        )
        peers = PeerServicer(self.runtime, max_peer_streams, gate)
        peer_pb2_grpc.add_PeerServicer_to_server(peers, self._server)
        self._health = NodeHealth(self._server)
        self.runtime.on_state = self._health.follow
        self.reflection = reflection
        if reflection:
            enable_reflection(self._server)
        self._metrics_address = metrics
        self.metrics: MetricsServer | None = None
        self._collector = None
        if metrics:
            from starling.node.runtime.metrics import (
                NodeCollector,  # prometheus_client only if asked
            )

            self._collector = NodeCollector(self.runtime, node_id, gate)
            self._collector.open_streams = peers.open_streams
        self._stopped = threading.Event()

    def start(self) -> None:
        """Serve gRPC, then (if asked) metrics; an unbindable metrics address is a
        ConfigError naming ``metrics``, and nothing keeps serving."""
        self._server.start()
        self._health.start(self.runtime.state)
        if self._collector is not None:
            from starling.node.exporter import serve_metrics
            from starling.node.runtime.metrics import node_registry

            try:
                self.metrics = serve_metrics(self._metrics_address, node_registry(self._collector))
            except Exception:
                self._server.stop(None)
                raise
            log.info("metrics on %s", self.metrics.url, extra={"event": "metrics_serving"})
        log.info(
            "serving on %s (reflection %s)",
            self.address,
            "on" if self.reflection else "off",
            extra={"event": "serving"},
        )

    def shutdown(self, grace: float = SHUTDOWN_GRACE) -> None:
        """Stop the round loop, flush the store, close links, then stop serving."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._health.shutdown()
        self.runtime.shutdown()
        self._server.stop(grace).wait(grace + 1.0)
        if self.metrics is not None:
            self.metrics.close()
        log.info("stopped", extra={"event": "stopped"})
