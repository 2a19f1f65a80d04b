"""The in-memory lockstep transport: every node's messages in one process, no clock.

Semantics in :mod:`starling.node.engine.rounds` (*Simulator: lockstep rounds, one round in
flight*). A synchronous receiver gets, in each (round, phase), the messages sent to it in
that (round, phase). An asynchronous receiver's messages are in flight until
:meth:`LockstepNetwork.end_round` lands them in its latest-box (a later phase's message
from the same sender overwrites an earlier one), so they are used from the next round on.
A withheld message never lands: the receiver keeps the older one, or gets none.

The network keeps the books of every directed link as it carries the messages, by round:
what was sent, withheld, and delivered (taken by a synchronous receiver's gather, or landed
in an asynchronous receiver's latest-box) — the same counters a gRPC node keeps, counted
here by the transport itself, not derived from the schedule (:meth:`LockstepNetwork.books`).

:attr:`LockstepNetwork.traffic` adds up what was handed to the network, as a node's outbound
link books count it on a real one (``LinkCounters.sent`` and ``bytes``, the tensors'
payload): messages and their payload bytes, a withheld one not among them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from starling.node.engine.transport import Gather
from starling.node.messages import Message

__all__ = ["LockstepNetwork", "MemoryTransport"]

_SENT, _WITHHELD, _DELIVERED = 0, 1, 2


class LockstepNetwork:
    """The in-memory network between the nodes of one simulation."""

    def __init__(self, synchronous: Mapping[str, bool]):
        self._synchronous = dict(synchronous)
        # Synchronous receivers: (receiver, round, phase) -> sender -> message.
        self._boxes: dict[tuple[str, int, int], dict[str, Message]] = {}
        # Asynchronous receivers: receiver -> sender -> newest landed message.
        self._latest: dict[str, dict[str, Message]] = {
            node: {} for node, sync in self._synchronous.items() if not sync
        }
        self._in_flight: list[tuple[str, str, Message]] = []
        # The rounds not yet folded into _runs: (sender, receiver, round) -> [sent,
        # withheld, delivered]. A lockstep round's events all carry that round.
        self._pending: dict[tuple[str, str, int], list[int]] = {}
        # (sender, receiver) -> runs of consecutive rounds with equal counts, oldest first:
        # [first round, last round, sent, withheld, delivered] (_fold). A link's counts
        # rarely change from round to round, so memory grows with the changes, not with
        # links × rounds (a dict entry per link and round held 115 MB for a 100-node ring's
        # 2,000 rounds: 20 times its samples).
        self._runs: dict[tuple[str, str], list[list[int]]] = {}
        self.traffic = {"messages": 0, "bytes": 0}
        """Messages posted and their tensors' payload bytes (module docstring)."""

    def endpoint(self, node: str) -> MemoryTransport:
        return MemoryTransport(self, node)

    def books(self, rounds: Mapping[str, int] | None = None) -> dict[str, dict[str, int]]:
        """``"A->B"`` -> ``sent``, ``withheld``, ``delivered`` over the rounds carried (those
        before ``rounds[A]`` if given: a sender's rounds after its end do not count), a
        round still in progress included."""
        books: dict[str, dict[str, int]] = {}
        for sender, receiver, (first, last, sent, withheld, delivered) in self._all_runs():
            entry = books.setdefault(
                f"{sender}->{receiver}", {"sent": 0, "withheld": 0, "delivered": 0}
            )
            if rounds is not None and sender in rounds:
                last = min(last, rounds[sender] - 1)
            times = max(last - first + 1, 0)
            entry["sent"] += sent * times
            entry["withheld"] += withheld * times
            entry["delivered"] += delivered * times
        return dict(sorted(books.items()))

    def _all_runs(self) -> Iterator[tuple[str, str, list[int]]]:
        """(sender, receiver, run) for every run folded, then each pending round as a run
        of one."""
        for (sender, receiver), runs in self._runs.items():
            for run in runs:
                yield sender, receiver, run
        for (sender, receiver, round_index), counts in self._pending.items():
            yield sender, receiver, [round_index, round_index, *counts]

    def _count(self, sender: str, receiver: str, round_index: int, what: int) -> None:
        key = (sender, receiver, round_index)
        tally = self._pending.get(key)
        if tally is None:
            tally = self._pending[key] = [0, 0, 0]
        tally[what] += 1

    def _fold(self) -> None:
        """Move the finished rounds' counts into :attr:`_runs`: a link's round that follows
        its last run with the same counts lengthens that run; any other starts a new one
        (:meth:`books` adds runs up in any order)."""
        for (sender, receiver, round_index), counts in self._pending.items():
            runs = self._runs.setdefault((sender, receiver), [])
            if runs and runs[-1][1] == round_index - 1 and runs[-1][2:] == counts:
                runs[-1][1] = round_index
            else:
                runs.append([round_index, round_index, *counts])
        self._pending.clear()

    def end_round(self) -> None:
        """Land the round's messages to asynchronous receivers, in the order sent; what a
        synchronous receiver did not gather this round is gone (as on a network: late)."""
        for receiver, sender, message in self._in_flight:
            self._latest[receiver][sender] = message
            self._count(sender, receiver, message.round, _DELIVERED)
        self._in_flight.clear()
        self._boxes.clear()
        self._fold()

    def _check(self, sender: str, receiver: str) -> None:
        if receiver not in self._synchronous:
            raise ValueError(f"node {sender!r} sent to unknown peer {receiver!r}")

    def _post(
        self, sender: str, receiver: str, round_index: int, phase: int, message: Message
    ) -> None:
        self._check(sender, receiver)
        self.traffic["messages"] += 1
        self.traffic["bytes"] += message.nbytes
        self._count(sender, receiver, round_index, _SENT)
        # The network hands each receiver its own arrays, stamped with the sending round.
        copy = Message(
            message.kind,
            {k: np.array(v, copy=True) for k, v in message.tensors.items()},
            round=round_index,
        )
        if receiver in self._latest:
            self._in_flight.append((receiver, sender, copy))
        else:
            self._boxes.setdefault((receiver, round_index, phase), {})[sender] = copy

    def _take(
        self, node: str, round_index: int, phase: int, expected: Sequence[str], wait: Gather
    ) -> dict[str, Message]:
        if node not in self._latest:
            box = self._boxes.pop((node, round_index, phase), {})
            for sender in box:
                self._count(sender, node, round_index, _DELIVERED)
            return box
        box = self._latest[node]
        return {s: box[s] for s in expected if s in box}


class MemoryTransport:
    """One node's end of a :class:`LockstepNetwork` (a :class:`~starling.node.engine.Transport`)."""

    def __init__(self, network: LockstepNetwork, node: str):
        self._network = network
        self.node = node

    def send(self, round_index: int, phase: int, receiver: str, message: Message) -> None:
        self._network._post(self.node, receiver, round_index, phase, message)

    def withhold(self, round_index: int, phase: int, receiver: str) -> None:
        self._network._check(self.node, receiver)
        self._network._count(self.node, receiver, round_index, _WITHHELD)

    def gather(
        self, round_index: int, phase: int, expected: Sequence[str], wait: Gather
    ) -> dict[str, Message]:
        return self._network._take(self.node, round_index, phase, expected, wait)
