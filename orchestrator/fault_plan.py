"""When the experiment's scheduled node faults fire during a networked run.

A kill "at round r" fires when the victim itself reaches round r: the victim is told to
hold before that round (``Control.Hold``, set at configuration) and its status is polled
quickly while the kill is pending, so the crash lands exactly there however slowly the
loop polls. A restart "at round s" fires when every other running node has reached the
kill round (or when all of them have finished); a node killed without a restart is not
waited for. Both engines also apply the fault as a schedule — the node is cut off from its
peers for rounds ``[r, s)`` (:func:`starling.orchestrator.node_specs.isolation_faults`) — so what
the node hears does not depend on how fast the orchestrator polls; the account says at
which round each kill actually landed. The supervisor carries the faults out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from starling.orchestrator.experiment import Experiment
from starling.orchestrator.faults import NodeFault

if TYPE_CHECKING:
    from starling.orchestrator.supervisor import Supervisor

__all__ = ["NodeFaultPlan", "first_kills"]


@dataclass
class _Pending:
    action: str  # "kill" or "restart"
    node: str
    at_round: int
    scheduled: str
    """How the file put it, for the account: "round 20" or "6 s"."""
    fault: NodeFault | None = None


def first_kills(experiment: Experiment) -> dict[str, int]:
    """Node -> the round of its first scheduled kill (where it is told to hold)."""
    first: dict[str, int] = {}
    for fault in experiment.node_faults:
        first[fault.node] = min(first.get(fault.node, fault.at_round), fault.at_round)
    return first


class NodeFaultPlan:
    """The scheduled kills and restarts not carried out yet."""

    def __init__(self, experiment: Experiment):
        self.pending: list[_Pending] = []
        # The round form of every node fault, also of one written in seconds: it is what
        # both engines isolate the node for, so the real kill lands where the schedule says.
        for fault in experiment.node_faults:
            given = f" ({fault.at_seconds:g} s)" if fault.at_seconds is not None else ""
            self.pending.append(
                _Pending(
                    "kill", fault.node, fault.at_round, f"round {fault.at_round}{given}", fault
                )
            )
            if fault.restart_round is not None:
                self.pending.append(
                    _Pending(
                        "restart",
                        fault.node,
                        fault.restart_round,
                        f"round {fault.restart_round}",
                        fault,
                    )
                )

    def victims(self) -> set[str]:
        """Nodes with a kill still to come (polled quickly)."""
        return {p.node for p in self.pending if p.action == "kill"}

    def next_kill(self, node: str) -> int | None:
        kills = [p.at_round for p in self.pending if p.action == "kill" and p.node == node]
        return min(kills) if kills else None

    def restart_pending(self, node: str) -> bool:
        return any(p.action == "restart" and p.node == node for p in self.pending)

    def drop_restart(self, node: str) -> None:
        """Forget the scheduled restart of ``node``'s present outage (a manual restart
        replaces it); restarts of its later scheduled faults stay."""
        killing = [p for p in self.pending if p.action == "kill"]
        self.pending = [
            p
            for p in self.pending
            if not (
                p.action == "restart"
                and p.node == node
                and not any(self._same_outage(k, p) for k in killing)
            )
        ]

    def fire_due(self, rounds: dict[str, int], supervisor: Supervisor) -> None:
        """Carry out, through ``supervisor``, every fault whose moment has come."""
        from starling.orchestrator.supervisor import (
            RESTART_ERRORS,  # the supervisor imports this module
        )

        nodes = supervisor.nodes
        for item in list(self.pending):
            if item not in self.pending:
                continue  # dropped with its kill
            state = nodes[item.node]
            if item.action == "kill":
                # The node was told to hold before its kill round (Control.Hold), so the
                # crash lands exactly there however slowly this loop polls.
                last = state.last
                due = (
                    last is not None
                    and last.holding
                    and last.round >= item.at_round
                    and self._quiet(supervisor, item.node, item.at_round, rounds)
                )
                if state.finished:
                    self.pending = [
                        p
                        for p in self.pending
                        if p is not item and not (p.action == "restart" and p.node == item.node)
                    ]
                    supervisor.account.node(
                        item.node,
                        "kill_skipped",
                        f"finished before its kill scheduled at {item.scheduled}",
                    )
                    continue
                if due:
                    self.pending.remove(item)
                    supervisor.kill(
                        item.node,
                        f"scheduled at {item.scheduled}",
                        rounds.get(item.node),
                        item.fault,
                    )
                continue
            if any(p.action == "kill" and self._same_outage(p, item) for p in self.pending):
                continue  # its kill has not happened yet
            others = [r for n, r in rounds.items() if n != item.node and not nodes[n].finished]
            alive = [n for n, s in nodes.items() if n != item.node and not s.finished]
            # Restart once every other node has reached the kill round. From then on the
            # schedule, not the dead process, keeps the node cut off until its restart
            # round: its neighbours know not to wait for it (NodeSpec.inbound_faults) and it
            # replays its isolated rounds alone from its checkpoint, so it rejoins at exactly
            # the restart round, as in the simulator. Its process has the whole outage plus
            # one round deadline to boot before anyone waits for it.
            kill_round = item.fault.at_round if item.fault is not None else item.at_round
            due = (bool(others) and min(others) >= kill_round) or not alive
            if due:
                self.pending.remove(item)
                try:
                    supervisor.restart(item.node, f"scheduled at {item.scheduled}")
                except RESTART_ERRORS:
                    pass  # in the account; the node is given up on after the patience

    @staticmethod
    def _same_outage(kill: _Pending, restart: _Pending) -> bool:
        """Whether ``kill`` is the kill that ``restart`` ends: of the same scheduled fault
        (a node may be killed and restarted several times; a later kill must not hold up
        the restart of an earlier one, which it could never follow)."""
        if restart.fault is not None:
            return kill.fault is restart.fault
        return kill.node == restart.node

    @staticmethod
    def _quiet(supervisor: Supervisor, node: str, at_round: int, rounds: dict[str, int]) -> bool:
        """Whether every live out-peer of ``node`` has moved on to ``at_round``, i.e. holds
        ``node``'s messages of the rounds before its outage. A scheduled kill waits for this
        (at most about a round), so the crash loses only what the schedule withholds —
        not a last message still in flight, which the simulator would have delivered."""
        return all(
            rounds.get(peer, at_round) >= at_round
            for peer in supervisor.specs[node].out_peers()
            if not supervisor.nodes[peer].finished
        )
