"""The standard gRPC services a node serves beside its own: health and reflection.

**Health** (``grpc.health.v1.Health``) answers per service:

* ``""`` (the whole server) and ``starling.v1.Control``: SERVING while the process serves.
  This is what the orchestrator and container health checks wait for before configuring a
  node, and a stopped or failed node must still be configurable, so they do not follow the
  run.
* ``starling.v1.Peer``: follows the node's run — SERVING while idle, configured, running or
  done; NOT_SERVING while stopping, stopped or failed (its iterates would go nowhere).

At shutdown every service turns NOT_SERVING first (graceful shutdown).

**Reflection** (``grpc.reflection.v1alpha.ServerReflection``, the maintained
``grpcio-reflection``) lets ``grpcurl`` or a GUI client list the node's services and call
them without the .proto files. On by default; ``--no-reflection`` (``reflection: false``)
leaves it out on locked-down devices. It describes the API, never data. On a node with TLS
or a token it answers the orchestrator's credentials only, as Control does
(:mod:`starling.node.runtime.gate`); on an open (loopback) node, anyone who can reach it.

Both come through doors of their own (:mod:`starling.node.runtime.server`), limited in all
and per caller: a health watch holds a thread of its door for as long as its caller keeps
it open (grpcio-health's blocking servicer), a reflection stream a task on the node's loop
(grpcio-reflection's ``asyncio`` servicer, which it picks for a ``grpc.aio`` server).
"""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from starling.node.protocol.contract import NodeState
from starling.node.protocol.starling.v1 import control_pb2, peer_pb2

__all__ = ["CONTROL", "HEALTH", "PEER", "NodeHealth", "enable_reflection"]

CONTROL = control_pb2.DESCRIPTOR.services_by_name["Control"].full_name
PEER = peer_pb2.DESCRIPTOR.services_by_name["Peer"].full_name
HEALTH = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name

_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
_PEER_DOWN = frozenset({NodeState.STOPPED, NodeState.STOPPING, NodeState.FAILED})


class NodeHealth:
    """The health servicer of one node server, kept in step with its runtime's state."""

    def __init__(self, server: grpc.Server) -> None:
        # Blocking watches: each holds a thread of the watch door's pool, which bounds them
        # (a non-blocking one holds none, but nothing bounds how many a caller keeps open).
        self._servicer = health.HealthServicer(experimental_non_blocking=False)
        health_pb2_grpc.add_HealthServicer_to_server(self._servicer, server)
        self._serving = False

    def start(self, state: NodeState) -> None:
        """The server is up: every service serves, the Peer service as ``state`` says."""
        self._serving = True
        for service in (health.OVERALL_HEALTH, CONTROL):
            self._servicer.set(service, _SERVING)
        self.follow(state)

    def follow(self, state: NodeState) -> None:
        """The runtime entered ``state`` (called under its lock: non-blocking)."""
        if self._serving:
            self._servicer.set(PEER, _NOT_SERVING if state in _PEER_DOWN else _SERVING)

    def shutdown(self) -> None:
        self._serving = False
        self._servicer.enter_graceful_shutdown()


def enable_reflection(server: grpc.Server) -> None:
    """Serve reflection for Control, Peer, Health and reflection itself."""
    from grpc_reflection.v1alpha import reflection  # imported only when enabled

    reflection.enable_server_reflection((CONTROL, PEER, HEALTH, reflection.SERVICE_NAME), server)
