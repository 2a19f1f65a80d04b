"""The request side of one outbound ``Peer.Exchange`` stream, and what it keeps for resends.

A :class:`StreamFeed` is the request iterator gRPC's sending thread pulls from: first the
stream's proof (``hello``: its answer to the receiver's challenge,
:mod:`starling.node.runtime.link_proof`), then each request from the link's ``take``
function (:meth:`OutboundLink._next_request
<starling.node.runtime.links.OutboundLink._next_request>`: the next queued message, delayed
and encoded), so a message goes from the round loop to the wire with one thread hand-off.
A message a node sends to several receivers is checked and serialised once for all of them
(:class:`SharedIterate`), by whichever link's sending thread needs it first.
What the feed handed over within the last hold time — at most :data:`RESEND_MESSAGES`
messages and :data:`RESEND_BYTES` of payload — is kept: if the stream breaks, those
messages may have died with it, and the link sends them again on the next stream. Ages are
read on the link's clock (``time.monotonic`` in a node, :mod:`starling.node.runtime.clock`).
"""

from __future__ import annotations

import collections
import enum
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from starling.node.messages import Message, all_finite
from starling.node.protocol.wire import IterateBody

__all__ = [
    "CLOSED",
    "RESEND_BYTES",
    "RESEND_MESSAGES",
    "Closed",
    "Outgoing",
    "Request",
    "SharedIterate",
    "StreamFeed",
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
    hands the same one to each link); the first link's sending thread to ask does the work,
    under a lock, and the others take its result.
    """

    def __init__(self, message: Message, *, experiment: str, sender: str, round: int, phase: int):  # noqa: A002
        self.message = message
        self.round, self.phase = round, phase
        self.experiment, self.sender = experiment, sender
        self._lock = threading.Lock()
        self._finite: bool | None = None
        self._body: IterateBody | None = None

    def serves(self, message: Message, round_index: int, phase: int) -> bool:
        """Whether this is ``message``'s, sent in (``round_index``, ``phase``): a sender
        hands the same one to each receiver of a broadcast instead of making another."""
        return self.message is message and (self.round, self.phase) == (round_index, phase)

    def finite(self) -> bool:
        """Whether every tensor is finite (checked once)."""
        with self._lock:
            if self._finite is None:
                self._finite = all(all_finite(v) for v in self.message.tensors.values())
            return self._finite

    def body(self) -> IterateBody:
        """The serialised Iterate without a receiver (made once); raises
        :class:`~starling.node.protocol.convert.TensorError` as
        :class:`~starling.node.protocol.wire.IterateBody` does, each time it is asked."""
        with self._lock:
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


@dataclass(frozen=True)
class Request:
    """An outgoing message, encoded (serialised ``peer.Iterate`` messages: the message
    itself, or its parts when it is large: :meth:`IterateBody.addressed
    <starling.node.protocol.wire.IterateBody.addressed>`), and its payload bytes."""

    item: Outgoing
    parts: list[bytes]
    payload: int


class Closed(enum.Enum):
    """The link's close request: the feed ends the stream with a half-close."""

    CLOSED = "closed"


CLOSED = Closed.CLOSED


class StreamFeed:
    """The request iterator of one stream; ``take(ended)`` gives each request (see module)."""

    def __init__(
        self,
        take: Callable[[threading.Event], Request | Closed | None],
        hold_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        hello: Callable[[], bytes | None] | None = None,
    ):
        """``hello``: the stream's first message, waited for (None: the stream ends); no
        first message without it."""
        self._take = take
        self._hello = hello
        self._hold_seconds = hold_seconds
        self._clock = clock
        self.ended = threading.Event()
        """The call is over (set by its done callback)."""
        self.closed = False
        """The link's close request ended the stream (a half-close, not a break)."""
        # Held from taking a message to handing it over, so the link never touches its held
        # queue while a message is between the two.
        self._busy = threading.Lock()
        self._recent: collections.deque[tuple[Outgoing, int]] = collections.deque()
        self._recent_bytes = 0

    def requests(self) -> Iterator[bytes]:
        if self._hello is not None:
            hello = self._hello()  # waits for the receiver's challenge
            if hello is None:
                return  # the receiver refused the stream, or it ended first
            yield hello
        while True:
            with self._busy:
                got = self._take(self.ended)
                if got is None:
                    return
                if got is CLOSED:
                    self.closed = True
                    return
                assert isinstance(got, Request)
                self.remember(got.item, got.payload)
            yield from got.parts

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
        """What this stream sent lately (oldest first), once it has ended: the messages
        that may have died with it."""
        with self._busy:
            items = [item for item, _ in self._recent]
            self._recent.clear()
            self._recent_bytes = 0
        return items
