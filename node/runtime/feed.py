"""What an outbound ``Peer.Exchange`` stream sends, and what it keeps for resends.

Each message a link is asked to send is an :class:`Outgoing`. A message a node sends to
several receivers is checked and serialised once for all of them (:class:`SharedIterate`),
by whichever of their links writes it first. What a stream wrote within the last hold
time — at most :data:`RESEND_MESSAGES` messages and :data:`RESEND_BYTES` of payload — is
kept (:class:`ResendMemory`): if the stream breaks, those messages may have died with it,
and the link sends them again on the next stream. Ages are read on the link's clock
(``time.monotonic`` in a node, :mod:`starling.node.runtime.clock`). All of it is used on
the node's event loop (:mod:`starling.node.runtime.event_loop`), so none of it locks.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass

from starling.node.messages import Message, all_finite
from starling.node.protocol.wire import IterateBody

__all__ = [
    "RESEND_BYTES",
    "RESEND_MESSAGES",
    "Outgoing",
    "ResendMemory",
    "SharedIterate",
]

RESEND_BYTES = 64 * 1024 * 1024
"""At most this much iterate payload (and never less than the last message) is kept per
stream for sending again after it breaks: bounded memory however long the round deadline."""

RESEND_MESSAGES = 1024
"""At most this many messages are kept per stream, whatever their size: a small iterate's
message costs far more memory than its payload (the message, its arrays, the bookkeeping:
about 800 bytes for a 16-byte iterate, measured as a node's RSS growth with a 600 s
deadline), so the byte bound alone would let a long deadline keep millions of them. A
sender is never that many messages ahead of what its receiver has: it waits for its own
in-peers every round, and in a connected graph those wait for the receiver within a few
rounds. Beyond the bound a lost message is missed, as any late one: the receiver's round
closes at its deadline and the link counts it."""


class SharedIterate:
    """What every link sending one message in one (round, phase) needs of it, worked out
    once: whether its tensors are finite (a pass over every value) and its Iterate without
    a receiver (:class:`~starling.node.protocol.wire.IterateBody`: the payload's one copy).

    The round loop makes it, without doing either (:class:`~starling.node.runtime.network.Links`
    hands the same one to each link); the first link to write it does the work, and the
    others take its result.
    """

    def __init__(self, message: Message, *, experiment: str, sender: str, round: int, phase: int):  # noqa: A002
        self.message = message
        self.round, self.phase = round, phase
        self.experiment, self.sender = experiment, sender
        self._finite: bool | None = None
        self._body: IterateBody | None = None

    def serves(self, message: Message, round_index: int, phase: int) -> bool:
        """Whether this is ``message``'s, sent in (``round_index``, ``phase``): a sender
        hands the same one to each receiver of a broadcast instead of making another."""
        return self.message is message and (self.round, self.phase) == (round_index, phase)

    def finite(self) -> bool:
        """Whether every tensor is finite (checked once)."""
        if self._finite is None:
            self._finite = all(all_finite(v) for v in self.message.tensors.values())
        return self._finite

    def body(self) -> IterateBody:
        """The serialised Iterate without a receiver (made once); raises
        :class:`~starling.node.protocol.convert.TensorError` as
        :class:`~starling.node.protocol.wire.IterateBody` does, each time it is asked."""
        if self._body is None:
            self._body = IterateBody(
                self.message,
                experiment=self.experiment,
                sender=self.sender,
                round=self.round,
                phase=self.phase,
            )
        return self._body


@dataclass(frozen=True)
class Outgoing:
    """One message a link was asked to send (None: a withheld notice), due at ``due``;
    ``shared``: its checks and encoding, shared with the other links it goes to (None: the
    link makes its own)."""

    due: float
    round: int
    phase: int
    message: Message | None
    resent: bool = False
    shared: SharedIterate | None = None


class ResendMemory:
    """What one stream sent within the last hold time, for sending again if it breaks (see
    module). Used on the node's event loop only, so it takes no lock."""

    def __init__(self, hold_seconds: float, clock: Callable[[], float] = time.monotonic):
        self._hold_seconds = hold_seconds
        self._clock = clock
        self._recent: collections.deque[tuple[Outgoing, int]] = collections.deque()
        self._recent_bytes = 0

    def remember(self, item: Outgoing, payload: int) -> None:
        """Keep ``item`` for a resend, dropping what is older than the hold time or beyond
        :data:`RESEND_MESSAGES` or :data:`RESEND_BYTES` (oldest first; the newest item
        always stays)."""
        recent = self._recent
        recent.append((item, payload))
        self._recent_bytes += payload
        expired = self._clock() - self._hold_seconds
        while len(recent) > 1 and (
            recent[0][0].due < expired
            or len(recent) > RESEND_MESSAGES
            or self._recent_bytes > RESEND_BYTES
        ):
            self._recent_bytes -= recent.popleft()[1]

    def take_recent(self) -> list[Outgoing]:
        """What the stream sent lately (oldest first), once it has ended: the messages
        that may have died with it."""
        items = [item for item, _ in self._recent]
        self._recent.clear()
        self._recent_bytes = 0
        return items
