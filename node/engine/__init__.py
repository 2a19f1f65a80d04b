"""The round engine: one round loop (:mod:`~starling.node.engine.rounds`), two transports.

* :mod:`~starling.node.engine.transport` — the :class:`Transport` protocol (send, withhold, gather);
* :mod:`~starling.node.engine.rounds` — the round of one program, and the sync/async semantics;
* :mod:`~starling.node.engine.memory` — the in-memory lockstep transport;
* :mod:`~starling.node.engine.simulate` — the simulator, every node in one process.

The network transport (links and inbox of a gRPC node) is :mod:`starling.node.runtime.network`;
nothing in this package imports grpc.
"""

from starling.node.engine.memory import LockstepNetwork, MemoryTransport
from starling.node.engine.rounds import PhaseGather, round_steps
from starling.node.engine.simulate import NodeFailed, simulate
from starling.node.engine.transport import Gather, Transport

__all__ = [
    "Gather",
    "LockstepNetwork",
    "MemoryTransport",
    "NodeFailed",
    "PhaseGather",
    "Transport",
    "round_steps",
    "simulate",
]
