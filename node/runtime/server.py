"""The node's gRPC server: Control, Peer, health and reflection
(:mod:`starling.node.runtime.standard`), each behind its door
(:mod:`starling.node.runtime.doors`), an optional Prometheus endpoint
(:mod:`starling.node.runtime.metrics`), and one shutdown path.

The server is ``grpc.aio``'s, on the node's event loop (:mod:`starling.node.runtime.
event_loop`), beside the round loop and the outbound links. The doors (calls served at once
in all, per caller, kept for the orchestrator; synchronous handlers on threads of their
own):

=============  ==========================  ===========================================
door           methods                     limits
=============  ==========================  ===========================================
control        Control's unary calls       ``--max-workers`` (16); the gate first
samples        Control.StreamSamples       :data:`MAX_SAMPLE_STREAMS`; the gate first
peer           Peer.Exchange (on the       ``--max-peer-streams`` (256), 8 per sender
               loop)                       and caller (the Peer servicer's own limits)
health         Health.Check                16, 4 per caller, 8 kept for the orchestrator
watch          Health.Watch                8, 2 per caller, 4 kept for the orchestrator
reflection     ServerReflection            4, 2 per caller, 2 kept; on a node with TLS or
                                           a token, for the orchestrator only
=============  ==========================  ===========================================
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import logging
import threading
from collections.abc import Callable
from pathlib import Path

import grpc

from starling.node.config import DEFAULT_SCREEN_BOUND, HomeData
from starling.node.exporter import MetricsServer
from starling.node.protocol import MAX_MESSAGE_BYTES
from starling.node.protocol.starling.v1 import control_pb2_grpc, peer_pb2
from starling.node.revocation import Revocations
from starling.node.runtime.doors import Door, DoorLimits, Doors, Entrance
from starling.node.runtime.event_loop import NodeLoop
from starling.node.runtime.gate import Gate
from starling.node.runtime.runtime import NodeRuntime
from starling.node.runtime.servicers import MAX_SAMPLE_STREAMS, ControlServicer, PeerServicer
from starling.node.runtime.standard import CONTROL, HEALTH, PEER, NodeHealth, enable_reflection
from starling.node.runtime.transport import (
    DEFAULT_MAX_PEER_STREAMS,
    DEFAULT_MAX_REQUEST_BYTES,
    ChannelSettings,
    create_server,
)
from starling.node.security import TlsFiles, server_credentials
from starling.node.tokens import NodeTokens

__all__ = ["CONTROL_CALLS", "NodeServer", "SHUTDOWN_GRACE"]

log = logging.getLogger("starling.node")

SHUTDOWN_GRACE = 1.0
"""Seconds in-flight RPCs get to finish at shutdown (well inside the 5 s an orchestrator
waits after SIGTERM before it kills)."""

CONTROL_CALLS = 16
"""Control's unary calls served at once (``--max-workers``): an orchestrator makes a few."""

REFLECTION = "/grpc.reflection."


class DoorTable:
    """Which door each method path comes through (see module)."""

    def __init__(self, gate: Gate, control_calls: int):
        def door(
            name: str,
            limits: DoorLimits,
            what: str,
            check: Callable[[grpc.ServicerContext], None] | None = None,
        ) -> Entrance:
            return Entrance(Door(name, limits, what), check)

        # The Peer servicer enforces the Peer streams' limits (in all, per sender and
        # caller) with its own messages; its door only watches their first message.
        unlimited = 2**31
        peers = DoorLimits(unlimited, unlimited)
        self.routes = [
            (
                f"/{CONTROL}/StreamSamples",
                door(
                    "samples",
                    DoorLimits(MAX_SAMPLE_STREAMS, MAX_SAMPLE_STREAMS),
                    "sample streams",
                    gate.control,
                ),
            ),
            (
                f"/{CONTROL}/",
                door("control", DoorLimits(control_calls, control_calls), "calls", gate.control),
            ),
            (f"/{PEER}/", door("peer", peers, "peer streams")),
            (f"/{HEALTH}/Watch", door("watch", DoorLimits(8, 2, 4), "health watches")),
            (f"/{HEALTH}/", door("health", DoorLimits(16, 4, 8), "health checks")),
            (REFLECTION, door("reflection", DoorLimits(4, 2, 2), "reflection streams", gate.guard)),
        ]

    def route(self, method: str) -> Entrance | None:
        for prefix, entrance in self.routes:
            if method.startswith(prefix):
                return entrance
        return None

    @property
    def doors(self) -> list[Door]:
        return [entrance.door for _, entrance in self.routes]


class NodeServer:
    """A bound, not yet started node server; ``address`` holds the real port."""

    def __init__(
        self,
        listen: str,
        state_dir: str | Path,
        *,
        tls: TlsFiles | None = None,
        tokens: NodeTokens | None = None,
        data_dir: str | Path | None = None,
        max_workers: int | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        node_id: str = "",
        data: HomeData | None = None,
        max_peer_streams: int = DEFAULT_MAX_PEER_STREAMS,
        reflection: bool = True,
        metrics: str = "",
        screen_bound: float = DEFAULT_SCREEN_BOUND,
        native_refusals: Callable[[], dict[str, int]] | None = None,
    ):
        """``reflection``: serve gRPC reflection; ``metrics``: HOST:PORT (or PORT, on
        loopback) of a Prometheus endpoint, none if empty; ``tokens``: the Control tokens
        (:mod:`starling.node.tokens`); ``native_refusals``: what gRPC's own log counted
        (refused TLS handshakes, :mod:`starling.node.native_log`)."""
        self.loop = NodeLoop()
        """Where the node serves, runs its rounds and sends (closed at :meth:`shutdown`)."""
        self.runtime = NodeRuntime(
            state_dir,
            ChannelSettings(max_message_bytes=max_message_bytes, tls=tls),
            node_id=node_id,
            data=data,
            data_dir=data_dir,
            screen_bound=screen_bound,
            loop=self.loop,
        )
        self._native = native_refusals or dict
        self._stopped = threading.Event()
        revocations = Revocations(tls.crl) if tls is not None and tls.crl else None
        gate = Gate(self.runtime, tls=tls is not None, tokens=tokens, revocations=revocations)
        self._table = DoorTable(gate, max_workers or CONTROL_CALLS)
        self._doors = Doors(self._table.route, gate.is_orchestrator)
        # A grpc.aio server belongs to the loop it is made on.
        try:
            self._server, port = self.loop.run(
                functools.partial(
                    create_server,
                    listen,
                    credentials=server_credentials(tls) if tls else None,
                    max_message_bytes=max_message_bytes,
                    max_request_bytes=max_request_bytes,
                    interceptors=[self._doors],
                )
            )
        except BaseException:
            self.loop.close()
            raise
        host = listen.rpartition(":")[0]
        self.address = f"{host}:{port}"
        control_pb2_grpc.add_ControlServicer_to_server(
            ControlServicer(self.runtime, gate, self.refusals), self._server
        )
        peers = PeerServicer(self.runtime, max_peer_streams, gate, max_message_bytes)
        # Peer.Exchange's requests reach the servicer as the bytes gRPC received: an
        # iterate's parts are read without protobuf (PartJoiner.add_bytes).
        exchange = {
            "Exchange": grpc.stream_unary_rpc_method_handler(
                peers.Exchange,
                request_deserializer=None,
                response_serializer=peer_pb2.ExchangeSummary.SerializeToString,
            )
        }
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(PEER, exchange),)
        )
        self._server.add_registered_method_handlers(PEER, exchange)
        self._health = NodeHealth(self._server)
        self.runtime.on_state = self._health.follow
        self.reflection = reflection
        if reflection:
            self.loop.run(enable_reflection, self._server)
        self._metrics_address = metrics
        self.metrics: MetricsServer | None = None
        self._collector = None
        if metrics:
            from starling.node.runtime.metrics import (
                NodeCollector,  # prometheus_client only if asked
            )

            self._collector = NodeCollector(self.runtime, node_id, gate, self.refusals)
            self._collector.open_streams = peers.open_streams
            self._collector.serving = self.serving

    def refusals(self) -> dict[str, int]:
        """Calls and connections refused before they were served, by "<door>:<reason>"."""
        counts = self._doors.refusals()
        for key, count in self._native().items():
            counts[key] = counts.get(key, 0) + count
        return counts

    def serving(self) -> dict[str, int]:
        """Calls each door serves now, by door."""
        return {door.name: door.serving() for door in self._table.doors}

    def start(self) -> None:
        """Serve gRPC, then (if asked) metrics; an unbindable metrics address is a
        ConfigError naming ``metrics``, and nothing keeps serving."""
        self.loop.submit(self._server.start()).result()
        self._health.start(self.runtime.state)
        if self._collector is not None:
            from starling.node.exporter import serve_metrics
            from starling.node.runtime.metrics import node_registry

            try:
                self.metrics = serve_metrics(self._metrics_address, node_registry(self._collector))
            except Exception:
                self.loop.submit(self._server.stop(None)).result()
                raise
            log.info("metrics on %s", self.metrics.url, extra={"event": "metrics_serving"})
        log.info(
            "serving on %s (reflection %s)",
            self.address,
            "on" if self.reflection else "off",
            extra={"event": "serving"},
        )

    def shutdown(self, grace: float = SHUTDOWN_GRACE) -> None:
        """Stop the round loop and flush the store, stop serving, close the links, then
        the loop."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._health.shutdown()
        self.runtime.stop()
        with contextlib.suppress(concurrent.futures.TimeoutError):
            self.loop.submit(self._server.stop(grace)).result(grace + 1.0)
        self.runtime.shutdown(stop_wait=0.0)  # stopped above: its wait is not repeated
        for door in self._table.doors:
            door.shutdown()
        self.loop.close()
        if self.metrics is not None:
            self.metrics.close()
        log.info("stopped", extra={"event": "stopped"})
