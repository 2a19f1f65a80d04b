"""The round engine: one round loop (:mod:`~node.engine.rounds`), two transports.

* :mod:`~node.engine.transport` — the :class:`Transport` protocol (send, withhold, gather);
* :mod:`~node.engine.rounds` — the round of one program, and the sync/async semantics;
* :mod:`~node.engine.memory` — the in-memory lockstep transport;
* :mod:`~node.engine.simulate` — the simulator, every node in one process.

The network transport (links and inbox of a gRPC node) is :mod:`node.runtime.network`;
nothing in this package imports grpc.
"""

from node.engine.memory import LockstepNetwork, MemoryTransport
from node.engine.rounds import round_steps, run_round
from node.engine.simulate import NodeFailed, simulate
from node.engine.transport import Gather, Transport

__all__ = [
    "Gather",
    "LockstepNetwork",
    "MemoryTransport",
    "NodeFailed",
    "Transport",
    "round_steps",
    "run_round",
    "simulate",
]
