"""Scheduled link faults: the one place that decides them, for every transport.

A fault lives at the sender's outbound link ([DESIGN] principle 4). Whether the message
of round ``r`` on link ``sender → receiver`` is withheld depends only on the schedule and
a seeded draw, so a schedule replays exactly, in ``simulate`` and in a networked run alike.
The round engine (:mod:`starling.node.engine.rounds`) asks a node's :class:`ScheduledFaults` before
it hands a message to its transport and before it gathers, so the lockstep simulator and
the network links carry the same decisions.

The draw for a random fault (``0 < drop < 1``) is keyed by (fault seed, the *unordered*
pair {sender, receiver}, round). Two directions of one link that carry faults with the
same seed therefore fail together — an undirected link going down as a whole — while
faults with different seeds fail independently. The orchestrator picks the seeds
(:mod:`starling.orchestrator.faults.schedule`): shared for a ``both_ways`` fault, distinct
otherwise.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from starling.node.spec import LinkFault, NodeSpec

__all__ = [
    "ScheduledFaults",
    "link_draw",
    "stable_id",
    "withheld_by_schedule",
]


def stable_id(name: str) -> int:
    """A process-independent integer for a node id (Python's ``hash`` is salted)."""
    return zlib.crc32(name.encode("utf-8"))


def link_draw(seed: int, sender: str, receiver: str, round_index: int) -> float:
    """A uniform draw in [0, 1) for this link and round, the same in both directions."""
    low, high = sorted((stable_id(sender), stable_id(receiver)))
    return float(np.random.default_rng([seed, low, high, round_index]).random())


def withheld_by_schedule(
    faults: Iterable[LinkFault], sender: str, receiver: str, round_index: int
) -> bool:
    """True if a scheduled fault takes out this round's message on ``sender → receiver``."""
    for fault in faults:
        if fault.receiver not in ("*", receiver) or not fault.start <= round_index < fault.stop:
            continue
        if fault.drop >= 1.0:
            return True
        if fault.drop <= 0.0:
            continue
        if link_draw(fault.seed, sender, receiver, round_index) < fault.drop:
            return True
    return False


@dataclass(frozen=True)
class ScheduledFaults:
    """One node's fault schedule, both ways: what it withholds and whom it need not await."""

    node_id: str
    outbound: tuple[LinkFault, ...] = ()
    inbound: tuple[tuple[str, LinkFault], ...] = ()

    @classmethod
    def of(cls, spec: NodeSpec) -> ScheduledFaults:
        return cls(spec.node_id, tuple(spec.link_faults), tuple(spec.inbound_faults))

    def withholds(self, receiver: str, round_index: int) -> bool:
        """True if the schedule takes out this node's message to ``receiver`` this round."""
        return withheld_by_schedule(self.outbound, self.node_id, receiver, round_index)

    def silences(self, sender: str, round_index: int) -> bool:
        """True if ``sender`` is scheduled dead and its link to this node down this round:
        nothing will come from it, not even a withheld notice, so nothing is awaited."""
        if not self.inbound:
            return False
        faults = [fault for peer, fault in self.inbound if peer == sender]
        return withheld_by_schedule(faults, sender, self.node_id, round_index)
