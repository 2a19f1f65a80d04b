"""What the orchestrator needs from wherever nodes run: the ``Backend`` protocol.

A backend provisions node services and reports where they listen; everything else — configure,
start, status, samples — goes to the nodes over gRPC, never through the backend. The local
backend starts processes on loopback, the inventory backend drives nodes that already run
(devices, a compose testbed), the docker backend creates containers. A new backend is one
module, ``backends/<kind>.py``, implementing this protocol (see
:mod:`starling.orchestrator.execution.backends`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

__all__ = ["Backend", "BackendError"]


class BackendError(RuntimeError):
    """A backend could not do what was asked; the message names the node."""


@runtime_checkable
class Backend(Protocol):
    """Where nodes live. Implementations are context managers: leaving the ``with`` block
    releases what the backend created (processes, containers, networks) and never touches
    nodes it did not create."""

    kind: str
    """Short name, as written in ``backend.kind`` and in ``metrics.json``."""

    def start(
        self, node_ids: Sequence[str], fixed: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """Make every node reachable; returns node id -> ``host:port`` the orchestrator
        dials. ``fixed`` pins addresses the experiment file gives."""
        ...

    def addresses(self) -> dict[str, str]:
        """node id -> address, as of now (a restart may move a node)."""
        ...

    def alive(self, node_id: str) -> bool | None:
        """Whether the node's process/container is up; None when the backend cannot tell
        (a remote device: ask it over gRPC instead)."""
        ...

    def kill(self, node_id: str) -> None:
        """Crash the node (SIGKILL or the nearest equivalent); its store stays."""
        ...

    def restart(self, node_id: str) -> str:
        """Bring a killed node back on its store; returns its (possibly new) address."""
        ...

    def stop(self) -> None:
        """Stop what this backend started; idempotent."""
        ...

    def __enter__(self) -> Backend: ...

    def __exit__(self, *exc: object) -> None: ...
