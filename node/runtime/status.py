"""The node's status, read off its run, and the refusal of a call its state does not allow.

The status type itself is the wire's (:class:`starling.node.protocol.contract.NodeStatus`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starling.node.protocol.contract import NodeState, NodeStatus
from starling.node.shown import shorten

if TYPE_CHECKING:
    from starling.node.runtime.run import Run

__all__ = ["PreconditionError", "run_status"]


class PreconditionError(RuntimeError):
    """The call does not fit the node's current state (e.g. Configure while running).

    What it echoes of the call (the run a call names) is cut to a readable length
    (:func:`starling.node.shown.shorten`): a megabyte run id came back whole as the call's
    status details, beyond what gRPC lets a client read, so the caller saw only
    RESOURCE_EXHAUSTED and never why."""

    def __init__(self, message: object = "", *rest: object):
        super().__init__(shorten(str(message)), *rest)


def run_status(
    run: Run | None, state: NodeState, error: str, holding: bool, refused_streams: int
) -> NodeStatus:
    """The status of a node in ``state`` with the configured ``run`` (None: none yet)."""
    if run is None:
        return NodeStatus(
            node_id="",
            experiment="",
            state=state,
            round=0,
            error=error,
            samples_stored=0,
            refused_streams=refused_streams,
        )
    return NodeStatus(
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
