"""Atomic checkpoints: a program's state arrays, its RNG state and where the run stands.

One ``.npz`` file holds the arrays and a JSON header. It is written to a temporary name,
fsynced, then moved over the old one with ``os.replace`` (atomic on POSIX), and the
directory is fsynced, so a crash leaves either the old or the new checkpoint, never half.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Checkpoint", "load_checkpoint", "save_checkpoint"]

_META = "__meta__"
_PREFIX = "state."


@dataclass(frozen=True)
class Checkpoint:
    next_round: int
    """The first round not yet run; the state is the one at the end of round next_round-1."""
    samples: int
    """How many samples the store held when the checkpoint was written."""
    rng_state: dict[str, Any]
    """``Generator.bit_generator.state`` (a JSON-able dict)."""
    program_state: dict[str, np.ndarray]
    fingerprint: str
    """Which spec produced it (see :func:`starling.node.runtime.run.spec_fingerprint`)."""


def save_checkpoint(path: str | Path, checkpoint: Checkpoint) -> None:
    path = Path(path)
    meta = {
        "next_round": checkpoint.next_round,
        "samples": checkpoint.samples,
        "rng_state": checkpoint.rng_state,
        "fingerprint": checkpoint.fingerprint,
    }
    # Any, not ndarray: numpy >= 2.1 types savez's ``**kwds`` as also filling its
    # ``allow_pickle: bool`` keyword, which numpy 1.x (supported) does not have.
    arrays: dict[str, Any] = {
        _PREFIX + name: np.asarray(value) for name, value in checkpoint.program_state.items()
    }
    arrays[_META] = np.array(json.dumps(meta))
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as file:
        np.savez(file, **arrays)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def load_checkpoint(path: str | Path) -> Checkpoint | None:
    """The checkpoint at ``path``, or None if there is none."""
    path = Path(path)
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data[_META]))
        state = {name[len(_PREFIX) :]: np.array(data[name]) for name in data.files if name != _META}
    return Checkpoint(
        next_round=int(meta["next_round"]),
        samples=int(meta["samples"]),
        rng_state=meta["rng_state"],
        program_state=state,
        fingerprint=str(meta["fingerprint"]),
    )
