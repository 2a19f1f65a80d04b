"""What a hostile or buggy peer or client could do to a node that the other door tests do
not cover: each case once cost the node memory without bound or took what it should have
refused; each must now be bounded or refused, with the node running on."""

from __future__ import annotations

import tracemalloc

import numpy as np

from starling.node.messages import Message
from starling.node.runtime.inbox import Inbox
from starling.node.runtime.stats import StatsBook


def test_a_flood_for_one_future_round_costs_an_asynchronous_inbox_no_memory_per_message():
    """An asynchronous program takes every message (it keeps only each sender's latest),
    but it used to note each one pending in a list until its round was gathered: a peer
    repeating one valid message for a round far ahead grew the node's memory for ever."""
    stats = StatsBook()
    inbox = Inbox(stats, synchronous=False)
    message = Message("x", {"x": np.zeros((1, 2))}, round=50)
    flood = 20_000
    inbox.deliver("1", 50, 0, message)  # the first takes what a sender's entry needs
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        outcomes = {inbox.deliver("1", 50, 0, message) for _ in range(flood - 1)}
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert outcomes == {"received"}
    assert grown < 64 * 1024, f"{grown} bytes for {flood} messages of one round"
    counters = stats.snapshot()["1"]
    assert (counters.received, counters.pending_received) == (flood, flood)
    assert counters.pending_bytes == flood * message.nbytes
    # Counted once, settled at once when the round is gathered.
    inbox.deliver("1", 51, 0, message)
    inbox.latest(("1",), 50)
    counters = stats.snapshot()["1"]
    assert (counters.received, counters.pending_received) == (flood + 1, 1)
    assert counters.pending_bytes == message.nbytes
    inbox.latest(("1",), 51)
    assert stats.snapshot()["1"].pending_received == 0
