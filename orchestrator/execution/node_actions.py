"""What a fault plan may ask of a run's nodes: the small protocol the supervisor implements.

The scheduled node faults (:mod:`starling.orchestrator.execution.node_faults`) and kernel faults
(:mod:`starling.orchestrator.execution.kernel_faults`) decide *when*; the
:class:`~starling.orchestrator.execution.supervisor.Supervisor` knows every node's condition and
carries the actions out. The plans see the nodes only through :class:`NodeActions`, so they
never reach into the supervisor's attributes, and the supervisor may import them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from starling.node.params import ConfigError
from starling.orchestrator.core.errors import BackendError, NodeUnavailable
from starling.orchestrator.faults.schedule import NodeFault
from starling.orchestrator.results.account import Account

__all__ = ["RESTART_ERRORS", "NodeActions", "NodeView"]

RESTART_ERRORS = (ConfigError, BackendError, NodeUnavailable)
"""What a failed restart raises: the backend could not start it, or it never answered."""


@dataclass(frozen=True)
class NodeView:
    """One node as the supervisor last saw it."""

    finished: bool
    """Done, failed, stopped from outside, given up on, or killed for good."""
    round: int | None
    """Its round at the last status read (None: no status from its present process)."""
    holding: bool
    """Waiting at a hold before ``round`` (``Control.Hold``)."""


class NodeActions(Protocol):
    """The run's nodes, as a fault plan acts on them."""

    account: Account
    """The run's account: every action and what followed it goes into it."""

    def node_ids(self) -> list[str]:
        """Every node of the run, in the experiment's order."""
        ...

    def view(self, node: str) -> NodeView: ...

    def rounds(self) -> dict[str, int]:
        """Node -> its round, for the nodes up and answering."""
        ...

    def out_peers(self, node: str) -> tuple[str, ...]:
        """The nodes that receive ``node``'s messages in some graph period."""
        ...

    def in_peers(self, node: str) -> tuple[str, ...]:
        """The nodes whose messages ``node`` receives in some graph period."""
        ...

    def poll(self, nodes: list[str], pull: bool) -> None:
        """Read these nodes' statuses now (and collect their samples if ``pull``)."""
        ...

    def link_stats(self) -> dict:
        """Node -> {outbound, inbound}: its link counters over all of its processes."""
        ...

    def hold(self, node: str, round_index: int | None) -> None:
        """Have ``node`` stop before ``round_index`` and wait there (None releases it)."""
        ...

    def kill(
        self, node: str, why: str, round_seen: int | None = None, fault: NodeFault | None = None
    ) -> None: ...

    def restart(self, node: str, why: str) -> str:
        """Start ``node`` again on its store; raises one of :data:`RESTART_ERRORS`."""
        ...

    def silenced(self) -> set[str]:
        """Nodes paused or off the network on purpose (kernel faults): not polled."""
        ...


def link_delta(
    before: Mapping, after: Mapping, node: str, side: str, peer: str, counter: str
) -> int:
    """How much ``counter`` of ``node``'s ``side`` book for ``peer`` grew from ``before`` to
    ``after`` (two :meth:`NodeActions.link_stats`)."""

    def value(books: Mapping) -> int:
        entry = ((books.get(node) or {}).get(side) or {}).get(peer) or {}
        return int(entry.get(counter, 0))

    return value(after) - value(before)
