"""Bookkeeping of how old the copies an asynchronous sampler used were (EC-SGHMC, async SGHMC).

A tally is a 3-vector ``[Σ mean age, rounds counted, max age]``, part of the program's
checkpointed state so the figures survive a restart; the ages are in rounds between the
round a copy was sent in and the round it was used.
"""

from __future__ import annotations

import numpy as np

__all__ = ["new_tally", "tally", "tally_metrics"]


def new_tally() -> np.ndarray:
    return np.zeros(3)


def tally(acc: np.ndarray, ages: np.ndarray) -> np.ndarray:
    """``acc`` with one more round whose copies were ``ages`` rounds old (none: unchanged)."""
    if not ages.size:
        return acc
    return np.array([acc[0] + ages.mean(), acc[1] + 1.0, max(acc[2], float(ages.max()))])


def tally_metrics(acc: np.ndarray, name: str) -> dict[str, float]:
    """``{name}_staleness_mean`` and ``_max``; empty before any round was counted."""
    total, count, worst = (float(v) for v in acc)
    if not count:
        return {}
    return {f"{name}_staleness_mean": total / count, f"{name}_staleness_max": worst}
