"""Which rows of a data file are held out for testing: one pure function, used by both sides.

A node loading its shard of a file with ``test_fraction > 0`` drops these rows before it
deals out ``shard::num_shards``; the orchestrator reads exactly these rows as its test set
(:mod:`starling.orchestrator.evaluation.heldout`). Both call :func:`held_out` with the file's row
count and the experiment's ``evaluation.test.split`` and ``seed``, so they agree without any row
crossing the wire, and no held-out row is ever in a node's training shard.
"""

from __future__ import annotations

import numpy as np

__all__ = ["held_out", "training_rows"]

_STREAM = 0x7E57
"""Mixed into the seed so the split's stream is not any shard's (``shard_rng(seed, k)``)."""


def held_out(rows: int, fraction: float, seed: int) -> np.ndarray:
    """Boolean mask over ``rows``: ``round(fraction · rows)`` rows chosen uniformly at random
    (a seeded permutation), the same for the same ``(rows, fraction, seed)`` everywhere."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"test fraction must be in [0, 1), got {fraction}")
    count = int(round(fraction * rows))
    mask = np.zeros(rows, dtype=bool)
    if count:
        rng = np.random.default_rng(np.random.SeedSequence([seed, _STREAM]))
        mask[rng.permutation(rows)[:count]] = True
    return mask


def training_rows(rows: int, fraction: float, seed: int) -> np.ndarray:
    """Indices of the rows not held out, in file order."""
    return np.flatnonzero(~held_out(rows, fraction, seed))
