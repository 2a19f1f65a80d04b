"""Nodes that already run somewhere: a device, a container of the compose testbed, another
terminal. The inventory maps node ids to ``host:port``; this backend only waits for them.

``starling run EXP.yaml --inventory nodes.yaml`` or, in the experiment,
``backend: {kind: inventory, nodes: {a: "10.0.0.5:50051", ...}}``. An inventory file is
that section without ``kind``::

    nodes:
      a: node-a:50051
      b: node-b:50051
    ready_timeout: 60     # seconds to wait for every node's gRPC health check
    tls: {ca: certs/ca.pem, cert: certs/orchestrator.pem, key: certs/orchestrator.key}
    # token_file: token   # without TLS: the token the nodes were started with

The backend starts nothing and stops nothing: the nodes outlive the run and serve the
next one (the run configures them with ``fresh`` so an earlier run's state is not
resumed). Killing or restarting a node is not something it can do to a remote device;
those requests fail with a :class:`BackendError` naming the node.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from starling.node.params import ConfigError, host_port
from starling.orchestrator.config.backends import BackendSettings, InventorySettings
from starling.orchestrator.core.errors import BackendError
from starling.orchestrator.execution.backends.base import Backend
from starling.orchestrator.planning.plan import RunPlan

__all__ = ["InventoryBackend", "wait_serving"]

DEFAULT_READY_TIMEOUT = 60.0
_CHECK_SECONDS = 2.0
_PAUSE_SECONDS = 0.2


def _check_address(node: str, address: Any) -> str:
    host_port(address, f"backend.nodes.{node}")
    return str(address)


def _refuse_shared(addresses: Mapping[str, str]) -> None:
    """One node process serves one node id: an address listed for two ids (a copied line)
    would be configured as the first, then taken over as the second, and left running a
    broken run that refuses the next one. Refused before any node is asked anything."""
    seen: dict[str, str] = {}
    for node, address in addresses.items():
        if address in seen:
            raise ConfigError(
                f"backend.nodes: {seen[address]} and {node} are both at {address}; "
                "each node needs an address of its own"
            )
        seen[address] = node


class InventoryBackend(Backend):
    """Running nodes at fixed addresses; see the module docstring."""

    kind = "inventory"
    settings_model = InventorySettings

    def __init__(
        self,
        inventory: Mapping[str, str],
        ready_timeout: float = DEFAULT_READY_TIMEOUT,
        access: Any = None,
    ):
        self.inventory = {str(k): _check_address(str(k), v) for k, v in inventory.items()}
        self.ready_timeout = float(ready_timeout)
        self.access = access
        """The run's :class:`~starling.orchestrator.execution.access.Access` for health checks
        (TLS)."""
        self._addresses: dict[str, str] = {}

    @classmethod
    def for_run(cls, settings: BackendSettings, workdir: Path, plan: RunPlan) -> InventoryBackend:
        """From ``backend.nodes`` (and nodes' own ``address``) and ``backend.ready_timeout``."""
        assert isinstance(settings, InventorySettings)
        from starling.orchestrator.execution.access import (
            access_from_section,  # loads grpc: not at import
        )

        return cls(dict(settings.nodes), settings.ready_timeout, access_from_section(settings))

    def start(
        self, node_ids: Sequence[str], fixed: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The address of every node, once each answers its health check as SERVING."""
        fixed = fixed or {}
        addresses: dict[str, str] = {}
        for node in node_ids:
            address = fixed.get(node) or self.inventory.get(node)
            if not address:
                listed = ", ".join(sorted(self.inventory)) or "none"
                raise BackendError(
                    f"inventory: node {node!r} of the experiment has no address "
                    f"(the inventory lists {listed})"
                )
            addresses[node] = _check_address(node, address)
        _refuse_shared(addresses)
        wait_serving(addresses, self.ready_timeout, self.access)
        self._addresses = addresses
        return dict(addresses)

    def addresses(self) -> dict[str, str]:
        return dict(self._addresses)

    def alive(self, node_id: str) -> bool | None:
        return None  # a remote node: only gRPC can tell

    def kill(self, node_id: str) -> None:
        raise BackendError(self._outside(node_id, "killed"))

    def restart(self, node_id: str) -> str:
        raise BackendError(self._outside(node_id, "restarted"))

    def stop(self) -> None:
        """Nothing to stop: the nodes keep running for the next experiment."""

    def pids(self) -> dict[str, int | None]:
        return dict.fromkeys(self._addresses)

    def _outside(self, node_id: str, what: str) -> str:
        where = self._addresses.get(node_id) or self.inventory.get(node_id, "?")
        return (
            f"node {node_id} at {where} runs outside Starling (inventory backend): it cannot "
            f"be {what} from here"
        )


def wait_serving(addresses: Mapping[str, str], timeout: float, access: Any = None) -> None:
    """Poll every node's standard health check until all say SERVING; a BackendError
    naming each node still missing (and what it last answered) when ``timeout`` passes."""
    # Here, not at the top: the backend registry is imported by commands that load no grpc.
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from starling.node.unreachable import is_tls_reason, tls_hint, unreachable_reason
    from starling.orchestrator.core.interrupts import interrupts_deferred
    from starling.orchestrator.execution.access import Access

    access = access or Access()
    tls = access.tls is not None
    with interrupts_deferred():
        channels = {node: access.channel(address, node) for node, address in addresses.items()}
    last = dict.fromkeys(addresses, "no answer")
    waiting = set(addresses)
    deadline = time.monotonic() + timeout
    try:
        while waiting:
            for node in sorted(waiting):
                stub = health_pb2_grpc.HealthStub(channels[node])
                remaining = deadline - time.monotonic()
                try:
                    with interrupts_deferred():  # see starling.orchestrator.core.interrupts
                        reply = stub.Check(
                            health_pb2.HealthCheckRequest(service=""),
                            timeout=max(min(_CHECK_SECONDS, remaining), 0.05),
                        )
                except grpc.RpcError as exc:
                    last[node] = unreachable_reason(exc, tls, node)
                    continue
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    waiting.discard(node)
                else:
                    last[node] = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
            if not waiting:
                return
            if time.monotonic() >= deadline:
                missing = ", ".join(
                    f"{node} at {addresses[node]} ({last[node]})" for node in sorted(waiting)
                )
                hint = (
                    tls_hint(tls)
                    if all(is_tls_reason(last[node]) for node in waiting)
                    else "is it running (starling node serve) and reachable?"
                )
                raise BackendError(
                    f"inventory: no healthy node after {timeout:g} s: {missing}; {hint}"
                )
            time.sleep(_PAUSE_SECONDS)
    finally:
        with interrupts_deferred():
            for channel in channels.values():
                channel.close()
