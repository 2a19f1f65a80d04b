"""Plain types that cross the wire, each defined once next to its protobuf converter.

The node fills them in (``node/runtime``), the orchestrator reads them back
(``orchestrator/client.py``); neither writes the fields out by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields

from starling.node.protocol.starling.v1 import control_pb2
from starling.node.runtime.state import NodeState

__all__ = [
    "READY_PREFIX",
    "LinkCounters",
    "NodeState",
    "link_books_from_proto",
    "link_books_to_proto",
    "link_counters_from_proto",
    "link_counters_to_proto",
    "state_from_proto",
    "state_to_proto",
]

NOT_CONFIGURED = "node is not configured yet"
"""The details of the UNAVAILABLE a node answers a Peer stream with before it is configured
(peers configured before it, or a restarted process waiting for the orchestrator). The
sender keeps its messages and opens the stream again: a wait, not a send error."""

READY_PREFIX = "starling-node listening on "
"""The line ``starling node serve`` prints on stdout, followed by its host:port, once its
gRPC server is up; a backend that started the process waits for it."""


@dataclass
class LinkCounters:
    """Counters of one link, as in ``LinkStats`` of protos/starling/v1/control.proto.

    On the node they count up (:class:`starling.node.runtime.stats.StatsBook`); the orchestrator
    receives a copy in every ``Status`` reply.
    """

    sent: int = 0
    received: int = 0
    withheld: int = 0
    dropped: int = 0
    send_errors: int = 0
    late: int = 0
    rejected: int = 0
    last_error: str = ""
    max_staleness: int = 0
    overruns: int = 0
    bytes: int = 0
    """Tensor payload bytes: outbound, handed to the stream (resends included); inbound,
    of the messages accepted (received or late)."""
    pending_received: int = 0
    """Inbound: of ``received``, the messages for a round not run yet (they die with the
    process; see :mod:`starling.orchestrator.counters`)."""
    pending_withheld: int = 0
    """Likewise of ``withheld``: notices still waiting for their round."""
    pending_bytes: int = 0
    """Likewise of ``bytes``: the payload of the messages in ``pending_received``."""
    screened: int = 0
    """Inbound: of ``rejected``, the well-formed messages refused for a value beyond the
    node's screening bound (:mod:`starling.node.runtime.screening`)."""

    def copy(self) -> LinkCounters:
        return LinkCounters(**asdict(self))


_WIRE_STATES: dict[NodeState, control_pb2.NodeState] = {
    NodeState.IDLE: control_pb2.NODE_STATE_IDLE,
    NodeState.CONFIGURED: control_pb2.NODE_STATE_CONFIGURED,
    NodeState.RUNNING: control_pb2.NODE_STATE_RUNNING,
    NodeState.DONE: control_pb2.NODE_STATE_DONE,
    NodeState.FAILED: control_pb2.NODE_STATE_FAILED,
    NodeState.STOPPED: control_pb2.NODE_STATE_STOPPED,
}
_STATES_BY_WIRE: dict[int, NodeState] = {wire: state for state, wire in _WIRE_STATES.items()}


def state_to_proto(state: NodeState) -> control_pb2.NodeState:
    """The ``NodeState`` enum value of protos/starling/v1/control.proto for ``state``."""
    return _WIRE_STATES[state]


def state_from_proto(value: int) -> NodeState:
    """A node's state from the wire. ``NODE_STATE_UNSPECIFIED`` (a reply that did not say)
    counts as idle: a node that has said nothing about a run has not started one."""
    return _STATES_BY_WIRE.get(value, NodeState.IDLE)


_FIELDS = tuple(f.name for f in fields(LinkCounters))


def link_counters_to_proto(peer: str, counters: LinkCounters) -> control_pb2.LinkStats:
    return control_pb2.LinkStats(peer=peer, **{name: getattr(counters, name) for name in _FIELDS})


def link_counters_from_proto(message: control_pb2.LinkStats) -> LinkCounters:
    return LinkCounters(**{name: getattr(message, name) for name in _FIELDS})


def link_books_from_proto(entries: Iterable[control_pb2.LinkStats]) -> dict[str, LinkCounters]:
    """A repeated ``LinkStats`` field as peer -> counters."""
    return {e.peer: link_counters_from_proto(e) for e in entries}


def link_books_to_proto(book: Mapping[str, LinkCounters]) -> list[control_pb2.LinkStats]:
    return [link_counters_to_proto(peer, c) for peer, c in book.items()]
