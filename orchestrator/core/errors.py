"""What goes wrong talking to a node or its backend, as plain exceptions: importable without
grpc, so the CLI can report them on every path (``simulate`` included) without loading the
network stack. :mod:`starling.orchestrator.execution.client` and the backends raise them."""

from __future__ import annotations

__all__ = ["BackendError", "MalformedSamples", "NodeRejected", "NodeUnavailable"]


class NodeUnavailable(RuntimeError):
    """The node cannot be reached or could not do what was asked; names the address."""


class NodeRejected(NodeUnavailable):
    """The node is up but the call does not fit its state (FAILED_PRECONDITION)."""


class MalformedSamples(NodeUnavailable):
    """A node's stream of samples broke what every sample of its run is: its shape
    (chains, d), rounds that go forward, within the run's. Names the node's address and the
    sample; what came before it is kept."""


class BackendError(RuntimeError):
    """A backend could not do what was asked (start, kill, restart, fault a node); the
    message names the node."""
