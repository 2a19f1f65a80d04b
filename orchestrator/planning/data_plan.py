"""Which data each node holds: one :class:`~starling.node.spec.DataSpec` per data-holding node.

The experiment's ``data`` section cuts the data into shards — one per data node unless
``data.shards`` says otherwise — of ``data.size`` points each, or ``data.sizes[k]`` for
shard k, or a node's own ``nodes[i].data.size``; ``nodes[i].data.shard`` picks which shard
a node holds, ``nodes[i].data.path`` gives it a file of its own instead. With one data
node and ``data.shards: N`` that node holds all N shards: a centralised baseline run on
*exactly* the rows an N-node run of the same data section holds (synthetic shards are
generated from ``(data.seed, k)``, file shards are :mod:`starling.node.partition`'s, so the pooled
node regenerates or re-reads the very same rows).

Both the node specs (what each node is told) and the evaluation (the reference posterior,
given every node's data) take their data from :func:`data_specs`, so they cannot disagree.
"""

from __future__ import annotations

from starling.node.config import NODE_SOURCE
from starling.node.data.shards import file_rows
from starling.node.params import ConfigError
from starling.node.spec import DataSpec
from starling.orchestrator.config.experiment import Experiment

__all__ = ["data_specs", "held_out_split"]


def data_specs(experiment: Experiment) -> dict[str, DataSpec]:
    """Data node id -> its DataSpec, in the experiment's node order; one-line errors name
    the field (``data.sizes``, ``nodes[2].data.shard``)."""
    d = experiment.data
    holders = experiment.data_nodes()
    if not holders:
        return {}
    place = {entry.id: k for k, entry in enumerate(experiment.nodes)}
    holding = set(holders)  # membership tests below: a set, or parsing is quadratic
    own = {e.id: e.data for e in experiment.nodes if e.id in holding and e.data is not None}
    if d.source == NODE_SOURCE and own:
        node = next(iter(own))
        raise ConfigError(
            f"nodes[{place[node]}].data: the experiment leaves the data to the nodes "
            "(data.source: node); set it in the node's own config"
        )
    private = {n for n in holders if own.get(n) is not None and own[n].path is not None}
    shared = [n for n in holders if n not in private]
    num_shards = d.shards if d.shards is not None else len(shared)
    if shared and num_shards != len(shared) and len(shared) != 1:
        raise ConfigError(
            f"data.shards: {num_shards} shards for {len(shared)} data nodes: give one per "
            "data node, or one node that pools them all (a centralised baseline)"
        )
    pooled = len(shared) == 1 and num_shards > 1
    shard_of = _shards(shared, own, num_shards, place, pooled)
    sizes = _sizes(experiment, shared, own, num_shards, shard_of, place)
    specs: dict[str, DataSpec] = {}
    for node in holders:
        mine = own.get(node)
        if node in private:
            assert mine is not None and mine.path is not None
            specs[node] = DataSpec(
                source="file",
                shard=0,
                num_shards=1,
                seed=d.seed,
                size=mine.size or 0,
                sizes=(mine.size,) if mine.size else (),
                path=mine.path,
                format=mine.format,
            )
            continue
        shard = shard_of[node]
        specs[node] = DataSpec(
            source=d.source,
            shard=shard,
            num_shards=num_shards,
            seed=d.seed,
            size=sizes[shard] if sizes else (d.size if d.source != "file" and not d.total else 0),
            path=d.path,
            format=d.format,
            partition=d.partition,
            sizes=sizes,
            shards=tuple(range(num_shards)) if pooled else (),
            total=d.total or 0 if d.source == "synthetic" else 0,
            **held_out_split(experiment),
        )
    if d.source == "synthetic" and d.total:
        # As a file of too few rows is refused (node/data.py), before any node starts.
        if any(file_rows(specs[node], d.total).size == 0 for node in shared):
            raise ConfigError(f"data.total: {d.total} points, too few for {num_shards} nodes")
    return specs


def _shards(shared, own, num_shards, place, pooled) -> dict[str, int]:
    """Each shared-data node's shard: its place among them, or its own ``data.shard``."""
    shard_of: dict[str, int] = {}
    holder_of: dict[int, str] = {}  # shard -> node: which node holds a shard, at once
    for k, node in enumerate(shared):
        mine = own.get(node)
        shard = mine.shard if mine is not None and mine.shard is not None else k
        if pooled and shard != 0:
            raise ConfigError(
                f"nodes[{place[node]}].data.shard: a node that pools all "
                f"{num_shards} shards takes no shard of its own"
            )
        if shard >= num_shards:
            raise ConfigError(
                f"nodes[{place[node]}].data.shard: {shard} is not among the {num_shards} shards"
            )
        if shard in holder_of:
            raise ConfigError(
                f"nodes[{place[node]}].data.shard: shard {shard} is already node "
                f"{holder_of[shard]!r}'s"
            )
        shard_of[node] = shard
        holder_of[shard] = node
    return shard_of


def _sizes(experiment, shared, own, num_shards, shard_of, place) -> tuple[int, ...]:
    """Every shard's size when any is set apart from the default; () otherwise (the
    default: ``data.size`` per synthetic shard, an even share of a file)."""
    d = experiment.data
    given = {n: own[n].size for n in shared if own.get(n) is not None and own[n].size}
    dealt = d.source == "file" or d.total is not None  # rows of one set, dealt out
    explicit = "size" in d.model_fields_set
    if d.sizes is None and not given and not (dealt and explicit):
        return ()
    if d.sizes is not None and len(d.sizes) != num_shards:
        raise ConfigError(f"data.sizes: {len(d.sizes)} sizes for {num_shards} shards")
    base = d.size if (not dealt or explicit) else 0
    sizes = list(d.sizes) if d.sizes is not None else [base] * num_shards
    for node, size in given.items():
        if len(shared) == 1 and num_shards > 1:
            raise ConfigError(
                f"nodes[{place[node]}].data.size: a node that pools all shards has their "
                "sizes (data.sizes)"
            )
        sizes[shard_of[node]] = size
    return tuple(sizes)


def held_out_split(experiment: Experiment) -> dict:
    """The ``test_fraction`` / ``test_seed`` of every node's DataSpec: with file data and
    ``evaluation.test.split``, the nodes drop the held-out rows the evaluation scores on
    (:mod:`starling.orchestrator.evaluation.heldout`), so no held-out row is trained on."""
    test = experiment.evaluation.test
    if test is None or test.split is None or experiment.data.source != "file":
        return {}
    return {"test_fraction": float(test.split), "test_seed": int(test.seed)}
