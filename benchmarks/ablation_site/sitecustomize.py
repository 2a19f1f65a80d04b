"""Benchmark only: takes parts of a Starling node's per-round work out, for the ladder.

Python imports ``sitecustomize`` at start-up from the first folder on ``sys.path`` that has
one. :mod:`benchmarks.ladder` puts this folder on ``PYTHONPATH`` of the node processes it
starts and names, in ``STARLING_BENCH_ABLATE`` (comma-separated), which parts to take out:

* ``storage`` — no sample copied or appended, no resume point built or written each round
  (the durable checkpoint once a second stays);
* ``books`` — no per-link counters, round timings or resend memory;
* ``checks`` — a received iterate is converted, not validated;
* ``sampler`` — the program's ``incoming`` does nothing (its messages are still sent).

What is left is the node's structure: the round loop, the inbox, the links and their
streams, protobuf, the servicer. Nothing here is imported by Starling itself, and without
``STARLING_BENCH_ABLATE`` this module does nothing.
"""

from __future__ import annotations

import os

_PARTS = {part for part in os.environ.get("STARLING_BENCH_ABLATE", "").split(",") if part}


def _ablate(parts: set[str]) -> None:
    if "storage" in parts:
        from starling.node.runtime.run import Run

        def finish_round(self, round_index, sample):  # noqa: ANN001, ARG001
            self.finished = None

        def persist_finished(self):  # noqa: ANN001
            self.finished = None

        Run.finish_round = finish_round
        Run.persist_finished = persist_finished
    if "books" in parts:
        from starling.node.runtime.feed import ResendMemory
        from starling.node.runtime.stats import StatsBook
        from starling.node.runtime.timing import Tally

        StatsBook.add = lambda self, *args, **kwargs: 1
        StatsBook.file = lambda self, *args, **kwargs: None
        StatsBook.settle = lambda self, *args, **kwargs: None
        StatsBook.note_staleness = lambda self, *args, **kwargs: None
        Tally.observe = lambda self, seconds: None
        ResendMemory.remember = lambda self, item, payload: None
    if "checks" in parts:
        from starling.node.protocol import convert
        from starling.node.runtime import receive

        def unchecked(iterate, *_checks):  # noqa: ANN001, ANN002
            return None if iterate.withheld else convert.iterate_to_message(iterate)

        receive.check_iterate = unchecked
    if "sampler" in parts:
        from starling.node.samplers.admms import DADMMS

        DADMMS.incoming = lambda self, round_index, phase, inbox, rng: None


if _PARTS:
    _ablate(_PARTS)
