"""An outbound stream's memory for resends is bounded, whatever the round deadline: in bytes
of payload and in messages; what a link lets go of is counted once; a live delay holds a
message on the link's clock; and a message sent to several receivers is checked and
encoded once for all their links. A link's queue and held messages belong to its event
loop: the tests look at them there (:func:`_on_loop`)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from starling.node.messages import Message
from starling.node.protocol.starling.v1 import peer_pb2
from starling.node.runtime.feed import RESEND_BYTES, RESEND_MESSAGES, Outgoing, ResendMemory
from starling.node.runtime.links import LinkState, OutboundLink
from starling.node.runtime.network import Links
from starling.node.runtime.stats import StatsBook
from starling.orchestrator.planning.node_specs import node_specs
from tests.fake_clock import FakeClock
from tests.node.test_runtime_harness import ring_experiment


def _on_loop(link: OutboundLink, function, *args):
    """``function(*args)`` on ``link``'s event loop, where its task runs; its result."""

    async def call():
        return function(*args)

    return link._loop.submit(call()).result(10)


def _taken(link: OutboundLink) -> Outgoing:
    """The next message the link would write (held first), taken on its loop."""

    def take():
        return link._held.popleft() if link._held else link._queue.popleft()

    return _on_loop(link, take)


class _Stream:
    """What a link asks of its stream's call while a message waits out its delay: whether
    the call is over."""

    def __init__(self):
        self.over = False

    def done(self) -> bool:
        return self.over


def test_a_stream_keeps_at_most_resend_bytes_for_sending_again():
    # An hour's hold time: the time bound alone would keep every message of the run.
    memory = ResendMemory(hold_seconds=3600.0)
    chunk = 3 * 1024 * 1024  # 3 MiB iterates
    message = Message("x", {"x": np.zeros(chunk // 8)})
    for round_index in range(100):  # 300 MiB sent within the hold time
        memory.remember(Outgoing(time.monotonic(), round_index, 0, message), chunk)
    kept = memory.take_recent()
    assert len(kept) * chunk <= RESEND_BYTES
    assert len(kept) == RESEND_BYTES // chunk  # as many as fit, the newest ones
    assert [item.round for item in kept] == list(range(100 - len(kept), 100))
    # A message larger than the bound on its own is still kept (the last one sent).
    memory.remember(Outgoing(time.monotonic(), 100, 0, message), 2 * RESEND_BYTES)
    assert [item.round for item in memory.take_recent()] == [100]


def test_a_stream_keeps_at_most_resend_messages_of_small_iterates():
    # Tiny payloads never reach the byte bound: the count bounds them, newest kept.
    memory = ResendMemory(hold_seconds=3600.0)
    message = Message("x", {"x": np.zeros(2)})
    sent = 3 * RESEND_MESSAGES
    for round_index in range(sent):
        memory.remember(Outgoing(time.monotonic(), round_index, 0, message), 16)
    kept = memory.take_recent()
    assert [item.round for item in kept] == list(range(sent - RESEND_MESSAGES, sent))


def test_the_hold_time_bounds_what_is_kept_too():
    clock = FakeClock()
    memory = ResendMemory(hold_seconds=0.5, clock=clock)
    message = Message("x", {"x": np.zeros(2)})
    for round_index in range(4):  # sent long ago
        memory.remember(Outgoing(clock() - 10.0, round_index, 0, message), 16)
    memory.remember(Outgoing(clock() - 0.5, 4, 0, message), 16)  # exactly the hold time ago
    memory.remember(Outgoing(clock(), 5, 0, message), 16)
    assert [item.round for item in memory.take_recent()] == [4, 5]
    assert memory.take_recent() == []  # taken once
    memory.remember(Outgoing(clock() - 0.5, 6, 0, message), 16)
    clock.advance(0.25)  # now 0.75 s old: past the hold time, let go at the next send
    memory.remember(Outgoing(clock(), 7, 0, message), 16)
    assert [item.round for item in memory.take_recent()] == [7]


def test_an_unreachable_peers_messages_are_held_for_the_hold_time_then_let_go():
    """What the round loop queued while the peer is unreachable is held for one hold time
    (the round deadline, at least the connect wait) from when it was due, then let go: a
    message never sent is counted ``dropped``; a message put back for a resend was sent once
    and counted ``sent``, so it is not counted again (sent + withheld + dropped stays the
    messages emitted)."""
    experiment = ring_experiment("links", rounds=5, deadline=2.0)
    spec = node_specs(experiment, {"0": "127.0.0.1:1", "1": "127.0.0.1:1", "2": "127.0.0.1:1"})[0]
    clock = FakeClock()
    stats = StatsBook()
    link = OutboundLink(spec, "1", "127.0.0.1:1", stats, clock=clock)
    try:
        message = Message("x", {"x": np.zeros(2)})
        now = clock()
        held = [
            Outgoing(now - 2.5, 0, 0, message, resent=True),
            Outgoing(now - 2.5, 1, 0, message),
            Outgoing(now - 2.0, 2, 0, message, resent=True),  # exactly the hold time
            Outgoing(now - 1.0, 3, 0, message),
        ]
        _on_loop(link, link._held.extend, held)
        _on_loop(link, link._hold_while_unreachable)
        assert [item.round for item in _on_loop(link, list, link._held)] == [2, 3]
        assert stats.snapshot()["1"].dropped == 1  # round 1; round 0 was a resend
        clock.advance(1.5)
        _on_loop(link, link._hold_while_unreachable)
        assert not _on_loop(link, list, link._held)
        assert stats.snapshot()["1"].dropped == 2  # round 3; round 2 was a resend
    finally:
        link.close(wait=0.1)


def test_a_live_delay_holds_each_message_that_long_unless_the_stream_ends():
    """``links set --delay``: the link writes a message once it has been due for the delay,
    read on the link's clock (here the test's, which moves only when the test moves it),
    and a stream that ends meanwhile leaves it held, first in line for the next stream."""
    experiment = ring_experiment("delays", rounds=5, deadline=2.0)
    spec = node_specs(experiment, {"0": "127.0.0.1:1", "1": "127.0.0.1:1", "2": "127.0.0.1:1"})[0]
    clock = FakeClock()
    stats = StatsBook()
    link = OutboundLink(spec, "1", "127.0.0.1:1", stats, clock=clock)
    try:
        link.state = LinkState(delay_ms=400.0)
        message = Message("x", {"x": np.zeros(2)})
        sent_at = clock()
        link.send(3, 0, message)
        item = _taken(link)
        assert item.round == 3 and item.due == pytest.approx(sent_at + 0.4)
        stream = _Stream()
        waited = link._loop.submit(link._wait_until(item.due, stream))
        time.sleep(0.3)  # real time passes, the link's clock does not: still delayed
        assert not waited.done()
        clock.advance(0.4)
        assert waited.result(5) is True
        # The stream ends 0.1 s into the next message's delay: it stays held, not written.
        link.send(4, 0, message)
        ending = _Stream()
        writing = link._loop.submit(link._write_messages(ending, ResendMemory(2.0, clock)))
        time.sleep(0.3)
        clock.advance(0.1)
        ending.over = True
        assert writing.result(5) is False
        assert [item.round for item in _on_loop(link, list, link._held)] == [4]
        assert stats.snapshot()["1"].sent == 0
    finally:
        link.close(wait=0.1)


def test_a_message_to_several_receivers_is_checked_and_encoded_once():
    """The round engine sends a broadcast to each receiver in turn: the links share one
    finite check and one encoding (each receiver's messages differ only in the last part,
    which names it), and a non-finite message goes out as a withheld notice on every link."""
    experiment = ring_experiment("shared", rounds=5, deadline=2.0)
    spec = node_specs(experiment, {"0": "127.0.0.1:1", "1": "127.0.0.1:1", "2": "127.0.0.1:1"})[0]
    stats = StatsBook()
    links = Links(spec, stats)
    try:
        receivers = sorted(spec.out_peers())
        assert len(receivers) == 2
        message = Message("x", {"x": np.ones((3000, 100))})  # 2.4 MB: three parts
        for receiver in receivers:
            links.send(1, 0, receiver, message)
        items = [_taken(links._link(r)) for r in receivers]
        assert items[0].shared is items[1].shared is not None
        prepared = [
            _on_loop(links._link(r), links._link(r)._prepared, item)
            for r, item in zip(receivers, items, strict=True)
        ]
        (first, first_payload), (second, _) = prepared
        assert first_payload == message.nbytes
        assert len(first) == len(second) == 3
        assert first[0] is second[0] and first[1] is second[1]
        assert first[2] != second[2]

        bad = Message("x", {"x": np.array([[1.0, np.nan]])})
        for receiver in receivers:
            links.send(2, 0, receiver, bad)
        shared = links._last
        assert shared is not None and shared.message is bad
        for receiver in receivers:
            link = links._link(receiver)
            parts, payload = _on_loop(link, link._prepared, _taken(link))
            assert payload == 0
            notice = peer_pb2.Iterate.FromString(parts[0])
            assert notice.withheld and notice.receiver == receiver and notice.round == 2
        counts = stats.snapshot()
        assert [(counts[r].withheld, counts[r].send_errors) for r in receivers] == [(1, 1)] * 2
    finally:
        links.close()
