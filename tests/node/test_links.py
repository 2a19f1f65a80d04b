"""An outbound stream's memory for resends is bounded, whatever the round deadline: in bytes
of payload and in messages; what a link lets go of is counted once; and a message sent to
several receivers is checked and encoded once for all their links."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from starling.node.messages import Message
from starling.node.protocol.starling.v1 import peer_pb2
from starling.node.runtime.feed import (
    RESEND_BYTES,
    RESEND_MESSAGES,
    Outgoing,
    Request,
    StreamFeed,
)
from starling.node.runtime.links import LinkState, OutboundLink
from starling.node.runtime.network import Links
from starling.node.runtime.stats import StatsBook
from starling.orchestrator.planning.node_specs import node_specs
from tests.fake_clock import FakeClock
from tests.node.test_runtime_harness import ring_experiment


def _never(_ended):
    raise AssertionError("the feed is not iterated here")


def test_a_stream_keeps_at_most_resend_bytes_for_sending_again():
    # An hour's hold time: the time bound alone would keep every message of the run.
    feed = StreamFeed(_never, hold_seconds=3600.0)
    chunk = 3 * 1024 * 1024  # 3 MiB iterates
    message = Message("x", {"x": np.zeros(chunk // 8)})
    for round_index in range(100):  # 300 MiB sent within the hold time
        feed.remember(Outgoing(time.monotonic(), round_index, 0, message), chunk)
    kept = feed.take_recent()
    assert len(kept) * chunk <= RESEND_BYTES
    assert len(kept) == RESEND_BYTES // chunk  # as many as fit, the newest ones
    assert [item.round for item in kept] == list(range(100 - len(kept), 100))
    # A message larger than the bound on its own is still kept (the last one sent).
    feed.remember(Outgoing(time.monotonic(), 100, 0, message), 2 * RESEND_BYTES)
    assert [item.round for item in feed.take_recent()] == [100]


def test_a_stream_keeps_at_most_resend_messages_of_small_iterates():
    # Tiny payloads never reach the byte bound: the count bounds them, newest kept.
    feed = StreamFeed(_never, hold_seconds=3600.0)
    message = Message("x", {"x": np.zeros(2)})
    sent = 3 * RESEND_MESSAGES
    for round_index in range(sent):
        feed.remember(Outgoing(time.monotonic(), round_index, 0, message), 16)
    kept = feed.take_recent()
    assert [item.round for item in kept] == list(range(sent - RESEND_MESSAGES, sent))


def test_the_hold_time_bounds_what_is_kept_too():
    clock = FakeClock()
    feed = StreamFeed(_never, hold_seconds=0.5, clock=clock)
    message = Message("x", {"x": np.zeros(2)})
    for round_index in range(4):  # sent long ago
        feed.remember(Outgoing(clock() - 10.0, round_index, 0, message), 16)
    feed.remember(Outgoing(clock() - 0.5, 4, 0, message), 16)  # exactly the hold time ago
    feed.remember(Outgoing(clock(), 5, 0, message), 16)
    assert [item.round for item in feed.take_recent()] == [4, 5]
    assert feed.take_recent() == []  # taken once
    feed.remember(Outgoing(clock() - 0.5, 6, 0, message), 16)
    clock.advance(0.25)  # now 0.75 s old: past the hold time, let go at the next send
    feed.remember(Outgoing(clock(), 7, 0, message), 16)
    assert [item.round for item in feed.take_recent()] == [7]


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
        link._held.extend(
            [
                Outgoing(now - 2.5, 0, 0, message, resent=True),
                Outgoing(now - 2.5, 1, 0, message),
                Outgoing(now - 2.0, 2, 0, message, resent=True),  # exactly the hold time
                Outgoing(now - 1.0, 3, 0, message),
            ]
        )
        link._hold_while_unreachable()
        assert [item.round for item in link._held] == [2, 3]
        assert stats.snapshot()["1"].dropped == 1  # round 1; round 0 was a resend
        clock.advance(1.5)
        link._hold_while_unreachable()
        assert not link._held
        assert stats.snapshot()["1"].dropped == 2  # round 3; round 2 was a resend
    finally:
        link.close(wait=0.1)


def test_a_live_delay_holds_each_message_that_long_unless_the_stream_ends():
    """``links set --delay``: the stream's sending thread hands a message over once it has
    been due for the delay (read on the link's clock, here the test's), and a stream that
    ends meanwhile leaves it held, first in line for the next stream."""
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
        request = link._next_request(threading.Event())
        assert isinstance(request, Request) and request.item.round == 3
        assert clock() == pytest.approx(sent_at + 0.4)
        assert stats.snapshot()["1"].sent == 1
        # The stream ends 0.1 s into the next message's delay: nothing is handed over.
        link.send(4, 0, message)
        ended = threading.Event()
        clock.at(clock() + 0.1, ended.set)
        assert link._next_request(ended) is None
        assert [item.round for item in link._held] == [4]
        assert stats.snapshot()["1"].sent == 1
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
        requests = [links._link(r)._next_request(threading.Event()) for r in receivers]
        assert all(isinstance(request, Request) for request in requests)
        first, second = (request.parts for request in requests)  # type: ignore[union-attr]
        assert len(first) == len(second) == 3
        assert first[0] is second[0] and first[1] is second[1]
        assert first[2] != second[2]
        # What a stream keeps for a resend holds no encoding: that one is freed once sent.
        assert all(request.item.shared is None for request in requests)  # type: ignore[union-attr]

        bad = Message("x", {"x": np.array([[1.0, np.nan]])})
        for receiver in receivers:
            links.send(2, 0, receiver, bad)
        shared = links._last
        assert shared is not None and shared.message is bad
        for receiver in receivers:
            request = links._link(receiver)._next_request(threading.Event())
            assert isinstance(request, Request) and request.payload == 0
            notice = peer_pb2.Iterate.FromString(request.parts[0])
            assert notice.withheld and notice.receiver == receiver and notice.round == 2
        counts = stats.snapshot()
        assert [(counts[r].withheld, counts[r].send_errors) for r in receivers] == [(1, 1)] * 2
    finally:
        links.close()
