"""Scheduled link faults, decided the same way by the simulator and by a node's links.

A fault lives at the sender's outbound link ([DESIGN] principle 4). Whether the message
of round ``r`` on link ``sender → receiver`` is withheld depends only on the schedule and
a seeded draw for (fault seed, sender, receiver, round), so a schedule replays exactly.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

import numpy as np

from node.spec import LinkFault

__all__ = ["withheld_by_schedule", "stable_id"]


def stable_id(name: str) -> int:
    """A process-independent integer for a node id (Python's ``hash`` is salted)."""
    return zlib.crc32(name.encode("utf-8"))


def withheld_by_schedule(
    faults: Iterable[LinkFault], sender: str, receiver: str, round_index: int
) -> bool:
    """True if a scheduled fault takes out this round's message on ``sender → receiver``."""
    for fault in faults:
        if fault.receiver not in ("*", receiver) or not fault.start <= round_index < fault.stop:
            continue
        if fault.drop >= 1.0:
            return True
        draw = np.random.default_rng(
            [fault.seed, stable_id(sender), stable_id(receiver), round_index]
        ).random()
        if draw < fault.drop:
            return True
    return False
