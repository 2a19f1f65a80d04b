"""Outbound links: one persistent ``Peer.Exchange`` stream per receiver.

The round loop never blocks on the network. It hands each message to its link's queue and
moves on; gRPC's sending thread of the link's one open client stream takes it from there
(:mod:`starling.node.runtime.feed`), applies the live delay, serialises it
(:mod:`starling.node.protocol.wire`) and sends it — one thread hand-off, as in a plain
grpcio client. A message that goes to several receivers is checked and serialised once,
by the first of their links to need it (:class:`~starling.node.runtime.feed.SharedIterate`);
each link adds only its receiver's fields. The link's own thread only
supervises: a receiver that is down costs the round loop nothing, the link thread keeps
reconnecting with bounded backoff (gRPC's channel backoff, see
:mod:`starling.node.runtime.transport`) and *holds* what the round loop queued meanwhile, in
order, for up to one round deadline — the longest any receiver waits for a message — then
discards it, counted ``dropped``. Messages handed to a stream that then breaks may have died
with it (a peer killed mid-stream is noticed only after the next few sends), so the stream
keeps what it sent during the last deadline (at most 64 MiB of payload) and the link sends
it again, marked ``resent``, on the next stream; the receiver ignores a resend it
already has or no longer needs. A peer that restarts within a deadline (a crashed node
resuming from its checkpoint) thus gets every message sent to it while it was down, and
rejoins as if it had only been slow; one that stays away costs its senders at most a
deadline's worth of messages in memory.

Link state lives here, at the sender ([DESIGN] principle 4): up/down, a drop probability
(decided with the link's own generator, never the sampler's) and a delay. A message an
emulated fault takes out — scheduled (decided by the round engine,
:mod:`starling.node.engine.rounds`, which calls :meth:`Links.withhold`) or live — is replaced by a
*withheld notice* (an Iterate with ``withheld=true`` and no tensors), so the receiver knows at once
that nothing is coming for that round instead of waiting for its deadline. A real fault (the peer or
the network dies) sends no notice, of course. Neither does a diverged sampler put NaN or Inf on the
wire, which every receiver rejects: its message goes out as a withheld notice too, counted
``withheld`` and, saying why, as a ``send_errors``.

A link reads message ages (due times, the hold time, the live delay) on its clock
(:mod:`starling.node.runtime.clock`; real time in a node). Its thread's pauses between
connection attempts and gRPC's own timeouts are real time whatever the clock.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

import grpc
import numpy as np

from starling.node.faults import stable_id
from starling.node.messages import Message
from starling.node.protocol import convert
from starling.node.protocol.contract import NOT_CONFIGURED
from starling.node.protocol.starling.v1 import peer_pb2
from starling.node.protocol.wire import withheld_notice
from starling.node.runtime.clock import MONOTONIC, Clock
from starling.node.runtime.feed import (
    CLOSED,
    Closed,
    Outgoing,
    Request,
    SharedIterate,
    StreamFeed,
)
from starling.node.runtime.link_proof import challenge_of
from starling.node.runtime.stats import StatsBook
from starling.node.runtime.transport import ChannelSettings
from starling.node.spec import NodeSpec

__all__ = ["LinkState", "OutboundLink"]

log = logging.getLogger("starling.node.links")

CONNECT_WAIT = 1.0
"""How long one connection attempt may hold queued messages before they are dropped."""

RETRY_WAIT = 0.1
"""Pause after a stream broke before opening the next, so a peer that refuses streams (a
restarted node not yet configured) is not hammered."""

CLOSE_WAIT = 1.5
"""At shutdown, how long a link may take to deliver what is still queued."""

_PEER = peer_pb2.DESCRIPTOR.services_by_name["Peer"]
EXCHANGE = f"/{_PEER.full_name}/{_PEER.methods_by_name['Exchange'].name}"
"""The method path of ``Peer.Exchange``, called with requests serialised already."""

Exchange = Callable[..., grpc.Future]
"""Opens one ``Peer.Exchange`` stream: ``(requests, metadata=...)`` -> its call."""


class _Close(enum.Enum):
    """The close request a link's queue carries after the last message."""

    CLOSE = "close"


_CLOSE = _Close.CLOSE


@dataclass
class LinkState:
    up: bool = True
    drop: float = 0.0
    delay_ms: float = 0.0


class OutboundLink:
    """The sender's end of the link ``sender → receiver``."""

    def __init__(
        self,
        spec: NodeSpec,
        receiver: str,
        address: str,
        stats: StatsBook,
        channel: ChannelSettings | None = None,
        clock: Clock = MONOTONIC,
    ):
        self.spec = spec
        self.receiver = receiver
        self.address = address
        self.state = LinkState()
        self._stats = stats
        self._clock = clock
        self._channel = channel or ChannelSettings()
        # Live drops use the link's own stream, seeded per link, so they never disturb
        # the sampler's generator (and replay for a given seed and call sequence).
        self._drop_rng = np.random.default_rng(
            [spec.seed, stable_id(spec.node_id), stable_id(receiver), 0x11FE]
        )
        # Messages to send; None wakes a waiting feed (its stream ended), _CLOSE ends the link.
        self._queue: queue.Queue[Outgoing | _Close | None] = queue.Queue()
        # Taken from the queue while the peer was unreachable; sent first once it is back.
        self._held: collections.deque[Outgoing] = collections.deque()
        self._hold_seconds = max(spec.round_deadline, CONNECT_WAIT)
        self._closing = threading.Event()
        self._call: grpc.Future | None = None  # the current stream's call
        self._thread = threading.Thread(
            target=self._run, name=f"link-{spec.node_id}->{receiver}", daemon=True
        )
        stats.ensure(receiver)
        self._thread.start()

    # ------------------------------------------------------------ round-loop side

    def send(
        self,
        round_index: int,
        phase: int,
        message: Message,
        shared: SharedIterate | None = None,
        replay: bool = False,
    ) -> None:
        """Queue ``message`` (or a withheld notice if a live fault takes it out). Never
        blocks. ``shared``: its checks and encoding, shared with the other links it goes to
        (:meth:`shared`). ``replay``: a round the process this one resumes from may have
        sent already (:class:`starling.node.runtime.network.Links`): marked ``resent``,
        counted so."""
        state = self.state
        if not state.up or (state.drop > 0.0 and self._drop_rng.random() < state.drop):
            self.withhold(round_index, phase, replay)
            return
        due = self._clock.now() + max(state.delay_ms, 0.0) / 1000.0
        self._queue.put(Outgoing(due, round_index, phase, message, resent=replay, shared=shared))

    def shared(self, round_index: int, phase: int, message: Message) -> SharedIterate:
        """A :class:`SharedIterate` of ``message`` from this link's node, for every link it
        goes to in (``round_index``, ``phase``)."""
        return SharedIterate(
            message,
            experiment=self.spec.experiment,
            sender=self.spec.node_id,
            round=round_index,
            phase=phase,
        )

    def withhold(self, round_index: int, phase: int, replay: bool = False) -> None:
        """Queue a withheld notice: a fault took this round's message out (counted
        ``withheld`` unless ``replay``: the earlier process may have counted it)."""
        if not replay:
            self._stats.add(self.receiver, "withheld")
        self._queue.put(Outgoing(self._clock.now(), round_index, phase, None, resent=replay))

    def close(self, wait: float = CLOSE_WAIT) -> None:
        """Deliver what is queued (for up to ``wait`` seconds), then end the stream."""
        self._queue.put(_CLOSE)
        self._thread.join(wait)
        self._closing.set()
        call = self._call
        if call is not None:
            call.cancel()
        self._queue.put(None)  # wake a feed still waiting for a message
        self._thread.join(1.0)

    # ------------------------------------------------------------ the link's thread and its streams

    def _run(self) -> None:
        """The link's supervisor: connects, opens one stream at a time and waits for it to end.
        It wakes only when a stream starts or ends; messages never pass through it."""
        channel = self._channel.open(self.address, self.receiver)
        # Peer.Exchange taking its requests already serialised (IterateBody.addressed).
        stub = channel.stream_unary(
            EXCHANGE, response_deserializer=peer_pb2.ExchangeSummary.FromString
        ).future
        try:
            while not self._closing.is_set():
                try:
                    if self._connect_and_stream(channel, stub):
                        return
                except Exception as exc:  # noqa: BLE001 - a link must outlive any surprise
                    log.exception("link to %s: unexpected error", self.receiver)
                    self._stats.add(self.receiver, "send_errors", error=f"internal: {exc}")
                    self._closing.wait(CONNECT_WAIT)
        finally:
            channel.close()

    def _connect_and_stream(self, channel: grpc.Channel, stub: Exchange) -> bool:
        """One connection attempt and, if it succeeds, one stream; True once closed."""
        ready = grpc.channel_ready_future(channel)
        try:
            ready.result(timeout=CONNECT_WAIT)
        except grpc.FutureTimeoutError:
            ready.cancel()
            return self._hold_while_unreachable()
        if self._stream(stub):
            return True
        self._closing.wait(RETRY_WAIT)
        return self._hold_while_unreachable()

    def _hold_while_unreachable(self) -> bool:
        """Move what is queued to the held messages and drop those held longer than the
        hold time; True if a close request came (everything held is then dropped)."""
        closing = False
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _CLOSE:
                closing = True
                break
            if item is not None:  # None: a stale wake-up
                self._held.append(item)
        expired = self._clock.now() - self._hold_seconds
        while self._held and (closing or self._held[0].due < expired):
            item = self._held.popleft()
            # A resend that expires was sent once already and counted ``sent``; whether it
            # arrived, the receiver's counts say. Only a message never sent is ``dropped``.
            if item.message is not None and not item.resent:
                self._stats.add(
                    self.receiver, "dropped", error=f"peer unreachable at {self.address}"
                )
        return closing

    def _stream(self, stub: Exchange) -> bool:
        """One Exchange stream, from opening to its end: False if it broke, True if the
        link closed.

        The stream's requests are generated by a :class:`StreamFeed` calling
        :meth:`_next_request` in gRPC's own sending thread, straight from the link's queue:
        a message goes from the round loop to the wire with one thread hand-off, as in a
        plain grpcio client stream. This thread only waits for the stream to end, then puts
        what may have died with it back in front of the queue, marked ``resent``.
        """
        opened: list[grpc.Future] = []
        started = threading.Event()

        def hello() -> bytes | None:
            """The stream's proof, once the receiver sent its challenge (in gRPC's sending
            thread: the link's thread never waits for it)."""
            started.wait()
            if not opened:
                return None
            challenge = challenge_of(opened[0].initial_metadata())
            if challenge is None:
                return None
            answer = self._channel.proof(self.receiver, challenge)
            return peer_pb2.Iterate(proof=answer).SerializeToString()

        feed = StreamFeed(self._next_request, self._hold_seconds, self._clock.now, hello)
        try:
            call = stub(feed.requests(), metadata=self._channel.stream_metadata())
            opened.append(call)
        finally:
            started.set()
        self._call = call

        def on_done(_call: grpc.Future) -> None:
            feed.ended.set()
            self._queue.put(None)  # wake the feed if it is waiting for a message

        call.add_done_callback(on_done)
        feed.ended.wait()
        if feed.closed:
            try:
                call.result(timeout=CLOSE_WAIT)  # the receiver answers with its summary
            except (grpc.RpcError, grpc.FutureTimeoutError, grpc.FutureCancelledError):
                call.cancel()
            return True
        if self._closing.is_set():
            return True
        self._note_broken(call)
        self._held.extendleft(
            dataclasses.replace(item, resent=True) for item in reversed(feed.take_recent())
        )
        return False

    def _next(self) -> Outgoing | _Close | None:
        """The next item to send: a held one first, else the next queued (blocking)."""
        return self._held.popleft() if self._held else self._queue.get()

    def _next_request(self, ended: threading.Event) -> Request | Closed | None:
        """For the stream's feed, in gRPC's sending thread: the next message, waited for,
        delayed and encoded; :data:`CLOSED` at the link's close request; None once the call
        has ended (``ended``) or the link is closing."""
        while True:
            if ended.is_set() or self._closing.is_set():
                return None
            item = self._next()
            if item is None:  # a wake-up: the call ended (or an old stream's did)
                continue
            if item is _CLOSE:
                return CLOSED
            if not self._wait_until(item.due, ended):
                self._held.appendleft(item)  # the stream ended during the delay: keep it
                return None
            prepared = self._prepared(item)
            if prepared is None:
                continue
            parts, payload = prepared
            if item.message is not None and not item.resent:
                self._stats.add(self.receiver, "sent", nbytes=payload)
            elif item.message is not None:  # a resend: its own counter, never a new send
                self._stats.add(self.receiver, "resent", nbytes=payload)
            # Kept for a resend without its shared encoding: that is freed once every link
            # has sent it, and a resend (rare) encodes again.
            return Request(dataclasses.replace(item, shared=None), parts, payload)

    def _prepared(self, item: Outgoing) -> tuple[list[bytes], int] | None:
        """The wire form of ``item`` (its serialised Iterate, in parts if large) and its
        payload bytes; None (counted as a send error) if it cannot be sent. A non-finite
        iterate goes out as a withheld notice."""
        stats, receiver = self._stats, self.receiver
        shared = item.shared
        if item.message is not None and shared is None:
            shared = self.shared(item.round, item.phase, item.message)
        if shared is not None and not shared.finite():
            # The receiver would reject it (and wait out its deadline for nothing):
            # tell it at once that nothing usable is coming this round (counted once: a
            # replayed round's notice was counted by the process before, see send).
            if not item.resent:
                stats.add(receiver, "withheld")
            stats.add(
                receiver,
                "send_errors",
                error=f"round {item.round}: iterate not finite, sent as withheld",
            )
            item, shared = dataclasses.replace(item, message=None, shared=None), None
        payload = 0 if item.message is None else item.message.nbytes
        limit = self._channel.max_message_bytes
        size = payload  # the message is at least its payload: not encoded if that is too much
        parts: list[bytes] = []
        if shared is None:
            notice = withheld_notice(
                experiment=self.spec.experiment,
                sender=self.spec.node_id,
                receiver=receiver,
                round=item.round,
                phase=item.phase,
                resent=item.resent,
            )
            parts, size = [notice], len(notice)
        elif payload <= limit:
            try:
                parts, size = shared.body().addressed(receiver, item.resent)
            except convert.TensorError as exc:
                stats.add(receiver, "send_errors", error=str(exc))
                return None
        if size > limit:
            # The receiver's transport would abort the whole stream for it.
            reason = f"round {item.round}: {size} bytes exceed the {limit}-byte limit"
            stats.add(receiver, "send_errors", error=reason)
            return None
        return parts, payload

    def _wait_until(self, due: float, broken: threading.Event) -> bool:
        """Sleep until ``due`` (the live delay); False if the stream broke meanwhile."""
        while True:
            remaining = due - self._clock.now()
            if broken.is_set() or self._closing.is_set():
                return False
            if remaining <= 0:
                return True
            self._clock.wait(broken, min(remaining, 0.1))

    def _note_broken(self, call: grpc.Future) -> None:
        try:
            call.result(timeout=0)
            detail = "stream ended"
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNAVAILABLE and exc.details() == NOT_CONFIGURED:
                # The receiver is up but not configured yet: what was sent is held and
                # sent again, so nothing is lost and nothing is counted.
                log.debug("link to %s: receiver not configured yet; retrying", self.receiver)
                return
            detail = f"{exc.code().name}: {exc.details()}"
        except Exception as exc:  # noqa: BLE001 - only for the message
            detail = str(exc) or type(exc).__name__
        self._stats.add(self.receiver, "send_errors", error=f"{self.address}: {detail}")
        log.info(
            "link to %s (%s) broke: %s; reconnecting",
            self.receiver,
            self.address,
            detail,
            extra={"event": "link_broken", "peer": self.receiver},
        )
