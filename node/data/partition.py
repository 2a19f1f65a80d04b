"""Which of a data file's training rows each node holds.

A pure function of the training rows (the file's rows less any held-out test split,
:mod:`starling.node.data.split`), the data seed and the sizes, so any party that knows the
experiment — each node for its own rows, the orchestrator for the reference posterior and
for a centralised baseline — computes the same rows without asking anyone, and without
reading a node's shard.

:func:`shard_rows` gives shard ``k`` of ``num_shards``:

  - ``interleaved`` (the default, Starling's original behaviour): training rows
    ``k, k+N, k+2N, …`` — the first ``size`` of them when a size is set;
  - ``random``: the training rows shuffled by the generator of ``(seed, "partition")``
    and cut into consecutive blocks of ``sizes[0], sizes[1], …`` rows (default: as equal
    as possible, the first ``n mod N`` shards one row larger). Blocks are disjoint, so
    heterogeneous sizes ([003] §5.1's heterogeneous workers) need only ``sizes``.

Rows come back sorted, so a shard's order does not depend on the shuffle.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from starling.node.params import ConfigError

__all__ = ["PARTITIONS", "default_sizes", "shard_rows"]

PARTITIONS = ("interleaved", "random")

_PARTITION = 0x9A271
"""Mixed into the seed so the partition's stream is neither a synthetic shard's
(``shard_rng(seed, k)``) nor the test split's."""


def default_sizes(n_rows: int, num_shards: int) -> list[int]:
    """``n_rows`` dealt as evenly as possible over ``num_shards`` shards."""
    base, extra = divmod(n_rows, num_shards)
    return [base + (1 if k < extra else 0) for k in range(num_shards)]


def shard_rows(
    train: np.ndarray,
    shard: int,
    num_shards: int,
    partition: str = "interleaved",
    sizes: Sequence[int] = (),
    seed: int = 0,
) -> np.ndarray:
    """The training rows (indices into the file) shard ``shard`` holds; see the module
    docstring. ``sizes`` has one entry per shard, 0 meaning "the default share"."""
    if not 0 <= shard < num_shards:
        raise ConfigError(f"data.shard: {shard} is not among the {num_shards} shards")
    if sizes and len(sizes) != num_shards:
        raise ConfigError(f"data.sizes: {len(sizes)} sizes for {num_shards} shards")
    n = len(train)
    if partition == "interleaved":
        rows = train[shard::num_shards]
        wanted = sizes[shard] if sizes else 0
        if wanted > len(rows):
            raise ConfigError(
                f"data.size: shard {shard} asks for {wanted} rows but an interleaved share "
                f"of {n} training rows over {num_shards} shards has {len(rows)}"
            )
        return rows[:wanted] if wanted else rows
    if partition != "random":
        raise ConfigError(
            f"data.partition: unknown partition {partition!r} (use {', '.join(PARTITIONS)})"
        )
    shares = default_sizes(n, num_shards)
    chosen = [s if s else shares[k] for k, s in enumerate(sizes)] if sizes else shares
    if sum(chosen) > n:
        raise ConfigError(
            f"data.sizes: {sum(chosen)} rows over all shards, but the file has {n} training rows"
        )
    start = sum(chosen[:shard])
    order = np.random.default_rng(np.random.SeedSequence([seed, _PARTITION])).permutation(n)
    return np.sort(train[order[start : start + chosen[shard]]])
