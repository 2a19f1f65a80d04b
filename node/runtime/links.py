"""Outbound links: one persistent ``Peer.Exchange`` stream per receiver.

The round loop never blocks on the network. It hands each message to its link and moves
on; the link's task, on the same event loop (:mod:`starling.node.runtime.event_loop`),
writes it to its ``grpc.aio`` stream as soon as the round loop awaits something, after the
live delay if one is set: no thread hand-off on the way. A message that goes to several
receivers is checked and serialised once, by the first of their links to write it
(:class:`~starling.node.runtime.feed.SharedIterate`); each link adds only its receiver's
fields. A receiver that is down costs the round loop nothing: its link keeps reconnecting
with bounded backoff (gRPC's channel backoff, see :mod:`starling.node.runtime.transport`)
and *holds* what the round loop handed it meanwhile, in order, for up to one round
deadline — the longest any receiver waits for a message — then discards it, counted
``dropped``. Messages written to a stream that then breaks may have died with it (a peer
killed mid-stream is noticed only after the next few writes), so the stream keeps what it
wrote during the last deadline (at most 64 MiB of payload,
:class:`~starling.node.runtime.feed.ResendMemory`) and the link sends it again, marked
``resent``, on the next stream; the receiver ignores a resend it already has or no longer
needs. A peer that restarts within a deadline (a crashed node resuming from its
checkpoint) thus gets every message sent to it while it was down, and rejoins as if it had
only been slow; one that stays away costs its senders at most a deadline's worth of
messages in memory.

Link state lives here, at the sender ([DESIGN] principle 4): up/down, a drop probability
(decided with the link's own generator, never the sampler's) and a delay. A message an
emulated fault takes out — scheduled (decided by the round engine,
:mod:`starling.node.engine.rounds`, which calls :meth:`Links.withhold
<starling.node.runtime.network.Links.withhold>`) or live — is replaced by a *withheld
notice* (an Iterate with ``withheld=true`` and no tensors), so the receiver knows at once
that nothing is coming for that round instead of waiting for its deadline. A real fault
(the peer or the network dies) sends no notice, of course. Neither does a diverged sampler
put NaN or Inf on the wire, which every receiver rejects: its message goes out as a
withheld notice too, counted ``withheld`` and, saying why, as a ``send_errors``.

A link reads message ages (due times, the hold time, the live delay) on its clock
(:mod:`starling.node.runtime.clock`; real time in a node). Its pauses (between connection
attempts, during a delay) and gRPC's own timeouts are the event loop's, real time whatever
the clock.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import dataclasses
import enum
import logging
from collections.abc import Iterable
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
from starling.node.runtime.event_loop import NodeLoop
from starling.node.runtime.feed import Outgoing, ResendMemory, SharedIterate
from starling.node.runtime.link_proof import challenge_of
from starling.node.runtime.stats import StatsBook
from starling.node.runtime.transport import ChannelSettings
from starling.node.spec import NodeSpec

__all__ = ["LinkState", "OutboundLink", "close_links"]

log = logging.getLogger("starling.node.links")

CONNECT_WAIT = 1.0
"""How long one connection attempt may hold queued messages before they are dropped."""

RETRY_WAIT = 0.1
"""Pause after a stream broke before opening the next, so a peer that refuses streams (a
restarted node not yet configured) is not hammered."""

CLOSE_WAIT = 1.5
"""At shutdown, how long a link may take to deliver what is still queued."""

ABORT_WAIT = 1.0
"""At shutdown, how long a link may take to end once its stream is cancelled."""

DELAY_STEP = 0.1
"""A live delay is slept in steps this long (seconds), so a stream that ends meanwhile is
noticed."""

_PEER = peer_pb2.DESCRIPTOR.services_by_name["Peer"]
EXCHANGE = f"/{_PEER.full_name}/{_PEER.methods_by_name['Exchange'].name}"
"""The method path of ``Peer.Exchange``, called with requests serialised already."""


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
    """The sender's end of the link ``sender → receiver``: a task on the node's event loop.

    ``loop``: the node's loop (:class:`~starling.node.runtime.event_loop.NodeLoop`); a link
    made without one runs on a loop of its own, closed with it."""

    def __init__(
        self,
        spec: NodeSpec,
        receiver: str,
        address: str,
        stats: StatsBook,
        channel: ChannelSettings | None = None,
        clock: Clock = MONOTONIC,
        loop: NodeLoop | None = None,
    ):
        self.spec = spec
        self.receiver = receiver
        self.address = address
        self.state = LinkState()
        self._stats = stats
        self._clock = clock
        self._channel = channel or ChannelSettings()
        self._own_loop = loop is None
        self._loop = loop if loop is not None else NodeLoop(f"link-{spec.node_id}->{receiver}")
        # Live drops use the link's own stream, seeded per link, so they never disturb
        # the sampler's generator (and replay for a given seed and call sequence).
        self._drop_rng = np.random.default_rng(
            [spec.seed, stable_id(spec.node_id), stable_id(receiver), 0x11FE]
        )
        # Messages to send, then the close request; appended from any thread, taken on the
        # loop. ``_wake`` (an event of the loop) is set after each append and when a
        # stream ends or the link closes.
        self._queue: collections.deque[Outgoing | _Close] = collections.deque()
        self._wake = asyncio.Event()
        # Taken from the queue while the peer was unreachable; sent first once it is back.
        self._held: collections.deque[Outgoing] = collections.deque()
        self._hold_seconds = max(spec.round_deadline, CONNECT_WAIT)
        self._closing = False
        self._call: grpc.aio.StreamUnaryCall | None = None  # the current stream's call
        stats.ensure(receiver)
        self._task = self._loop.submit(self._run())

    # ------------------------------------------------------------ round-loop side

    def send(
        self,
        round_index: int,
        phase: int,
        message: Message,
        shared: SharedIterate | None = None,
        replay: bool = False,
    ) -> None:
        """Hand ``message`` over (or a withheld notice if a live fault takes it out). Never
        blocks. ``shared``: its checks and encoding, shared with the other links it goes to
        (:meth:`shared`). ``replay``: a round the process this one resumes from may have
        sent already (:class:`starling.node.runtime.network.Links`): marked ``resent``,
        counted so."""
        state = self.state
        if not state.up or (state.drop > 0.0 and self._drop_rng.random() < state.drop):
            self.withhold(round_index, phase, replay)
            return
        due = self._clock.now() + max(state.delay_ms, 0.0) / 1000.0
        self._put(Outgoing(due, round_index, phase, message, resent=replay, shared=shared))

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
        """Hand over a withheld notice: a fault took this round's message out (counted
        ``withheld`` unless ``replay``: the earlier process may have counted it)."""
        if not replay:
            self._stats.add(self.receiver, "withheld")
        self._put(Outgoing(self._clock.now(), round_index, phase, None, resent=replay))

    def _put(self, item: Outgoing | _Close) -> None:
        self._queue.append(item)
        self._loop.call(self._wake.set)

    def close(self, wait: float = CLOSE_WAIT) -> None:
        """Deliver what is queued (for up to ``wait`` seconds), then end the stream. Not
        to be called on the loop (it waits for the link's task)."""
        close_links([self], wait)

    # ------------------------------------------------------------ the link's task and its streams

    async def _run(self) -> None:
        """The link: connects, opens one stream at a time and writes to it until it ends."""
        channel = self._channel.open(self.address, self.receiver)
        # Peer.Exchange taking its requests already serialised (IterateBody.addressed).
        exchange = channel.stream_unary(
            EXCHANGE, response_deserializer=peer_pb2.ExchangeSummary.FromString
        )
        try:
            while not self._closing:
                try:
                    if await self._connect_and_stream(channel, exchange):
                        return
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - a link must outlive any surprise
                    log.exception("link to %s: unexpected error", self.receiver)
                    self._stats.add(self.receiver, "send_errors", error=f"internal: {exc}")
                    await self._pause(CONNECT_WAIT)
        finally:
            await channel.close()

    async def _connect_and_stream(
        self, channel: grpc.aio.Channel, exchange: grpc.aio.StreamUnaryMultiCallable
    ) -> bool:
        """One connection attempt and, if it succeeds, one stream; True once closed."""
        try:
            await asyncio.wait_for(channel.channel_ready(), CONNECT_WAIT)
        except asyncio.TimeoutError:
            return self._hold_while_unreachable()
        if await self._stream(exchange):
            return True
        await self._pause(RETRY_WAIT)
        return self._hold_while_unreachable()

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if the link closes meanwhile."""
        deadline = self._loop.loop.time() + seconds
        while not self._closing:
            remaining = deadline - self._loop.loop.time()
            if remaining <= 0:
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), remaining)
            except asyncio.TimeoutError:
                return

    def _hold_while_unreachable(self) -> bool:
        """Move what is queued to the held messages and drop those held longer than the
        hold time; True if a close request came (everything held is then dropped)."""
        closing = False
        while self._queue:
            item = self._queue.popleft()
            if item is _CLOSE:
                closing = True
                break
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

    async def _stream(self, exchange: grpc.aio.StreamUnaryMultiCallable) -> bool:
        """One Exchange stream, from opening to its end: False if it broke, True if the
        link closed. First the stream's proof, once the receiver sent its challenge
        (:mod:`starling.node.runtime.link_proof`), then every message in turn; when it
        breaks, what may have died with it goes back in front of the held messages,
        marked ``resent``."""
        call = exchange(metadata=self._channel.stream_metadata())
        self._call = call
        call.add_done_callback(lambda _call: self._wake.set())
        memory = ResendMemory(self._hold_seconds, self._clock.now)
        closed = False
        failure: Exception | None = None
        try:
            challenge = challenge_of(await call.initial_metadata())
            if challenge is not None:
                answer = self._channel.proof(self.receiver, challenge)
                await call.write(peer_pb2.Iterate(proof=answer).SerializeToString())
                closed = await self._write_messages(call, memory)
            else:  # the receiver refused the stream, or it ended first
                await call.done_writing()
        except asyncio.CancelledError:
            call.cancel()
            raise
        except Exception as exc:  # noqa: BLE001 - a broken stream, reported below
            failure = exc
        if closed:
            try:
                await asyncio.wait_for(call, CLOSE_WAIT)  # the receiver answers its summary
            except (grpc.RpcError, asyncio.TimeoutError):
                call.cancel()
            return True
        if self._closing:
            call.cancel()
            return True
        await self._note_broken(call, failure)
        self._held.extendleft(
            dataclasses.replace(item, resent=True) for item in reversed(memory.take_recent())
        )
        return False

    async def _write_messages(self, call: grpc.aio.StreamUnaryCall, memory: ResendMemory) -> bool:
        """Write each message to ``call`` as it comes; True at the link's close request
        (the stream is half-closed), False once the call has ended or the link closes."""
        while True:
            item = await self._next(call)
            if item is None:
                return False
            if item is _CLOSE:
                await call.done_writing()
                return True
            if not await self._wait_until(item.due, call):
                self._held.appendleft(item)  # the stream ended during the delay: keep it
                return False
            await self._write(call, memory, item)

    async def _write(
        self, call: grpc.aio.StreamUnaryCall, memory: ResendMemory, item: Outgoing
    ) -> None:
        """Write ``item`` to ``call``, counted and kept for a resend."""
        prepared = self._prepared(item)
        if prepared is None:
            return
        parts, payload = prepared
        if item.message is not None and not item.resent:
            self._stats.add(self.receiver, "sent", nbytes=payload)
        elif item.message is not None:  # a resend: its own counter, never a new send
            self._stats.add(self.receiver, "resent", nbytes=payload)
        # Kept for a resend without its shared encoding: that is freed once every link
        # has written it, and a resend (rare) encodes again.
        memory.remember(dataclasses.replace(item, shared=None), payload)
        for part in parts:
            await call.write(part)

    async def _next(self, call: grpc.aio.StreamUnaryCall) -> Outgoing | _Close | None:
        """The next item to write: a held one first, else the next queued, waited for;
        None once the call has ended or the link closes."""
        while True:
            if call.done() or self._closing:
                return None
            if self._held:
                return self._held.popleft()
            if self._queue:
                return self._queue.popleft()
            self._wake.clear()
            await self._wake.wait()

    async def _wait_until(self, due: float, call: grpc.aio.StreamUnaryCall) -> bool:
        """Sleep until ``due`` (the live delay); False if the stream ended meanwhile."""
        while True:
            if call.done() or self._closing:
                return False
            remaining = due - self._clock.now()
            if remaining <= 0:
                return True
            await asyncio.sleep(min(remaining, DELAY_STEP))

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

    async def _note_broken(self, call: grpc.aio.StreamUnaryCall, failure: Exception | None) -> None:
        call.cancel()  # if the failure was ours, not the call's, it is still open
        code, details = await call.code(), await call.details()
        if code == grpc.StatusCode.OK:
            detail = "stream ended"
        elif code == grpc.StatusCode.UNAVAILABLE and details == NOT_CONFIGURED:
            # The receiver is up but not configured yet: what was sent is held and sent
            # again, so nothing is lost and nothing is counted.
            log.debug("link to %s: receiver not configured yet; retrying", self.receiver)
            return
        elif code == grpc.StatusCode.CANCELLED and failure is not None:
            detail = str(failure) or type(failure).__name__
        else:
            detail = f"{code.name}: {details}"
        self._stats.add(self.receiver, "send_errors", error=f"{self.address}: {detail}")
        log.info(
            "link to %s (%s) broke: %s; reconnecting",
            self.receiver,
            self.address,
            detail,
            extra={"event": "link_broken", "peer": self.receiver},
        )

    # ------------------------------------------------------------ closing, from another thread

    def _abort(self) -> None:
        """On the loop: end the link now (its stream cancelled, its waits woken)."""
        self._closing = True
        if self._call is not None:
            self._call.cancel()
        self._wake.set()


def close_links(links: Iterable[OutboundLink], wait: float = CLOSE_WAIT) -> None:
    """Close ``links`` together: each delivers what is queued, for up to ``wait`` seconds
    in all, then its stream ends (cancelled if it has not by then). Not to be called on
    the node's loop, whose tasks it waits for."""
    links = list(links)
    for link in links:
        if link._loop.in_loop():
            raise RuntimeError("links are closed from outside the node's event loop")
        link._put(_CLOSE)
    concurrent.futures.wait([link._task for link in links], wait)
    for link in links:
        if not link._task.done():
            link._loop.call(link._abort)
    concurrent.futures.wait([link._task for link in links], ABORT_WAIT)
    for link in links:
        link._closing = True
        link._task.cancel()
        if link._own_loop:
            link._loop.close()
