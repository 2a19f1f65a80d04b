"""Moved: the simulator is the round engine's lockstep transport, :mod:`node.engine.simulate`.

Kept as a re-export so ``from orchestrator.simulator import simulate`` still works; the
synchronous and asynchronous semantics are documented in :mod:`node.engine.rounds`.
"""

from node.engine.simulate import simulate

__all__ = ["simulate"]
