"""Plain types that cross the wire, each defined once next to its protobuf converter.

The node fills them in (``node/runtime``), the orchestrator reads them back
(``orchestrator/client.py``); neither writes the fields out by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields

from node.protocol.starling.v1 import control_pb2

__all__ = [
    "READY_PREFIX",
    "LinkCounters",
    "link_books_from_proto",
    "link_books_to_proto",
    "link_counters_from_proto",
    "link_counters_to_proto",
]

READY_PREFIX = "starling-node listening on "
"""The line ``starling node serve`` prints on stdout, followed by its host:port, once its
gRPC server is up; a backend that started the process waits for it."""


@dataclass
class LinkCounters:
    """Counters of one link, as in ``LinkStats`` of protos/starling/v1/control.proto.

    On the node they count up (:class:`node.runtime.stats.StatsBook`); the orchestrator
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

    def copy(self) -> LinkCounters:
        return LinkCounters(**asdict(self))


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
