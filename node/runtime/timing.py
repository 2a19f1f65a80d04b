"""Durations the node measures about itself: a fixed-bucket tally, cheap enough for the
round loop.

The round loop and the checkpoint writer each own one :class:`Tally` and call
:meth:`Tally.observe` once per round or checkpoint: a ``bisect`` and two additions, no lock
(one writer per tally). Readers — the metrics endpoint (:mod:`starling.node.runtime.metrics`) —
copy it with :meth:`Tally.snapshot`; a reading taken while a round ends may miss that
round, never a torn number. Nothing here imports a metrics library: a node started without
``--metrics`` pays for a few integers, not for an exporter.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

__all__ = ["CHECKPOINT_BUCKETS", "ROUND_BUCKETS", "Tally", "TallySnapshot"]

ROUND_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
"""Upper bounds (seconds) of the round-duration histogram: a 1 ms round of a small model
on a fast host up to a round that waits out a long deadline."""

CHECKPOINT_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
"""Upper bounds (seconds) for a checkpoint: three fsyncs on an SSD up to a large state on
an SD card."""


@dataclass(frozen=True)
class TallySnapshot:
    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    """Per bucket (not cumulative), one more than ``bounds``: the last is above them all."""
    total: float
    """Sum of every observed value."""

    @property
    def count(self) -> int:
        return sum(self.counts)


class Tally:
    """Counts of observed durations per bucket, and their sum."""

    def __init__(self, bounds: tuple[float, ...]):
        self.bounds = bounds
        self._counts = [0] * (len(bounds) + 1)
        self._total = 0.0

    def observe(self, seconds: float) -> None:
        self._counts[bisect_left(self.bounds, seconds)] += 1
        self._total += seconds

    def snapshot(self) -> TallySnapshot:
        return TallySnapshot(self.bounds, tuple(self._counts), self._total)
