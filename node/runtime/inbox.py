"""Where arriving messages wait for the round loop, and how long the loop waits for them.

Synchronous programs: messages are buffered by (round, phase). The round loop waits for
the expected senders of its current (round, phase) until each has *answered* or the
deadline passes, then takes what arrived and closes that (round, phase); anything for it
that comes later is counted ``late`` and dropped (that link was down that round). A sender
has answered when its message or its withheld notice is here, or a message of it for that
(round, phase) refused for its content (:data:`REFUSED`: screened, malformed tensors), or
when a message of a *later* (round, phase) from it is here: a link is one ordered stream,
so the earlier one is lost. That is also what lets a node restarted from a checkpoint
catch up with its peers without waiting out a deadline per round.

Asynchronous programs (semantics in :mod:`starling.node.engine.rounds`): each phase's inbox
holds, for each expected sender, the latest message received from it (any round, reused
until replaced), stamped with the round it was sent in. With a staleness bound the round
loop first waits (:meth:`Inbox.wait_latest`) until every expected sender's latest message
is at most that many rounds old, or the sender answered for such a round with a withheld
notice, or the deadline passes; each sender still short at the deadline is an *overrun*,
counted in ``overruns`` on its inbound link. Without a bound nothing is waited for.

What one sender may have waiting for rounds the loop has not reached is bounded
(:data:`PENDING_MESSAGES`, :data:`PENDING_BYTES`, what a sender's link itself keeps for a
resend): past it a message is refused (``"overflow"``), so a peer racing ahead, or one
flooding valid messages for future rounds, cannot fill the receiver's memory. An
asynchronous program keeps no message but each sender's latest; what it counts as pending
is kept per (round, sender, outcome), however many messages arrive for that round, so
there too a flood costs no memory per message (the round window bounds the rounds).

Counting, on the sender's inbound link (:meth:`Inbox.deliver`): a message or notice for a
round the node has not run yet is also *pending* until it has (``pending_received``,
``pending_withheld``, ``pending_bytes``), counted and settled under the inbox's lock. A
process that dies loses what is pending, and the orchestrator carries its books without it
(:mod:`starling.orchestrator.results.link_books`); a resent message for a round before the process's
first (its predecessor's, which counted it) is used but not counted again. Each message
is thus counted once across a node's restarts.

A sender the orchestrator declared down (:meth:`Inbox.set_down`: crashed for good, stopped,
unreachable past its grace period) is not waited for by either kind of gather, at once —
a waiting gather wakes up — until it is marked up again; what it did deliver is still used.

Deadlines are readings of the inbox's clock (:mod:`starling.node.runtime.clock`): real time,
``time.monotonic``, as the round engine reads it, unless a test hands its own.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable, Iterable

from starling.node.engine.transport import Gather
from starling.node.messages import Message
from starling.node.runtime.clock import MONOTONIC, Clock
from starling.node.runtime.stats import StatsBook

__all__ = ["PENDING_BYTES", "PENDING_MESSAGES", "WITHHELD", "Inbox"]

PENDING_MESSAGES = 1024
"""At most this many messages of one sender wait for their rounds (a synchronous program)."""

PENDING_BYTES = 64 * 1024 * 1024
"""At most this much tensor payload of one sender waits for its rounds; a single message
is always taken, however large (the transport's size limit bounds it)."""

Key = tuple[int, int]


class _Withheld:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


WITHHELD = _Withheld("WITHHELD")
"""Stands for a withheld notice: the sender answered, with nothing."""

REFUSED = _Withheld("REFUSED")
"""Stands for a message refused for its content (a value beyond the screening bound, bytes
that do not match their shapes) from a sender the receiver admits, for a round it may send:
the sender answered for that round, with nothing the receiver can use, so the round need not
wait out its deadline for it. Counted ``rejected`` by the caller, never by the inbox."""

_LAST_PHASE = 2**31


class Inbox:
    def __init__(
        self,
        stats: StatsBook,
        next_round: int = 0,
        synchronous: bool = True,
        clock: Clock = MONOTONIC,
    ):
        self._stats = stats
        self._clock = clock
        self._synchronous = synchronous
        self._cond = threading.Condition()
        self._pending: dict[Key, dict[str, Message | _Withheld]] = {}
        # Everything at or before this (round, phase) is closed: a message for it is late.
        self._closed: Key = (next_round - 1, _LAST_PHASE)
        self._last_seen: dict[str, Key] = {}
        self._latest: dict[str, Message] = {}
        self._down: set[str] = set()
        self._interrupted = False
        self.on_answer: Callable[[], None] | None = None
        """Called (from the delivering thread) whenever a waiting gather would be woken:
        how the node's event loop learns that the phase it awaits may be answered
        (:meth:`ready`)."""
        # What a synchronous gather waits for, if one does: (round, phase), senders. A
        # delivery wakes it only once that set has answered, not at every arrival.
        self._awaited: tuple[Key, tuple[str, ...]] | None = None
        # Per sender: messages and payload bytes in _pending.
        self._load: dict[str, list[int]] = {}
        # Asynchronous programs: where this process started (a resume round), and what it
        # counted for rounds it has not gathered yet, one entry per (round, sender,
        # outcome) however many messages it stands for: round -> (sender, outcome) ->
        # [messages, bytes], with a heap of those rounds. A flood of messages for one
        # future round costs no memory per message; rounds are bounded by the round window.
        self._first_round = next_round
        self._gathered = next_round - 1  # the last round gathered for
        self._ahead: dict[int, dict[tuple[str, str], list[int]]] = {}
        self._ahead_rounds: list[int] = []

    def deliver(
        self,
        sender: str,
        round_index: int,
        phase: int,
        item: Message | _Withheld,
        resent: bool = False,
    ) -> str:
        """File an arrival: ``"received"``, ``"withheld"``, ``"late"`` or ``"duplicate"``;
        ``"stale resend"`` for a resent one that is already here or past (not an error:
        the link could not know it had arrived), and for a copy of a closed round's message
        from a sender that already sent that round or a later one (a restarted sender
        running its round again); ``"refused"`` for :data:`REFUSED`; ``"overflow"`` for
        one refused because its sender has too much waiting already (module docstring).
        The first three are
        counted on the sender's inbound link here; the caller counts refusals."""
        key = (round_index, phase)
        with self._cond:
            seen_before = self._last_seen.get(sender, (-1, -1))
            if resent and (
                (key <= self._last_seen.get(sender, (-1, -1)))
                if not self._synchronous
                else (key <= self._closed or self._holds(key, sender))
            ):
                return "stale resend"
            if item is REFUSED:
                return self._refused(sender, key)
            if isinstance(item, Message):
                latest = self._latest.get(sender)
                if latest is None or latest.round <= round_index:
                    self._latest[sender] = item
            self._last_seen[sender] = max(self._last_seen.get(sender, key), key)
            size = item.nbytes if isinstance(item, Message) else 0
            if not self._synchronous:
                outcome = "withheld" if item is WITHHELD else "received"
                if resent and round_index < self._first_round:
                    # Sent to the process this one resumes from, for a round it ran: that
                    # process counted it (it may still be the latest this one has).
                    outcome = "stale resend"
                elif round_index <= self._gathered:  # for a round already run: settled
                    self._stats.add(sender, outcome, nbytes=size)
                else:  # pending until a gather of its round (see _settle_ahead)
                    self._stats.file(sender, outcome, size)
                    self._file_ahead(round_index, sender, outcome, size)
            elif key <= self._closed:
                if key <= seen_before:
                    # A closed round's message from a sender that already sent this round or
                    # a later one on its ordered stream: a copy (a restarted sender runs the
                    # round again, bit for bit), counted when its first copy came.
                    return "stale resend"
                # A notice carries nothing, so it is never late data: a receiver that knew
                # from the schedule not to wait has closed the round before it came.
                outcome = "withheld" if item is WITHHELD else "late"
                self._stats.add(sender, outcome, nbytes=size)
            else:
                box = self._pending.setdefault(key, {})
                if self._holds(key, sender):
                    return "duplicate"
                load = self._load.setdefault(sender, [0, 0])
                if load[0] and (load[0] >= PENDING_MESSAGES or load[1] + size > PENDING_BYTES):
                    if not box:
                        del self._pending[key]
                    return "overflow"
                load[0] += 1
                load[1] += size
                box[sender] = item
                outcome = "withheld" if item is WITHHELD else "received"
                # Counted, and pending until its round closes, under this lock: a status
                # never shows a filed message uncounted or a closed one still pending.
                self._stats.file(sender, outcome, size)
            if self._awaited is None or not self._missing(*self._awaited):
                self._wake()
        return outcome

    def _holds(self, key: Key, sender: str) -> bool:
        """Whether ``sender``'s answer for ``key`` is here, a message or a notice (lock
        held); a :data:`REFUSED` one gives way to a usable message of the same round."""
        return self._pending.get(key, {}).get(sender, REFUSED) is not REFUSED

    def _refused(self, sender: str, key: Key) -> str:
        """File :data:`REFUSED` for ``sender`` at ``key`` (lock held): it answered, like a
        withheld notice, but nothing is counted or held against its load."""
        self._last_seen[sender] = max(self._last_seen.get(sender, key), key)
        if self._synchronous and key > self._closed:
            self._pending.setdefault(key, {}).setdefault(sender, REFUSED)
        if self._awaited is None or not self._missing(*self._awaited):
            self._wake()
        return "refused"

    def _wake(self) -> None:
        """Wake a waiting gather, and the event loop's (lock held)."""
        self._cond.notify_all()
        if self.on_answer is not None:
            self.on_answer()

    def _unload(self, box: dict[str, Message | _Withheld]) -> None:
        """Take a closed (round, phase)'s messages off their senders' loads and out of
        their pending counts (lock held)."""
        for sender, item in box.items():
            if item is REFUSED:
                continue  # never loaded nor counted here
            size = item.nbytes if isinstance(item, Message) else 0
            load = self._load[sender]
            load[0] -= 1
            load[1] -= size
            self._stats.settle(sender, "withheld" if item is WITHHELD else "received", size)

    def _missing(self, key: Key, expected: tuple[str, ...]) -> list[str]:
        """The expected senders that have not answered for ``key`` (lock held)."""
        box = self._pending.get(key, {})
        return [
            s
            for s in expected
            if s not in box and s not in self._down and self._last_seen.get(s, (-1, -1)) <= key
        ]

    def ready(self, round_index: int, phase: int, expected: Iterable[str], wait: Gather) -> bool:
        """Whether the gather ``wait`` describes (:class:`~starling.node.engine.transport.Gather`,
        its deadline aside) would return at once: a synchronous one once every expected
        sender answered or is down (:meth:`wait`), a bounded-staleness one once none is too
        far behind (:meth:`wait_latest`), an unbounded one always; and any once interrupted.
        Nothing is closed. The node's event loop asks it before it gathers, and awaits
        :attr:`on_answer` while it is False: a synchronous gather's senders then call it
        only once all of them answered."""
        if not wait.synchronous and wait.max_staleness is None:
            return True
        expected = tuple(expected)
        with self._cond:
            if self._interrupted:
                return True
            if not wait.synchronous:
                return not self._short(expected, round_index - (wait.max_staleness or 0))
            key = (round_index, phase)
            missing = self._missing(key, expected)
            self._awaited = (key, expected) if missing else None
            return not missing

    def wait(
        self, round_index: int, phase: int, expected: Iterable[str], deadline: float
    ) -> dict[str, Message]:
        """The messages of (round, phase), once every expected sender answered or at
        ``deadline`` (a reading of the inbox's clock); closes (round, phase)."""
        key = (round_index, phase)
        expected = tuple(expected)
        with self._cond:
            self._awaited = (key, expected)
            while not self._interrupted and self._missing(key, expected):
                remaining = deadline - self._clock.now()
                if remaining <= 0:
                    break
                self._clock.wait(self._cond, remaining)
            self._awaited = None
            box = self._pending.pop(key, {})
            self._unload(box)
            self._closed = max(self._closed, key)
            for stale in [k for k in self._pending if k <= key]:
                self._unload(self._pending.pop(stale))
        return {s: m for s, m in box.items() if isinstance(m, Message)}

    def latest(self, expected: Iterable[str], round_index: int) -> dict[str, Message]:
        """For asynchronous programs: the latest message of each expected sender, if any."""
        with self._cond:
            out = {s: self._latest[s] for s in expected if s in self._latest}
            self._settle_ahead(round_index)
        for sender, message in out.items():
            self._stats.note_staleness(sender, max(round_index - message.round, 0))
        return out

    def _settle_ahead(self, round_index: int) -> None:
        """Asynchronous programs, gathering for ``round_index``: what was counted for it and
        earlier rounds is no longer pending (lock held). What a process that dies still
        holds pending, its successor counts when it is resent."""
        self._gathered = max(self._gathered, round_index)
        while self._ahead_rounds and self._ahead_rounds[0] <= round_index:
            filed = self._ahead.pop(heapq.heappop(self._ahead_rounds))
            for (sender, outcome), (count, size) in filed.items():
                self._stats.settle(sender, outcome, size, count=count)

    def _file_ahead(self, round_index: int, sender: str, outcome: str, size: int) -> None:
        """Asynchronous programs: note one message counted pending for ``round_index``
        (lock held), coalesced with the others of its round, sender and outcome."""
        filed = self._ahead.get(round_index)
        if filed is None:
            filed = self._ahead[round_index] = {}
            heapq.heappush(self._ahead_rounds, round_index)
        entry = filed.setdefault((sender, outcome), [0, 0])
        entry[0] += 1
        entry[1] += size

    def wait_latest(
        self, expected: Iterable[str], round_index: int, max_staleness: int, deadline: float
    ) -> dict[str, Message]:
        """Bounded staleness (stale synchronous parallel, Ho et al. 2013): wait until each
        expected sender has answered for round ``round_index − max_staleness`` or later —
        a message or a withheld notice of such a round is here — or until ``deadline``;
        then return :meth:`latest`. A sender still short at the deadline is counted in
        ``overruns`` on its inbound link. Rounds before 0 need no answer: while ``round_index <
        max_staleness`` nothing is waited for."""
        expected = tuple(expected)
        needed = round_index - max_staleness
        with self._cond:
            while True:
                short = self._short(expected, needed)
                if not short or self._interrupted:
                    break
                remaining = deadline - self._clock.now()
                if remaining <= 0:
                    break
                self._clock.wait(self._cond, remaining)
        if not self._interrupted:
            for sender in short:
                self._stats.add(sender, "overruns")
        return self.latest(expected, round_index)

    def _short(self, expected: tuple[str, ...], needed: int) -> list[str]:
        """The expected senders, not down, that have answered for no round from ``needed``
        on (lock held); none while ``needed`` is below 0."""
        if needed < 0:
            return []
        return [
            s
            for s in expected
            if s not in self._down and self._last_seen.get(s, (-1, -1))[0] < needed
        ]

    def set_down(self, sender: str, down: bool) -> None:
        """Stop (``down``) or resume waiting for ``sender``; a waiting gather re-checks."""
        with self._cond:
            if down:
                self._down.add(sender)
            else:
                self._down.discard(sender)
            self._wake()

    def down(self) -> tuple[str, ...]:
        """The senders not waited for, sorted."""
        with self._cond:
            return tuple(sorted(self._down))

    def interrupt(self) -> None:
        """Wake a waiting round loop for good (stop or shutdown)."""
        with self._cond:
            self._interrupted = True
            self._wake()
