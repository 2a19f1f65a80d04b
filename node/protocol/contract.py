"""Plain types that cross the wire, each defined once next to its protobuf converter.

The node fills them in (``node/runtime``) and its servicers send them with ``*_to_proto``;
the orchestrator reads them back with ``*_from_proto`` (``orchestrator/execution/client.py``).
Neither writes the fields out by hand: a field added here is carried by its two converters,
and ``tests/node/test_contract.py`` fails until it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from enum import Enum

from starling.node.protocol.convert import data_from_proto, public_data
from starling.node.protocol.starling.v1 import control_pb2
from starling.node.spec import DataSpec

__all__ = [
    "READY_PREFIX",
    "Configured",
    "LinkCounters",
    "NodeState",
    "NodeStatus",
    "configured_from_proto",
    "configured_to_proto",
    "link_books_from_proto",
    "link_books_to_proto",
    "link_counters_from_proto",
    "link_counters_to_proto",
    "state_from_proto",
    "state_to_proto",
    "status_from_proto",
    "status_to_proto",
]

NOT_CONFIGURED = "node is not configured yet"
"""The details of the UNAVAILABLE a node answers a Peer stream with before it is configured
(peers configured before it, or a restarted process waiting for the orchestrator). The
sender keeps its messages and opens the stream again: a wait, not a send error."""

READY_PREFIX = "starling-node listening on "
"""The line ``starling node serve`` prints on stdout, followed by its host:port, once its
gRPC server is up; a backend that started the process waits for it."""


class NodeState(str, Enum):
    """A node's lifecycle state, one enum for the runtime, its servicers and the orchestrator.

    The values are the strings the rest of the system reads (status output, metrics, the
    orchestrator's client): ``idle → configured → running → done | failed | stopped``, with
    ``stopping`` between ``running`` and ``stopped`` when a Stop finds a round computing
    that does not return within the Stop's wait: the store may still grow until ``stopped``.
    """

    IDLE = "idle"
    CONFIGURED = "configured"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    STOPPED = "stopped"
    STOPPING = "stopping"

    @property
    def finished(self) -> bool:
        """The run is over (a new Configure is needed to run again)."""
        return self in (NodeState.DONE, NodeState.FAILED, NodeState.STOPPED)

    def __str__(self) -> str:
        return self.value


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
    process; see :mod:`starling.orchestrator.results.link_books`)."""
    pending_withheld: int = 0
    """Likewise of ``withheld``: notices still waiting for their round."""
    pending_bytes: int = 0
    """Likewise of ``bytes``: the payload of the messages in ``pending_received``."""
    screened: int = 0
    """Inbound: of ``rejected``, the well-formed messages refused for a value beyond the
    node's screening bound (:mod:`starling.node.runtime.screening`)."""
    resent: int = 0
    """Outbound: messages sent again on a new stream after theirs broke; each message is
    counted once in ``sent``, however often it is sent again."""

    def copy(self) -> LinkCounters:
        return LinkCounters(**asdict(self))


_WIRE_STATES: dict[NodeState, control_pb2.NodeState] = {
    NodeState.IDLE: control_pb2.NODE_STATE_IDLE,
    NodeState.CONFIGURED: control_pb2.NODE_STATE_CONFIGURED,
    NodeState.RUNNING: control_pb2.NODE_STATE_RUNNING,
    NodeState.DONE: control_pb2.NODE_STATE_DONE,
    NodeState.FAILED: control_pb2.NODE_STATE_FAILED,
    NodeState.STOPPED: control_pb2.NODE_STATE_STOPPED,
    NodeState.STOPPING: control_pb2.NODE_STATE_STOPPING,
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


@dataclass(frozen=True)
class NodeStatus:
    """A node's answer to ``Control.Status``: its run, its state and its counters."""

    node_id: str
    experiment: str
    state: NodeState
    """The node's lifecycle state; a ``str`` enum, so it compares equal to ``"running"``."""
    round: int
    """The round being run (or next to run when not running)."""
    error: str
    samples_stored: int
    outbound: dict[str, LinkCounters] = field(default_factory=dict)
    inbound: dict[str, LinkCounters] = field(default_factory=dict)
    program_metrics: dict[str, float] = field(default_factory=dict)
    """The sampler program's own figures (``NodeProgram.metrics``)."""
    holding: bool = False
    """Waiting at a hold before ``round`` (``Control.Hold``)."""
    peers_down: tuple[str, ...] = ()
    """In-peers it was told are down (``Control.SetPeerDown``): not waited for."""
    refused_streams: int = 0
    """Inbound peer streams it refused because it held its limit of them."""
    denied_peer_streams: int = 0
    """Inbound peer streams refused for their identity (secret, certificate, neighbour)."""
    denied_control_calls: int = 0
    """Control calls refused: not the orchestrator's certificate, no or a wrong token."""
    run_id: str = ""
    """The run the node is configured for (the orchestrator's id of it), empty when none."""
    refused: dict[str, int] = field(default_factory=dict)
    """Calls and connections refused before they were served, by ``<door>:<reason>``
    (``health:busy``, ``peer:idle``, ``control:other_run`` ...)."""


def status_to_proto(status: NodeStatus) -> control_pb2.NodeStatus:
    return control_pb2.NodeStatus(
        node_id=status.node_id,
        experiment=status.experiment,
        state=state_to_proto(status.state),
        round=status.round,
        error=status.error,
        samples_stored=status.samples_stored,
        outbound=link_books_to_proto(status.outbound),
        inbound=link_books_to_proto(status.inbound),
        program_metrics=status.program_metrics,
        holding=status.holding,
        peers_down=list(status.peers_down),
        refused_streams=status.refused_streams,
        denied_peer_streams=status.denied_peer_streams,
        denied_control_calls=status.denied_control_calls,
        run_id=status.run_id,
        refused=status.refused,
    )


def status_from_proto(message: control_pb2.NodeStatus) -> NodeStatus:
    """The status a node sent; its program's figures sorted by name (a proto map has no
    order)."""
    return NodeStatus(
        node_id=message.node_id,
        experiment=message.experiment,
        state=state_from_proto(message.state),
        round=int(message.round),
        error=message.error,
        samples_stored=int(message.samples_stored),
        outbound=link_books_from_proto(message.outbound),
        inbound=link_books_from_proto(message.inbound),
        program_metrics=dict(sorted(message.program_metrics.items())),
        holding=bool(message.holding),
        peers_down=tuple(message.peers_down),
        refused_streams=int(message.refused_streams),
        denied_peer_streams=int(message.denied_peer_streams),
        denied_control_calls=int(message.denied_control_calls),
        run_id=message.run_id,
        refused=dict(sorted(message.refused.items())),
    )


@dataclass(frozen=True)
class Configured:
    """A node's answer to ``Control.Configure``: where it starts and what it already holds."""

    next_round: int
    """The round it runs next: 0 for a fresh run, later when it resumed."""
    resumed: bool
    """True if it resumed from a checkpoint (a restarted node)."""
    samples_stored: int
    """Samples in its durable store: collection from an offset beyond this must step back."""
    data: DataSpec | None = None
    """The node's own data when the experiment left it to the node (``data.source: node``).
    Only its public part crosses the wire (:func:`~starling.node.protocol.convert.public_data`):
    a synthetic shard's recipe, or for a file only ``source="file"``."""


def configured_to_proto(configured: Configured) -> control_pb2.ConfigureReply:
    reply = control_pb2.ConfigureReply(
        next_round=configured.next_round,
        resumed=configured.resumed,
        samples_stored=configured.samples_stored,
    )
    if configured.data is not None:
        reply.data.CopyFrom(public_data(configured.data))
    return reply


def configured_from_proto(reply: control_pb2.ConfigureReply) -> Configured:
    return Configured(
        next_round=int(reply.next_round),
        resumed=bool(reply.resumed),
        samples_stored=int(reply.samples_stored),
        data=data_from_proto(reply.data) if reply.HasField("data") else None,
    )
