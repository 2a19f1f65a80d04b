"""Samples stored once: a complete local run lets go of its nodes' stores.

A local run's nodes keep their sample stores in the results folder (``nodes/state/<id>/``,
:func:`starling.orchestrator.execution.backends.local.state_dir`), and the run writes the same
samples again to ``samples/node-<id>.npz``. The npz files are the results (what readers and the
evaluation load); the stores exist so that a node can resume and so that ``starling collect`` can
recover a run whose orchestrator died (``orchestrator/execution/recovery.py`` streams them from node
processes started again on those dirs). Once a run has ended ``complete`` — every node finished and
every round of every node was collected — and each npz reads back equal to what was collected,
neither is needed any more: ``collect`` refuses a folder whose run ended, and a new run starts its
nodes afresh. Then each node's state dir is removed, so the samples are on disk once — but only
after the folder's final manifest is written (``after_manifest`` of
:func:`~starling.orchestrator.execution.runner.run_experiment`): a manifest that cannot be written
leaves the folder to ``collect``, which needs the stores. Before, they were removed first, and
``collect`` then found nothing to recover.

Kept, on purpose: the stores of a run that ended ``partial``, ``failed`` or ``interrupted``
(a store may hold samples that were not collected), a node whose npz does not read back
equal, and every store of the docker backend (its volumes are removed with the run
anyway) or of an inventory (a device keeps its own store; the orchestrator never touches
a node's files).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from starling.orchestrator.execution.backends.local import state_dir

__all__ = ["release_local_stores"]


def _reads_back(path: Path, values: np.ndarray, rounds: np.ndarray) -> bool:
    """Whether the npz at ``path`` holds exactly ``values`` and ``rounds``."""
    try:
        with np.load(path, allow_pickle=False) as data:
            stored, stored_rounds = data["samples"], data["rounds"]
    except (OSError, KeyError, ValueError):
        return False
    return (
        stored.dtype == values.dtype
        and stored.shape == values.shape
        and np.array_equal(stored_rounds, rounds)
        and stored.tobytes() == values.tobytes()  # bit for bit, NaN included
    )


def release_local_stores(
    out_dir: Path,
    samples: Mapping[str, np.ndarray],
    rounds: Mapping[str, np.ndarray],
) -> tuple[list[str], list[str]]:
    """Remove the state dir of every node whose ``samples/node-<id>.npz`` reads back equal
    to ``samples``/``rounds``; call only for a complete local run. Returns (released, kept)
    node ids. One node's samples are read back at a time."""
    out_dir = Path(out_dir)
    released, kept = [], []
    for node in sorted(samples):
        npz = out_dir / "samples" / f"node-{node}.npz"
        if _reads_back(npz, samples[node], rounds[node]):
            shutil.rmtree(state_dir(out_dir / "nodes", node), ignore_errors=True)
            released.append(node)
        else:
            kept.append(node)
    return released, kept
