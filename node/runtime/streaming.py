"""Streaming a node's samples out of its store, in batches, following a run until it ends.

``StreamSamples`` (:mod:`starling.node.runtime.servicers`) reads through here: from any offset,
once or following the run — a follower ends when the run is over and every sample was
sent, never earlier; or when the node is configured for another run (whose samples would
otherwise continue the stream as if they were the first run's: samples carry no run name).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import numpy as np

from starling.node.protocol.contract import NodeState
from starling.node.runtime.store import SampleStore

__all__ = ["SAMPLE_BATCH_BYTES", "Batch", "stream_samples"]

SAMPLE_BATCH_BYTES = 4 * 1024 * 1024
"""Samples are streamed in batches of about this size (well under the message limit)."""

Batch = list[tuple[int, int, np.ndarray]]
"""(index, round, array) of consecutive samples."""


def stream_samples(
    current: Callable[[], tuple[SampleStore | None, NodeState]],
    offset: int,
    follow: bool,
    active: Callable[[], bool],
) -> Iterator[Batch]:
    """Batches from ``offset``; with ``follow``, until the run is finished and all is sent.

    ``current()`` gives the configured run's store (None before a Configure) and the node's
    state, read together; it is asked again on every pass. A stream belongs to the first
    store it sees: once the node is configured again (another store, or none while it
    reconfigures), the stream ends.
    """
    index = max(offset, 0)
    streamed: SampleStore | None = None
    while active():
        store, state = current()
        if streamed is not None and store is not streamed:
            return  # configured again since: that is another run's stream
        if store is None:
            if not follow:
                return
            time.sleep(0.2)
            continue
        streamed = store
        batch = _read_batch(store, index)
        if batch:
            index += len(batch)
            yield batch
            continue
        if not follow:
            return
        # The state is read before the length: a run marked done has appended its last
        # sample already, so nothing can be missed.
        if state.finished and index >= len(store):
            return
        store.wait_beyond(index, 0.5)


def _read_batch(store: SampleStore, index: int) -> Batch:
    first = store.read(index, 1)
    if not first:
        return []
    per_sample = max(first[0][2].nbytes, 1)
    count = max(SAMPLE_BATCH_BYTES // per_sample, 1)
    return first + (store.read(index + 1, count - 1) if count > 1 else [])
