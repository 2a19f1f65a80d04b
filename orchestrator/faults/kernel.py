"""Faults that happen in the kernel, not in Starling's code: the ``kernel_faults`` section.

Only the docker backend can carry them out
(:mod:`starling.orchestrator.execution.backends.netfault`). Each entry names one fault and the
rounds it spans: the faulty node (the sender, for a link) is told to hold before ``at_round``
(``Control.Hold``), the fault is set while it waits there, and it ends once every node on the
receiving end of the links it touches has gone
``for_rounds`` rounds further. (A node that also has a scheduled kill keeps that hold; its
kernel faults start when the fastest node reaches ``at_round``.)::

    kernel_faults:
      - {pause: b, at_round: 5, for_rounds: 3}        # frozen; still holds its sockets
      - {disconnect: c, at_round: 5, for_rounds: 3}   # off the network
      - {cut: [a, d], at_round: 8, for_rounds: 4}     # every packet a -> d dropped
      - {loss: [a, d], percent: 30, at_round: 8, for_rounds: 4}
      - {rate: a, kbit: 64, at_round: 8, for_rounds: 4}  # tc tbf on a's interface
      - {delay: [a, d], ms: 50, jitter_ms: 10, at_round: 8, for_rounds: 4}  # tc netem
      - {reset: [a, d], at_round: 8, for_rounds: 4}   # a's packets to d answered with resets

Link faults are one-way: packets from the first node to the second, dropped (or reset) as
they arrive at the second, so they are lost on the wire. On a gRPC stream over TCP a lost
packet is retransmitted: kernel loss means retransmissions and delay, never a lost message
(the application-level ``drop`` of ``faults`` and ``starling links set`` loses messages).
``delay`` needs ``tc netem`` in the kernel. The nodes see only silence, resets and
timeouts; ``metrics.json`` (``faults.kernel``) records each fault, the rounds it ran over
and, per affected link, what the link counters did meanwhile (messages
sent, received, late, and missing: receiver rounds minus messages received).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from starling.node.params import ConfigError
from starling.orchestrator.faults.schedule import NodeFault

__all__ = [
    "KINDS",
    "KernelFault",
    "kernel_holds",
    "parse_kernel_faults",
]

NODE_KINDS = ("pause", "disconnect", "rate")
LINK_KINDS = ("cut", "loss", "delay", "reset")
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
    jitter: float = 0.0
    """ms of jitter around a delay (normally distributed; 0: none)."""

    @property
    def label(self) -> str:
        what = f"link {self.node}->{self.peer}" if self.peer else f"node {self.node}"
        amount = f" {self.amount:g} {_AMOUNT[self.kind]}" if self.amount is not None else ""
        if self.jitter:
            amount += f" ± {self.jitter:g} ms"
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
        if kind == "delay":
            allowed.add("jitter_ms")
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
        jitter = item.get("jitter_ms", 0)
        if isinstance(jitter, bool) or not isinstance(jitter, (int, float)) or jitter < 0:
            raise ConfigError(f"{where}.jitter_ms: expected a number >= 0, got {jitter!r}")
        faults.append(KernelFault(kind, node, peer, at, span, amount, float(jitter)))
    return tuple(faults)


def kernel_holds(
    kernel_faults: Iterable[KernelFault], node_faults: Iterable[NodeFault]
) -> dict[str, int]:
    """Node -> the round it holds before, for its first kernel fault (Control.Hold), so the
    fault lands at that round however fast the rounds go. Nodes with a scheduled kill keep
    that hold (starling.orchestrator.execution.node_faults); their kernel faults follow the run's
    front."""
    killed = {fault.node for fault in node_faults}
    holds: dict[str, int] = {}
    for fault in kernel_faults:
        if fault.node not in killed:
            holds[fault.node] = min(holds.get(fault.node, fault.at_round), fault.at_round)
    return holds
