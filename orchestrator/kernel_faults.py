"""Faults that happen in the kernel, not in Starling's code: the ``kernel_faults`` section.

Only the docker backend can carry them out (:mod:`starling.orchestrator.backends.netfault`). Each
entry names one fault and the rounds it spans: the faulty node (the sender, for a link) is
told to hold before ``at_round`` (``Control.Hold``), the fault is set while it waits there,
and it ends once every node on the receiving end of the links it touches has gone
``for_rounds`` rounds further. (A node that also has a scheduled kill keeps that hold; its
kernel faults start when the fastest node reaches ``at_round``.)::

    kernel_faults:
      - {pause: b, at_round: 5, for_rounds: 3}        # frozen; still holds its sockets
      - {disconnect: c, at_round: 5, for_rounds: 3}   # off the network
      - {cut: [a, d], at_round: 8, for_rounds: 4}     # every packet a -> d dropped
      - {loss: [a, d], percent: 30, at_round: 8, for_rounds: 4}
      - {rate: a, kbit: 64, at_round: 8, for_rounds: 4}  # tc tbf on a's interface
      - {delay: [a, d], ms: 50, at_round: 8, for_rounds: 4}  # tc netem, where the kernel has it

Link faults are one-way: packets from the first node to the second. The nodes see only
silence, resets and timeouts; ``metrics.json`` (``faults.kernel``) records each fault,
the rounds it ran over and, per affected link, what the link counters did meanwhile (messages
sent, received, late, and missing: receiver rounds minus messages received).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starling.node.params import ConfigError
from starling.orchestrator.backends.base import BackendError

if TYPE_CHECKING:
    from starling.orchestrator.supervisor import Supervisor

__all__ = [
    "KINDS",
    "LIVE_SPAN",
    "KernelFault",
    "KernelFaultPlan",
    "kernel_holds",
    "parse_kernel_faults",
]

NODE_KINDS = ("pause", "disconnect", "rate")
LINK_KINDS = ("cut", "loss", "delay")
KINDS = NODE_KINDS + LINK_KINDS
_AMOUNT = {"loss": "percent", "rate": "kbit", "delay": "ms"}


@dataclass(frozen=True)
class KernelFault:
    kind: str
    node: str
    peer: str | None
    """The receiving node of a link fault (packets node -> peer)."""
    at_round: int
    for_rounds: int
    amount: float | None = None
    """percent (loss), kbit (rate) or ms (delay)."""

    @property
    def label(self) -> str:
        what = f"link {self.node}->{self.peer}" if self.peer else f"node {self.node}"
        amount = f" {self.amount:g} {_AMOUNT[self.kind]}" if self.amount is not None else ""
        return f"{self.kind}{amount} of {what}"


def _int(item: Mapping, key: str, where: str, minimum: int) -> int:
    value = item.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}.{key}: expected a whole number >= {minimum}, got {value!r}")
    return value


def parse_kernel_faults(raw: Any, nodes: Sequence[str], rounds: int) -> tuple[KernelFault, ...]:
    """The ``kernel_faults`` list, checked against the node ids and the run length."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError("kernel_faults: expected a list such as [{pause: b, at_round: 5, ...}]")
    known = set(nodes)
    faults = []
    for k, item in enumerate(raw):
        where = f"kernel_faults[{k}]"
        if not isinstance(item, Mapping):
            raise ConfigError(f"{where}: expected a mapping such as {{cut: [a, b], ...}}")
        kinds = [kind for kind in KINDS if kind in item]
        if len(kinds) != 1:
            raise ConfigError(f"{where}: name exactly one of {', '.join(KINDS)}")
        kind = kinds[0]
        allowed = {kind, "at_round", "for_rounds"} | ({_AMOUNT[kind]} if kind in _AMOUNT else set())
        unknown = sorted(set(map(str, item)) - allowed)
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]}: unknown field for a {kind} fault")
        if kind in LINK_KINDS:
            pair = item[kind]
            if not isinstance(pair, list) or len(pair) != 2 or pair[0] == pair[1]:
                raise ConfigError(f"{where}.{kind}: expected [SENDER, RECEIVER], got {pair!r}")
            node, peer = str(pair[0]), str(pair[1])
        else:
            node, peer = str(item[kind]), None
        for name in (node, peer):
            if name is not None and name not in known:
                raise ConfigError(f"{where}.{kind}: no node {name!r} in this experiment")
        at = _int(item, "at_round", where, 0)
        span = _int(item, "for_rounds", where, 1)
        if at >= rounds:
            raise ConfigError(f"{where}.at_round: {at} is past the last round ({rounds - 1})")
        amount = None
        if kind in _AMOUNT:
            value = item.get(_AMOUNT[kind])
            top = 100 if kind == "loss" else float("inf")
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not number or not isinstance(value, (int, float)) or not 0 < value <= top:
                raise ConfigError(
                    f"{where}.{_AMOUNT[kind]}: expected a number in (0, {top:g}], got {value!r}"
                )
            amount = float(value)
        faults.append(KernelFault(kind, node, peer, at, span, amount))
    return tuple(faults)


def kernel_holds(experiment) -> dict[str, int]:
    """Node -> the round it holds before, for its first kernel fault (Control.Hold), so the
    fault lands at that round however fast the rounds go. Nodes with a scheduled kill keep
    that hold (starling.orchestrator.fault_plan); their kernel faults follow the run's front."""
    killed = {fault.node for fault in experiment.node_faults}
    holds: dict[str, int] = {}
    for fault in experiment.kernel_faults:
        if fault.node not in killed:
            holds[fault.node] = min(holds.get(fault.node, fault.at_round), fault.at_round)
    return holds


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

    def fire_due(self, rounds: Mapping[str, int], supervisor: Supervisor) -> None:
        if not rounds or not (self.pending or self.active):
            return
        front = max(rounds.values())
        nodes = supervisor.nodes
        for item in list(self.active):
            if all(
                rounds.get(r, 0) - start >= item.fault.for_rounds or nodes[r].finished
                for r, start in item.receiver_rounds.items()
                if r != item.fault.node or item.fault.peer is not None
            ):
                self.active.remove(item)
                self._end(item, rounds, supervisor)
        for fault in list(self.pending):
            if fault.node in self.held:
                last = nodes[fault.node].last
                due = last is not None and last.holding and last.round >= fault.at_round
                due = due or nodes[fault.node].finished
            else:
                due = front >= fault.at_round
            if due:
                self.pending.remove(fault)
                self._start(fault, rounds, supervisor)

    def subjects(self) -> set[str]:
        """Held nodes with a fault to come: the run loop polls them quickly."""
        return {f.node for f in self.pending if f.node in self.held}

    def _release(self, node: str, supervisor: Supervisor) -> None:
        """Let a held node go on, to its next kernel fault's round if it has one."""
        if node not in self.held:
            return
        later = [f.at_round for f in self.pending if f.node == node]
        supervisor.clients[node].hold(min(later) if later else None)

    def finish(self, supervisor: Supervisor) -> None:
        """End what is still on (the run is over) and note what never started."""
        rounds = supervisor.rounds()
        for item in list(self.active):
            self.active.remove(item)
            self._end(item, rounds, supervisor)
        for fault in self.pending:
            supervisor.account.kernel(
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
        supervisor: Supervisor,
        sender: str,
        receiver: str,
        kind: str,
        amount: float | None,
        who: str,
    ) -> None:
        """``starling links cut|set|restore A B --kernel`` during the run: a kernel link
        fault set now (replacing one already on that link) or, for ``restore``, ended now;
        either way its record with the link's counters goes into the account as for a
        scheduled one. A BackendError when the backend cannot or the engine refuses."""
        if not hasattr(self.backend, "drop_link"):
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
            self._end(item, supervisor.rounds(), supervisor)
        if kind == "restore":
            return
        if kind == "delay":
            self.backend.check_delay()
        rounds = supervisor.rounds() or {sender: 0}
        fault = KernelFault(kind, sender, receiver, max(rounds.values()), LIVE_SPAN, amount)
        self._start(fault, rounds, supervisor, live={"live": True, "who": who})

    def _links(self, fault: KernelFault, supervisor: Supervisor) -> list[tuple[str, str]]:
        if fault.peer is not None:
            return [(fault.node, fault.peer)]
        spec = supervisor.specs[fault.node]
        return [(fault.node, p) for p in spec.out_peers()] + [
            (p, fault.node) for p in spec.in_peers()
        ]

    def _start(
        self, fault: KernelFault, rounds: Mapping[str, int], supervisor, live: dict | None = None
    ) -> None:
        touched = {n for link in self._links(fault, supervisor) for n in link}
        supervisor.poll(sorted(touched - self.backend.silenced), pull=False)  # fresh counters
        if live is not None:  # the node is not held for it: set it as it runs
            self.backend.apply_fault(fault)
        elif fault.kind == "pause":
            self.backend.apply_fault(fault)  # frozen at its hold; let go once thawed (_end)
        elif fault.kind == "disconnect":
            self._release(fault.node, supervisor)  # off the network it cannot be told
            self.backend.apply_fault(fault)
        else:
            self.backend.apply_fault(fault)
            self._release(fault.node, supervisor)
        receivers = {b for _, b in self._links(fault, supervisor)}
        self.active.append(
            _Active(
                fault,
                max(rounds.values()),
                supervisor.link_stats(),
                {r: rounds.get(r, 0) for r in receivers},
                live,
            )
        )
        by = f" (live, by {live['who']})" if live else ""
        supervisor.account.plain(f"kernel: {fault.label} on at round {max(rounds.values())}{by}")

    def _end(self, item: _Active, rounds: Mapping[str, int], supervisor) -> None:
        fault = item.fault
        self.backend.clear_fault(fault)
        if fault.kind == "pause":
            self._release(fault.node, supervisor)
        # A node that was paused or off the network answers again only after this.
        supervisor.poll(sorted(set(supervisor.clients) - self.backend.silenced), pull=False)
        after = supervisor.link_stats()
        effect = {}
        for a, b in self._links(fault, supervisor):
            sent = _delta(item.before, after, a, "outbound", b, "sent")
            got = _delta(item.before, after, b, "inbound", a, "received")
            late = _delta(item.before, after, b, "inbound", a, "late")
            advanced = supervisor.rounds().get(b, 0) - item.receiver_rounds.get(b, 0)
            effect[f"{a}->{b}"] = {
                "sent": sent,
                "received": got,
                "late": late,
                "missing": max(advanced - got, 0),
            }
        ended = max(supervisor.rounds().values(), default=item.started_round)
        missing = sum(e["missing"] for e in effect.values())
        late = sum(e["late"] for e in effect.values())
        supervisor.account.kernel(
            {
                "kind": fault.kind,
                "node": fault.node,
                "peer": fault.peer,
                "amount": fault.amount,
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


def _delta(before: Mapping, after: Mapping, node: str, direction: str, peer: str, key: str):
    return _count(after, node, direction, peer, key) - _count(before, node, direction, peer, key)


def _count(books: Mapping, node: str, direction: str, peer: str, key: str) -> int:
    return int(books.get(node, {}).get(direction, {}).get(peer, {}).get(key, 0))
