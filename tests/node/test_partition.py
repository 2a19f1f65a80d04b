"""How a file's rows are dealt out to nodes (node/data/partition.py): exact set properties."""

from __future__ import annotations

import numpy as np
import pytest

from starling.node.data.partition import default_sizes, shard_rows
from starling.node.params import ConfigError

N_ROWS = 103  # not a multiple of the shard count, so shares differ by one


def _all(num_shards, partition="random", sizes=(), seed=5, train=None):
    train = np.arange(N_ROWS) if train is None else train
    return [shard_rows(train, k, num_shards, partition, sizes, seed) for k in range(num_shards)]


def test_random_partition_is_disjoint_covers_every_row_and_is_seeded():
    shards = _all(4)
    together = np.concatenate(shards)
    assert len(together) == len(set(together.tolist())) == N_ROWS  # disjoint, covering
    assert [len(s) for s in shards] == default_sizes(N_ROWS, 4) == [26, 26, 26, 25]
    again = _all(4)
    assert all(np.array_equal(a, b) for a, b in zip(shards, again, strict=True))
    other = _all(4, seed=6)
    assert not all(np.array_equal(a, b) for a, b in zip(shards, other, strict=True))
    assert all(np.all(np.diff(s) > 0) for s in shards)  # sorted, no repeats
    # Not the interleaved deal: a shuffle puts neighbouring rows in different shards.
    assert not np.array_equal(shards[0], np.arange(0, N_ROWS, 4))


def test_heterogeneous_sizes_are_as_configured_and_disjoint():
    sizes = (5, 40, 0, 17)  # 0: that shard's default share (26)
    shards = _all(4, sizes=sizes)
    assert [len(s) for s in shards] == [5, 40, 26, 17]
    together = np.concatenate(shards)
    assert len(set(together.tolist())) == len(together)
    with pytest.raises(ConfigError, match=r"^data\.sizes: 104 rows over all shards, .* 103"):
        _all(2, sizes=(52, 52))


def test_interleaved_is_the_original_deal_and_takes_a_prefix_for_a_size():
    shards = _all(3, partition="interleaved")
    assert all(np.array_equal(s, np.arange(k, N_ROWS, 3)) for k, s in enumerate(shards))
    first = shard_rows(np.arange(N_ROWS), 1, 3, "interleaved", (10, 4, 10))
    assert first.tolist() == [1, 4, 7, 10]
    with pytest.raises(ConfigError, match=r"^data\.size: shard 0 asks for 40 rows"):
        shard_rows(np.arange(N_ROWS), 0, 3, "interleaved", (40, 1, 1))


def test_only_training_rows_are_dealt_out():
    """Rows left out of ``train`` (a held-out split) are in no shard, whatever the deal."""
    held = np.arange(0, N_ROWS, 7)
    train = np.setdiff1d(np.arange(N_ROWS), held)
    for partition in ("interleaved", "random"):
        together = np.concatenate(_all(5, partition=partition, train=train))
        assert sorted(together.tolist()) == train.tolist()
        assert not set(together.tolist()) & set(held.tolist())


def test_bad_partitions_name_the_field():
    with pytest.raises(ConfigError, match=r"^data\.partition: unknown partition 'blocks'"):
        shard_rows(np.arange(10), 0, 2, "blocks")
    with pytest.raises(ConfigError, match=r"^data\.shard: 2 is not among the 2 shards"):
        shard_rows(np.arange(10), 2, 2)
    with pytest.raises(ConfigError, match=r"^data\.sizes: 3 sizes for 2 shards"):
        shard_rows(np.arange(10), 0, 2, "random", (1, 2, 3))
