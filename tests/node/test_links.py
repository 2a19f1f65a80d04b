"""An outbound stream's memory for resends is bounded, whatever the round deadline: in bytes
of payload and in messages; and what a link lets go of is counted once."""

from __future__ import annotations

import time

import numpy as np

from starling.node.messages import Message
from starling.node.runtime.feed import RESEND_BYTES, RESEND_MESSAGES, Outgoing, StreamFeed
from starling.node.runtime.links import OutboundLink
from starling.node.runtime.stats import StatsBook
from starling.orchestrator.planning.node_specs import node_specs
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
    feed = StreamFeed(_never, hold_seconds=0.5)
    message = Message("x", {"x": np.zeros(2)})
    old = time.monotonic() - 10.0
    for round_index in range(5):  # sent long ago
        feed.remember(Outgoing(old, round_index, 0, message), 16)
    feed.remember(Outgoing(time.monotonic(), 5, 0, message), 16)
    assert [item.round for item in feed.take_recent()] == [5]
    assert feed.take_recent() == []  # taken once


def test_an_expired_resend_is_not_counted_dropped():
    """A message put back for a resend was sent once and counted ``sent``; if the peer stays
    away past the hold time it is let go, but not counted ``dropped`` a second time (only a
    message that was never sent is): sent + withheld + dropped stays the messages emitted."""
    experiment = ring_experiment("links", rounds=5, deadline=0.2)
    spec = node_specs(experiment, {"0": "127.0.0.1:1", "1": "127.0.0.1:1", "2": "127.0.0.1:1"})[0]
    stats = StatsBook()
    link = OutboundLink(spec, "1", "127.0.0.1:1", stats)
    try:
        message = Message("x", {"x": np.zeros(2)})
        long_ago = time.monotonic() - 60.0
        link._held.extend(
            [
                Outgoing(long_ago, 0, 0, message, resent=True),
                Outgoing(long_ago, 1, 0, message, resent=True),
                Outgoing(long_ago, 2, 0, message),
            ]
        )
        link._hold_while_unreachable()
        assert not link._held
        assert stats.snapshot()["1"].dropped == 1
    finally:
        link.close(wait=0.1)
