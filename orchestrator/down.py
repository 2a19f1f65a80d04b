"""Dead is dead: the nodes that wait for a node declared down are told not to.

A node is *declared down* by the :class:`~starling.orchestrator.supervisor.Supervisor` when it is
killed for good by the schedule, its round loop failed, someone else stopped it (an outside
``Control.Stop``), or it stayed unreachable past the grace period (``limits.down_grace``).
Every node that waits for its messages — its out-peers, over all graph periods — is then
told through ``Control.SetPeerDown`` and stops waiting for it at once, instead of waiting a
round deadline for it in every round that is left. When the node is configured again (it
was restarted) they are told it is back and wait for it again. A neighbour that cannot be
told at the moment (it is down itself) is told at a later poll, or given every mark when it
is configured again. Each declaration is a node event in the account (``declared_down``,
``declared_up``, with who was told).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starling.node.params import ConfigError
from starling.orchestrator.client import NodeClient, NodeUnavailable

if TYPE_CHECKING:
    from starling.orchestrator.supervisor import Supervisor

__all__ = ["DownNotices"]


class DownNotices:
    """Which nodes are declared down, and which neighbours still have to hear of it."""

    def __init__(self, supervisor: Supervisor):
        self._supervisor = supervisor
        self.declared: dict[str, str] = {}
        """Node declared down -> why; its out-peers do not wait for it."""
        self._untold: dict[tuple[str, str], bool] = {}
        """(receiver, node) -> down: a mark the receiver could not be given yet."""

    def _out_peers(self, node: str) -> list[str]:
        """The nodes that wait for ``node``'s messages in some graph period."""
        return list(self._supervisor.specs[node].out_peers())

    def _in_peers(self, node: str) -> list[str]:
        return list(self._supervisor.specs[node].in_peers())

    def declare(self, node: str, why: str) -> None:
        """``node`` is down for good (until configured again): its out-peers stop waiting."""
        if node in self.declared:
            return
        self.declared[node] = why
        told, later = self._tell(node, True)
        text = f"declared down ({why}); "
        if told:
            verb = "waits" if len(told) == 1 else "wait"
            text += f"{', '.join(told)} no longer {verb} for it"
        else:
            text += "nobody waits for it"
        if later:
            text += f"; {', '.join(later)} will be told when they answer"
        self._supervisor.account.node(node, "declared_down", text, why=why, told=told, untold=later)

    def undeclare(self, node: str) -> None:
        """``node`` is configured again: its out-peers wait for it again."""
        if self.declared.pop(node, None) is None:
            return
        told, later = self._tell(node, False)
        text = f"back up; {', '.join(told + later) or 'nobody'} wait for it again"
        self._supervisor.account.node(node, "declared_up", text, told=told, untold=later)

    def reapply(self, node: str, client: NodeClient) -> None:
        """A new process of ``node`` waits for every in-peer: give it back the marks of
        those declared down (before it starts). Raises NodeUnavailable like any call."""
        for key in [k for k in self._untold if k[0] == node]:
            del self._untold[key]
        for peer in self._in_peers(node):
            if peer in self.declared:
                client.set_peer_down(peer, True)

    def tell_untold(self) -> None:
        """Give the marks that could not be given before to receivers that now answer."""
        nodes = self._supervisor.nodes
        for (peer, node), down in list(self._untold.items()):
            if nodes[peer].finished or nodes[peer].down_since is not None:
                continue  # given with the rest when it is configured again, if it is
            try:
                self._supervisor.clients[peer].set_peer_down(node, down)
            except (NodeUnavailable, ConfigError):
                continue
            del self._untold[(peer, node)]

    def _tell(self, node: str, down: bool) -> tuple[list[str], list[str]]:
        """Mark ``node`` down (or up) on each of its out-peers that still runs; returns
        those told and those to be told later (unreachable now)."""
        supervisor = self._supervisor
        told, later = [], []
        for peer in self._out_peers(node):
            if supervisor.nodes[peer].finished or peer in self.declared:
                self._untold.pop((peer, node), None)
                continue
            try:
                supervisor.clients[peer].set_peer_down(node, down)
            except (NodeUnavailable, ConfigError):
                self._untold[(peer, node)] = down
                later.append(peer)
                continue
            self._untold.pop((peer, node), None)
            told.append(peer)
        return told, later
