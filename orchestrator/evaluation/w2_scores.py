"""W2 of every node's samples and of the network-average iterate, per round and pooled over
the final window ([000] §6.2.3; the metric:
:class:`starling.orchestrator.evaluation.metrics.GaussianTarget`).

The one costly step of a Gaussian W2 is the product ``X L`` of a point set with the
target's factor (``n d²``; everything else is ``n² d`` or less, ``n`` chains < ``d``).
It is linear, so it is done once per (node, round) and reused: the round's curve point,
the final window pooled (the pooled projections), and the average iterate
(``(Σ_i X_i / N) L = Σ_i (X_i L) / N``). Only the rounds of the schedule are scored
(:mod:`starling.orchestrator.evaluation.schedule`; the final window always is): the others
are NaN in the curve, and a scored round's W2 is the number every-round scoring gives it.
The scored rounds are taken in blocks of at most :data:`_BLOCK_BYTES` of one node's
samples, aligned on the last round so the final window lies in one block: memory holds one
block of samples and its projections at a time, whatever the run's length.

A round whose samples left the floats (see :mod:`starling.orchestrator.evaluation.evaluate`) has no
W2 (NaN in the curve, None as a final figure), and the average's projection is then
computed from the average itself rather than from the nodes'.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import islice

import numpy as np

from starling.orchestrator.evaluation.metrics import GaussianTarget
from starling.orchestrator.evaluation.network_average import NetworkAverage

__all__ = ["AVERAGE", "WORKERS", "w2_scores"]

AVERAGE = "average"
_BLOCK_BYTES = 16 * 1024 * 1024
"""A block holds at most this many bytes of one node's samples (at least ``window``
rounds); its projections, their running sum for the average and W2's temporaries take
about five times as much."""
WORKERS = min(2, os.cpu_count() or 1)
"""Nodes scored at once, a thread each (:func:`_each_scored`). Evaluation runs once the
nodes are done (``run``) or alone (``simulate``), so it may use two cores while BLAS keeps
one thread a process (``node/__init__.py``); more would hold more blocks in memory."""


def _scored(
    target: GaussianTarget, x: np.ndarray, sane: np.ndarray, z: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """W2 of every round of the block ``x`` (b, C, d) (NaN where not ``sane``) and the
    projections it used (None unless every round is sane and the target projects C points,
    :meth:`~starling.orchestrator.evaluation.metrics.GaussianTarget.projects`)."""
    if sane.all():
        if z is None and target.projects(x.shape[1]):
            z = target.project(x)
        return target.w2(x, z), z
    values = np.full(x.shape[0], np.nan)
    if sane.any():
        values[sane] = target.w2(x[sane])
    return values, None


def _final(
    target: GaussianTarget,
    block: tuple[np.ndarray, np.ndarray | None, np.ndarray],
    sane: np.ndarray,
    window: int,
) -> float | None:
    """W2 of the last ``window`` rounds of the block ``(x, z, curve)`` pooled; None if any of
    them diverged. Window 1 is the curve's last point (the same set, scored once)."""
    x, z, curve = block
    if not sane[-window:].all() or x.shape[0] == 0:
        return None
    if window == 1:
        value = float(curve[-1])
    else:
        d, last = x.shape[-1], x[-window:]
        pooled = last.reshape(1, -1, d)
        # Without z (a round earlier in the block diverged, or no projection needed), w2
        # works from the points alone.
        z = None if z is None else z[-window:].reshape(1, -1, d)
        value = float(target.w2(pooled, z)[0])
    return value if np.isfinite(value) else None


def w2_scores(
    target: GaussianTarget,
    samples: Mapping[str, np.ndarray],
    sane: Mapping[str, np.ndarray],
    average: NetworkAverage | None,
    window: int,
    schedule: Callable[[int], np.ndarray] | None = None,
) -> tuple[dict[str, float | None], dict[str, np.ndarray]]:
    """``(final, curves)``: name -> the pooled final-window W2, name -> W2 per round (NaN
    at a round not scored), for every node of ``samples`` and ``"average"`` when
    ``average`` is given.

    ``sane``: node -> per-round flags (finite, not beyond 1e150,
    :func:`starling.orchestrator.evaluation.evaluate.diverged_rounds`); ``average``: the
    mean of the nodes that recorded every round (its ``nodes``), computed at the rounds
    scored only; the others (a node that failed) are scored alone, on the rounds they have.
    ``schedule``: a series' length -> the sorted rounds to score, the last ``window`` among
    them (:func:`~starling.orchestrator.evaluation.schedule.scored_rounds`); every round if
    None.
    """
    final: dict[str, float | None] = {}
    curves: dict[str, np.ndarray] = {}
    together = average.nodes if average is not None else []
    groups = [together] + [[n] for n in samples if n not in together]
    for group in groups:
        if not group:
            continue
        first = samples[group[0]]
        rounds = first.shape[0]
        scored = np.arange(rounds) if schedule is None else schedule(rounds)
        with_average = average is not None and group is together
        names = [*group, *([AVERAGE] if with_average else [])]
        for name in names:
            curves[name] = np.full(rounds, np.nan)
        step = max(window, _BLOCK_BYTES // max(first[0].nbytes if rounds else 1, 1), 1)
        for stop in range(len(scored), 0, -step):  # from the last round back: see the module
            chosen = _rows(scored[max(0, stop - step) : stop])
            last = stop == len(scored)
            total: np.ndarray | None = None
            whole = True  # every node's projections of the block are at hand
            for node, (values, z) in _each_scored(target, samples, sane, group, chosen):
                x, ok = samples[node][chosen], sane[node][chosen]
                curves[node][chosen] = values
                if last:
                    final[node] = _final(target, (x, z, values), ok, window)
                if with_average:
                    whole = whole and z is not None
                    if whole:
                        assert z is not None
                        total = z.copy() if total is None else np.add(total, z, out=total)
            if with_average:
                assert average is not None
                x, ok = average.block(chosen)
                mean_z = total / len(group) if whole and total is not None else None
                values, z = _scored(target, x, ok, mean_z)
                curves[AVERAGE][chosen] = values
                if last:
                    final[AVERAGE] = _final(target, (x, z, values), ok, window)
        for name in names:
            final.setdefault(name, None)
    return final, curves


def _each_scored(
    target: GaussianTarget,
    samples: Mapping[str, np.ndarray],
    sane: Mapping[str, np.ndarray],
    group: list[str],
    chosen: slice | np.ndarray,
) -> Iterator[tuple[str, tuple[np.ndarray, np.ndarray | None]]]:
    """(node, :func:`_scored` of its rounds ``chosen``) for the nodes of ``group``, in
    order, on :data:`WORKERS` threads: BLAS and LAPACK release the interpreter lock, and
    each set is still computed whole by one thread, so the figures are the same floats as
    one at a time. A node is started as soon as one before it is handed back, not in
    batches of ``WORKERS``: five nodes on two threads would otherwise leave one thread
    idle while the fifth is scored. Memory holds ``WORKERS + 1`` nodes' blocks: those
    being scored and the one handed back."""
    if WORKERS < 2 or len(group) < 2:
        for node in group:
            yield node, _scored(target, samples[node][chosen], sane[node][chosen])
        return
    with ThreadPoolExecutor(WORKERS, thread_name_prefix="w2") as pool:

        def start(node: str) -> tuple[str, Future]:
            return node, pool.submit(_scored, target, samples[node][chosen], sane[node][chosen])

        waiting = iter(group)
        running = deque(start(node) for node in islice(waiting, WORKERS))
        while running:
            node, future = running.popleft()
            found = future.result()
            following = next(waiting, None)
            if following is not None:
                running.append(start(following))
            yield node, found


def _rows(indices: np.ndarray) -> slice | np.ndarray:
    """Sorted round indices as a slice when they are consecutive (a view of the samples,
    not a copy), else as they are."""
    if len(indices) and indices[-1] - indices[0] + 1 == len(indices):
        return slice(int(indices[0]), int(indices[-1]) + 1)
    return indices
