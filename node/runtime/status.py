"""What the node's runtime answers: its status, a configuration's result, a refusal."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from starling.node.protocol.contract import LinkCounters, NodeState
from starling.node.spec import DataSpec

if TYPE_CHECKING:
    from starling.node.runtime.run import Run

__all__ = ["ConfigureResult", "PreconditionError", "RuntimeStatus", "run_status"]


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


def run_status(
    run: Run | None, state: NodeState, error: str, holding: bool, refused_streams: int
) -> RuntimeStatus:
    """The status of a node in ``state`` with the configured ``run`` (None: none yet)."""
    if run is None:
        return RuntimeStatus(
            "", "", state, 0, error, 0, {}, {}, {}, refused_streams=refused_streams
        )
    return RuntimeStatus(
        node_id=run.spec.node_id,
        experiment=run.spec.experiment,
        state=state,
        round=run.round,
        error=error,
        samples_stored=len(run.store),
        outbound=run.outbound.snapshot(),
        inbound=run.inbound.snapshot(),
        program_metrics={k: float(v) for k, v in run.program.metrics().items()},
        holding=holding,
        peers_down=run.inbox.down(),
        refused_streams=refused_streams,
    )
