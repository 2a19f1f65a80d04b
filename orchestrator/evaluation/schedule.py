"""Which rounds the W2 curve scores (``evaluation.w2_schedule``).

Scoring one round of one series costs a projection of its chains by the posterior's factor
(``chains × dim²``), a Gram matrix and its eigenvalues (``min(chains, dim)³``): at dim 1000
and 1000 chains about 0.13 s a set on one core, several times what a cheap sampler spends on
the round itself. Three schedules:

* ``every``: every round, the curve at full resolution.
* ``log``: rounds spaced evenly in log(round + 1) from the first round to the last,
  ``evaluation.w2_per_doubling`` of them each time the round count doubles (1: rounds
  0, 1, 3, 7, 15, … ; each scored round about twice the one before it), plus every round
  of the final window. Dense early, where the curve falls fastest, and sparse late: the
  cost grows with the log of the run's length, the sampling loop's with its length.
* ``auto`` (the default): ``every`` while one set costs little (``chains × dim²`` at most
  :data:`AUTO_EVERY_FLOPS`, a millisecond or so: every dim-2 to dim-100 experiment of the
  examples), ``log`` beyond.

A scored round's W2 is the same number under every schedule: the rounds scored are
selected, not approximated (:mod:`starling.orchestrator.evaluation.w2_scores`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["AUTO_EVERY_FLOPS", "resolve_schedule", "scored_rounds"]

AUTO_EVERY_FLOPS = 10_000_000
"""``auto`` scores every round while ``chains × dim²`` (one set's projection) is at most
this."""


def resolve_schedule(schedule: str, chains: int, dim: int) -> str:
    """``every`` or ``log``: what ``auto`` means for sets of ``chains`` points in ``dim``."""
    if schedule != "auto":
        return schedule
    return "every" if chains * dim * dim <= AUTO_EVERY_FLOPS else "log"


def scored_rounds(rounds: int, window: int, schedule: str, per_doubling: int) -> np.ndarray:
    """The sorted round indices (of ``0 .. rounds − 1``) that a series of ``rounds`` rounds
    is scored at; ``schedule`` is ``every`` or ``log`` (:func:`resolve_schedule`). The last
    ``window`` rounds are always among them (the final figure pools them)."""
    if rounds <= 0:
        return np.zeros(0, dtype=np.int64)
    points = int(np.ceil(per_doubling * np.log2(rounds))) + 1
    if schedule == "every" or points + window >= rounds:
        return np.arange(rounds, dtype=np.int64)
    spread = np.geomspace(1.0, float(rounds), points).round().astype(np.int64) - 1
    final = np.arange(max(0, rounds - window), rounds, dtype=np.int64)
    return np.union1d(spread, final)
