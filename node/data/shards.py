"""A node's shard: the rows it holds, generated from a seed or picked from a table's rows.

Data is read or generated here, on the node, never sent. A synthetic shard is drawn from
``(seed, shard)`` (:func:`shard_rng`), or dealt out of one data set drawn once from ``seed``
(``data.total``); a file's shard is its rows left after the held-out test split
(:mod:`starling.node.data.split`), dealt by :mod:`starling.node.data.partition`. The
orchestrator computes the same rows (:func:`file_rows`) for the reference posterior without
reading a node's shard.
"""

from __future__ import annotations

import numpy as np

from starling.node.data.files import load_file
from starling.node.data.partition import shard_rows
from starling.node.data.split import training_rows
from starling.node.models.base import Dataset, Model
from starling.node.params import ConfigError
from starling.node.spec import DataSpec

__all__ = ["file_rows", "load_shard", "pool_rng", "shard_rng"]


def shard_rng(seed: int, shard: int) -> np.random.Generator:
    """The generator for synthetic shard ``shard``: independent across shards, reproducible."""
    return np.random.default_rng(np.random.SeedSequence([seed, shard]))


def pool_rng(seed: int) -> np.random.Generator:
    """The generator of a synthetic data set drawn once and dealt out (``data.total``):
    a stream of its own, no shard's."""
    return np.random.default_rng(np.random.SeedSequence([seed, _POOL]))


_POOL = 0x9001


def load_shard(spec: DataSpec, model: Model) -> Dataset:
    """This node's rows: generated from (seed, shard) for each shard it holds, or its
    shards of a file's training rows (:mod:`starling.node.data.partition`)."""
    if spec.source == "synthetic" and spec.total > 0:
        pool = model.synthesize(pool_rng(spec.seed), spec.total)
        rows = file_rows(spec, spec.total)
        return Dataset(X=pool.X[rows], y=pool.y[rows])
    if spec.source == "synthetic":
        parts = []
        for shard in spec.held_shards():
            size = spec.shard_size(shard)
            if size <= 0:
                raise ConfigError("data.size: must be a positive number of points per node")
            parts.append(model.synthesize(shard_rng(spec.seed, shard), size))
        return parts[0] if len(parts) == 1 else _concatenate(parts)
    if spec.source == "file":
        full = load_file(spec.path, spec.format, model)
        rows = file_rows(spec, len(full))
        if rows.size == 0:
            train = len(training_rows(len(full), spec.test_fraction, spec.test_seed))
            held = (
                f", {train} of them left for training by evaluation.test.split"
                if train < len(full)
                else ""
            )
            raise ConfigError(
                f"data.path: {spec.path!r} has {len(full)} rows{held}, too few for "
                f"{spec.num_shards} nodes"
            )
        return Dataset(X=full.X[rows], y=full.y[rows])
    raise ConfigError(f"data.source: unknown source {spec.source!r} (use synthetic or file)")


def file_rows(spec: DataSpec, n_rows: int) -> np.ndarray:
    """Indices of the rows (of a file, or a synthetic pool) of ``n_rows`` rows that
    ``spec``'s shards hold."""
    train = training_rows(n_rows, spec.test_fraction, spec.test_seed)
    parts = [
        shard_rows(train, shard, spec.num_shards, spec.partition, spec.sizes, spec.seed)
        for shard in spec.held_shards()
    ]
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _concatenate(parts: list[Dataset]) -> Dataset:
    return Dataset(X=np.concatenate([p.X for p in parts]), y=np.concatenate([p.y for p in parts]))
