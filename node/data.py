"""Load a node's private shard. Data is read or generated here, on the node, never sent."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from node.models.base import Dataset
from node.params import ConfigError
from node.spec import DataSpec

__all__ = ["load_shard", "shard_rng", "read_table"]


def shard_rng(seed: int, shard: int) -> np.random.Generator:
    """The generator for synthetic shard ``shard``: independent across shards, reproducible."""
    return np.random.default_rng(np.random.SeedSequence([seed, shard]))


def load_shard(spec: DataSpec, model) -> Dataset:
    """This node's rows: generated from (seed, shard) or rows ``shard::num_shards`` of a file."""
    if spec.source == "synthetic":
        if spec.size <= 0:
            raise ConfigError("data.size: must be a positive number of points per node")
        return model.synthesize(shard_rng(spec.seed, spec.shard), spec.size)
    if spec.source == "file":
        full = read_table(spec.path, spec.format)
        rows = np.arange(spec.shard, len(full), spec.num_shards)
        return Dataset(X=full.X[rows], y=full.y[rows])
    raise ConfigError(f"data.source: unknown source {spec.source!r} (use synthetic or file)")


def read_table(path: str, fmt: str = "") -> Dataset:
    """Read features and targets from ``.npz`` (arrays ``X``, ``y``) or ``.csv`` (last column y)."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"data.path: no such file {path!r}")
    fmt = fmt or file.suffix.lstrip(".").lower()
    if fmt == "npz":
        with np.load(file) as arrays:
            if "X" not in arrays or "y" not in arrays:
                raise ConfigError(f"data.path: {path!r} must hold arrays 'X' and 'y'")
            return Dataset(X=np.asarray(arrays["X"], float), y=np.asarray(arrays["y"], float))
    if fmt == "csv":
        table = np.loadtxt(file, delimiter=",", ndmin=2)
        return Dataset(X=table[:, :-1], y=table[:, -1])
    raise ConfigError(f"data.format: unknown format {fmt!r} (use npz or csv)")
