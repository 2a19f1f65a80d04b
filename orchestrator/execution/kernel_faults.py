"""The kernel faults of a run carried out: started and ended as the run's front moves.

What the ``kernel_faults`` section may hold, and when each fault starts and how long it lasts,
is :mod:`starling.orchestrator.faults.kernel`; here a backend that can (docker,
:mod:`starling.orchestrator.execution.backends.netfault`) sets and clears them, and the run's
nodes are acted on through :class:`~starling.orchestrator.execution.node_actions.NodeActions`.
Each fault's record, with what the link counters did meanwhile, goes into the account.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from starling.orchestrator.core.errors import BackendError
from starling.orchestrator.execution.node_actions import NodeActions, link_delta
from starling.orchestrator.faults.kernel import KernelFault

__all__ = ["LIVE_SPAN", "KernelFaultPlan"]


LIVE_SPAN = 2**31 - 1
"""``for_rounds`` of a fault set by hand: it lasts until cleared by hand or the run ends."""


@dataclass
class _Active:
    fault: KernelFault
    started_round: int
    before: dict
    receiver_rounds: dict[str, int]
    live: dict | None = None
    """Set by hand (``starling links ... --kernel``): who, for the record."""


class KernelFaultPlan:
    """The scheduled kernel faults of a run, started and ended as the run's front moves;
    each one's record goes into the account (``faults.kernel`` of ``metrics.json``)."""

    def __init__(self, faults: Sequence[KernelFault], backend, held: Iterable[str] = ()):
        self.pending = sorted(faults, key=lambda f: f.at_round)
        self.held = set(held)
        """Nodes told to hold before their next kernel fault (:func:`kernel_holds`)."""
        self.active: list[_Active] = []
        self.backend = backend
        if any(f.kind not in ("pause", "disconnect") for f in faults):
            backend.check_helper()  # the nft/tc helper image is there (backends.netfault)
        if any(f.kind == "delay" for f in faults):
            backend.check_delay()  # a BackendError with the reason when there is no netem

    def fire_due(self, rounds: Mapping[str, int], nodes: NodeActions) -> None:
        if not rounds or not (self.pending or self.active):
            return
        front = max(rounds.values())
        for item in list(self.active):
            if all(
                rounds.get(r, 0) - start >= item.fault.for_rounds or nodes.view(r).finished
                for r, start in item.receiver_rounds.items()
                if r != item.fault.node or item.fault.peer is not None
            ):
                self.active.remove(item)
                self._end(item, rounds, nodes)
        for fault in list(self.pending):
            if fault.node in self.held:
                view = nodes.view(fault.node)
                due = view.holding and view.round is not None and view.round >= fault.at_round
                due = due or view.finished
            else:
                due = front >= fault.at_round
            if due:
                self.pending.remove(fault)
                self._start(fault, rounds, nodes)

    def subjects(self) -> set[str]:
        """Held nodes with a fault to come: the run loop polls them quickly."""
        return {f.node for f in self.pending if f.node in self.held}

    def _release(self, node: str, nodes: NodeActions) -> None:
        """Let a held node go on, to its next kernel fault's round if it has one."""
        if node not in self.held:
            return
        later = [f.at_round for f in self.pending if f.node == node]
        nodes.hold(node, min(later) if later else None)

    def finish(self, nodes: NodeActions) -> None:
        """End what is still on (the run is over) and note what never started."""
        rounds = nodes.rounds()
        for item in list(self.active):
            self.active.remove(item)
            self._end(item, rounds, nodes)
        for fault in self.pending:
            nodes.account.kernel(
                {
                    "kind": fault.kind,
                    "node": fault.node,
                    "peer": fault.peer,
                    "at_round": fault.at_round,
                    "started": False,
                },
                f"{fault.label}: never started (the run ended first)",
            )
        self.pending = []

    def live_link(
        self,
        nodes: NodeActions,
        sender: str,
        receiver: str,
        kind: str,
        amount: float | None,
        who: str,
        jitter: float = 0.0,
    ) -> None:
        """``starling links cut|set|restore A B --kernel`` during the run: a kernel link
        fault set now (replacing one already on that link) or, for ``restore``, ended now;
        either way its record with the link's counters goes into the account as for a
        scheduled one. A BackendError when the backend cannot or the engine refuses."""
        if not self.backend.capabilities.kernel_faults:
            raise BackendError(
                f"the {self.backend.kind} backend cannot fault a link in the kernel (docker can)"
            )
        on_link = [
            item
            for item in self.active
            if item.fault.node == sender and item.fault.peer == receiver
        ]
        if kind == "restore" and not on_link:
            raise BackendError(f"link {sender}->{receiver}: no kernel fault is on")
        for item in on_link:
            self.active.remove(item)
            self._end(item, nodes.rounds(), nodes)
        if kind == "restore":
            return
        if kind == "delay":
            self.backend.check_delay()
        rounds = nodes.rounds() or {sender: 0}
        fault = KernelFault(kind, sender, receiver, max(rounds.values()), LIVE_SPAN, amount, jitter)
        self._start(fault, rounds, nodes, live={"live": True, "who": who})

    def _links(self, fault: KernelFault, nodes: NodeActions) -> list[tuple[str, str]]:
        if fault.peer is not None:
            return [(fault.node, fault.peer)]
        outs, ins = nodes.out_peers(fault.node), nodes.in_peers(fault.node)
        return [(fault.node, p) for p in outs] + [(p, fault.node) for p in ins]

    def _start(
        self,
        fault: KernelFault,
        rounds: Mapping[str, int],
        nodes: NodeActions,
        live: dict | None = None,
    ) -> None:
        touched = {n for link in self._links(fault, nodes) for n in link}
        nodes.poll(sorted(touched - nodes.silenced()), pull=False)  # fresh counters
        if live is not None:  # the node is not held for it: set it as it runs
            self.backend.apply_fault(fault)
        elif fault.kind == "pause":
            self.backend.apply_fault(fault)  # frozen at its hold; let go once thawed (_end)
        elif fault.kind == "disconnect":
            self._release(fault.node, nodes)  # off the network it cannot be told
            self.backend.apply_fault(fault)
        else:
            self.backend.apply_fault(fault)
            self._release(fault.node, nodes)
        receivers = {b for _, b in self._links(fault, nodes)}
        self.active.append(
            _Active(
                fault,
                max(rounds.values()),
                nodes.link_stats(),
                {r: rounds.get(r, 0) for r in receivers},
                live,
            )
        )
        by = f" (live, by {live['who']})" if live else ""
        nodes.account.plain(f"kernel: {fault.label} on at round {max(rounds.values())}{by}")

    def _end(self, item: _Active, rounds: Mapping[str, int], nodes: NodeActions) -> None:
        fault = item.fault
        self.backend.clear_fault(fault)
        if fault.kind == "pause":
            self._release(fault.node, nodes)
        # A node that was paused or off the network answers again only after this.
        nodes.poll(sorted(set(nodes.node_ids()) - nodes.silenced()), pull=False)
        after = nodes.link_stats()
        effect = {}
        for a, b in self._links(fault, nodes):
            sent = link_delta(item.before, after, a, "outbound", b, "sent")
            got = link_delta(item.before, after, b, "inbound", a, "received")
            late = link_delta(item.before, after, b, "inbound", a, "late")
            advanced = nodes.rounds().get(b, 0) - item.receiver_rounds.get(b, 0)
            effect[f"{a}->{b}"] = {
                "sent": sent,
                "received": got,
                "late": late,
                "missing": max(advanced - got, 0),
            }
        ended = max(nodes.rounds().values(), default=item.started_round)
        missing = sum(e["missing"] for e in effect.values())
        late = sum(e["late"] for e in effect.values())
        nodes.account.kernel(
            {
                "kind": fault.kind,
                "node": fault.node,
                "peer": fault.peer,
                "amount": fault.amount,
                **({"jitter_ms": fault.jitter} if fault.jitter else {}),
                "at_round": fault.at_round,
                "started_round": item.started_round,
                "ended_round": ended,
                "started": True,
                "links": effect,
                **(item.live or {}),
            },
            f"{fault.label}{' (live)' if item.live else ''}: rounds {item.started_round}..{ended}, "
            f"{missing} messages missing and {late} late on the links it touched",
        )
