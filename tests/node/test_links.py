"""An outbound link's memory for resends is bounded, whatever the round deadline."""

from __future__ import annotations

import time

import numpy as np

from starling.node.messages import Message
from starling.node.runtime.links import RESEND_BYTES, OutboundLink, _Feed, _Outgoing
from starling.node.runtime.stats import StatsBook
from starling.orchestrator.node_specs import node_specs
from tests.node.test_runtime_harness import ring_experiment


def test_a_stream_keeps_at_most_resend_bytes_for_sending_again():
    # An hour's deadline: the time bound alone would keep every message of the run.
    experiment = ring_experiment("resend-bound", rounds=1000, deadline=3600.0)
    spec = node_specs(experiment, {n: "127.0.0.1:9" for n in experiment.node_ids})[0]
    receiver = next(iter(spec.peers))
    link = OutboundLink(spec, receiver, spec.peers[receiver], StatsBook())
    try:
        feed = _Feed(link)
        chunk = 3 * 1024 * 1024  # 3 MiB iterates
        message = Message("x", {"x": np.zeros(chunk // 8)})
        for round_index in range(100):  # 300 MiB sent within the deadline
            feed._remember(_Outgoing(time.monotonic(), round_index, 0, message), chunk)
        kept = feed.take_recent()
        assert len(kept) * chunk <= RESEND_BYTES
        assert len(kept) == RESEND_BYTES // chunk  # as many as fit, the newest ones
        assert [item.round for item in kept] == list(range(100 - len(kept), 100))
        # A message larger than the bound on its own is still kept (the last one sent).
        feed._remember(_Outgoing(time.monotonic(), 100, 0, message), 2 * RESEND_BYTES)
        assert [item.round for item in feed.take_recent()] == [100]
    finally:
        link.close(wait=0.1)
