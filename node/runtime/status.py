"""What the node's runtime answers: its status, a configuration's result, a refusal."""

from __future__ import annotations

from dataclasses import dataclass

from starling.node.protocol.contract import LinkCounters
from starling.node.runtime.state import NodeState
from starling.node.spec import DataSpec

__all__ = ["ConfigureResult", "PreconditionError", "RuntimeStatus"]


class PreconditionError(RuntimeError):
    """The call does not fit the node's current state (e.g. Configure while running)."""


@dataclass(frozen=True)
class ConfigureResult:
    next_round: int
    resumed: bool
    samples_stored: int
    data: DataSpec | None = None
    """The node's own data when the experiment left it to the node (``source: node``)."""


@dataclass(frozen=True)
class RuntimeStatus:
    node_id: str
    experiment: str
    state: NodeState
    round: int
    error: str
    samples_stored: int
    outbound: dict[str, LinkCounters]
    inbound: dict[str, LinkCounters]
    program_metrics: dict[str, float]
    holding: bool = False
    peers_down: tuple[str, ...] = ()
    refused_streams: int = 0
