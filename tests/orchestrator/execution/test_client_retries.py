"""The node client retries a call that finds the node unavailable, pausing between attempts
with capped exponential backoff and full jitter, then names the node. Real gRPC to a port
nobody listens on (refused at once); the pauses go to a clock of the test's own, so the
schedule is checked exactly and costs no time."""

from __future__ import annotations

import socket

import pytest

from starling.orchestrator.execution.client import (
    RETRY_ATTEMPTS,
    RETRY_BASE,
    RETRY_CAP,
    NodeClient,
    NodeUnavailable,
)
from tests.fake_clock import FakeClock


@pytest.fixture
def nowhere() -> str:
    """The address of a local port nobody listens on."""
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{spare.getsockname()[1]}"


def _check_backoff(pauses: list[float]) -> None:
    assert len(pauses) == RETRY_ATTEMPTS - 1  # a pause between attempts, none after the last
    for attempt, pause in enumerate(pauses):
        assert 0.0 <= pause <= min(RETRY_CAP, RETRY_BASE * 2**attempt), (attempt, pauses)


def test_an_unavailable_call_is_retried_with_backoff_then_names_the_node(nowhere):
    clock = FakeClock()
    with NodeClient(nowhere, timeout=5.0, sleep=clock.sleep) as client:
        with pytest.raises(NodeUnavailable, match=rf"^node at {nowhere} is unreachable \(status"):
            client.status()
        _check_backoff(clock.waits)
        # One attempt (the supervisor's poll of a node that may be dead): no pause at all.
        clock.waits.clear()
        with pytest.raises(NodeUnavailable, match=nowhere):
            client.status(attempts=1)
        assert clock.waits == []


def test_a_sample_stream_that_finds_the_node_unavailable_is_reopened_the_same_way(nowhere):
    clock = FakeClock()
    with NodeClient(nowhere, timeout=5.0, sleep=clock.sleep) as client:
        with pytest.raises(NodeUnavailable, match=rf"^node at {nowhere} is unreachable \(samples"):
            list(client.samples())
    _check_backoff(clock.waits)
