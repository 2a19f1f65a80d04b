"""Streaming a node's samples out of its store, in batches, following a run until it ends.

``StreamSamples`` (:mod:`starling.node.runtime.servicers`) reads through here: from any offset,
once or following the run — a follower ends when the run is over and every sample was
sent, never earlier.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import numpy as np

from starling.node.runtime.state import NodeState
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
    state, read together; it is asked again on every pass, so a reconfigured node streams
    its new run.
    """
    index = max(offset, 0)
    while active():
        store, state = current()
        if store is None:
            if not follow:
                return
            time.sleep(0.2)
            continue
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
