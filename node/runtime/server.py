"""The node's gRPC server: Control, Peer and standard health, with one shutdown path."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from node.config import HomeData
from node.protocol import MAX_MESSAGE_BYTES
from node.protocol.starling.v1 import control_pb2, control_pb2_grpc, peer_pb2, peer_pb2_grpc
from node.runtime.gate import Gate
from node.runtime.runtime import NodeRuntime
from node.runtime.servicers import ControlServicer, PeerServicer
from node.runtime.transport import (
    DEFAULT_MAX_PEER_STREAMS,
    ChannelSettings,
    create_server,
    server_threads,
)
from node.security import TlsFiles, channel_credentials, server_credentials

__all__ = ["NodeServer", "SHUTDOWN_GRACE"]

log = logging.getLogger("starling.node")

SHUTDOWN_GRACE = 1.0
"""Seconds in-flight RPCs get to finish at shutdown (well inside the 5 s an orchestrator
waits after SIGTERM before it kills)."""

SERVICES = (
    control_pb2.DESCRIPTOR.services_by_name["Control"].full_name,
    peer_pb2.DESCRIPTOR.services_by_name["Peer"].full_name,
)


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
    ):
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
        self._health = health.HealthServicer(experimental_non_blocking=True)
        gate = Gate(self.runtime, tls=tls is not None, token=token)
        control_pb2_grpc.add_ControlServicer_to_server(
            ControlServicer(self.runtime, gate), self._server
        )
        peer_pb2_grpc.add_PeerServicer_to_server(
            PeerServicer(self.runtime, max_peer_streams, gate), self._server
        )
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        self._stopped = threading.Event()

    def start(self) -> None:
        self._server.start()
        for service in (health.OVERALL_HEALTH, *SERVICES):
            self._health.set(service, health_pb2.HealthCheckResponse.SERVING)
        log.info("serving on %s", self.address)

    def shutdown(self, grace: float = SHUTDOWN_GRACE) -> None:
        """Stop the round loop, flush the store, close links, then stop serving."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._health.enter_graceful_shutdown()
        self.runtime.shutdown()
        self._server.stop(grace).wait(grace + 1.0)
        log.info("stopped")
