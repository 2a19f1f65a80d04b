"""What the round engine needs from whatever carries messages: send, withhold, gather.

Two transports implement it: the in-memory lockstep one (:mod:`starling.node.engine.memory`, the
simulator) and the network one (:mod:`starling.node.runtime.network`, outbound links and the inbox
of a gRPC node). The engine (:func:`starling.node.engine.rounds.round_steps`) decides everything a
schedule decides — which message a scheduled fault withholds, which sender is scheduled
silent — so a transport only carries, waits and counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from starling.node.messages import Message

__all__ = ["Gather", "Transport"]


@dataclass(frozen=True)
class Gather:
    """How long one phase's gather may wait ([DESIGN] principle 2).

    ``synchronous``: wait for this (round, phase)'s message of every expected sender, until
    all answered or ``deadline``. Otherwise take each expected sender's latest message, after
    waiting — up to ``deadline`` — until none is more than ``max_staleness`` rounds old; no
    wait when ``max_staleness`` is None. ``deadline`` is a ``time.monotonic()`` value, or
    None where nothing waits on a clock (the lockstep transport).
    """

    synchronous: bool
    max_staleness: int | None = None
    deadline: float | None = None


class Transport(Protocol):
    """One node's end of the network, as the round engine sees it."""

    def send(self, round_index: int, phase: int, receiver: str, message: Message) -> None:
        """Hand ``message`` towards ``receiver``; never blocks on the receiver."""

    def withhold(self, round_index: int, phase: int, receiver: str) -> None:
        """A scheduled fault takes out this message: nothing usable reaches ``receiver``
        (on a network it is told so at once, with a withheld notice)."""

    def gather(
        self, round_index: int, phase: int, expected: Sequence[str], wait: Gather
    ) -> dict[str, Message]:
        """This phase's inbox, keyed by sender (any order): what arrived as ``wait`` says."""
