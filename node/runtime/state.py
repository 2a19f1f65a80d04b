"""A node's lifecycle states, one enum for the runtime and its servicers.

The values are the strings the rest of the system reads (status output, metrics, the
orchestrator's client): ``idle → configured → running → done | failed | stopped``.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["NodeState"]


class NodeState(str, Enum):
    IDLE = "idle"
    CONFIGURED = "configured"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    STOPPED = "stopped"

    @property
    def finished(self) -> bool:
        """The run is over (a new Configure is needed to run again)."""
        return self in (NodeState.DONE, NodeState.FAILED, NodeState.STOPPED)

    def __str__(self) -> str:
        return self.value
