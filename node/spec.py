"""Everything one node needs to know to run, as plain frozen dataclasses.

The orchestrator builds one :class:`NodeSpec` per node from the experiment file. The
simulator hands it straight to :func:`starling.node.assemble.build_program`; the network runtime
receives the same content over ``Control.Configure`` and rebuilds an equal ``NodeSpec``,
so both transports drive identical sampler objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MAX_SECONDS",
    "DataSpec",
    "LinkFault",
    "ModelSpec",
    "Neighbourhood",
    "NodeSpec",
    "in_peers_of",
    "out_peers_of",
    "peers_of",
]

MAX_SECONDS = 1_000_000.0
"""The longest time a setting may give (a round deadline, a grace period): about 11.6
days, which already means "wait for ever" to a run, while the clocks' waits stay far within
what the platform can represent (a wait of 10^10 s overflows ``time_t``)."""


@dataclass(frozen=True)
class Neighbourhood:
    """Who a node exchanges with during one graph period.

    ``out_peers`` receive this node's messages, ``in_peers`` send to it; neither includes
    the node itself. ``weights`` holds mixing weights keyed by peer id, with the node's own
    weight under its own id (Metropolis–Hastings for undirected graphs, [000] §6.1).
    """

    out_peers: tuple[str, ...] = ()
    in_peers: tuple[str, ...] = ()
    weights: Mapping[str, float] = field(default_factory=dict)


def out_peers_of(schedule: Iterable[Neighbourhood]) -> tuple[str, ...]:
    """Every peer a node sends to in some slot of ``schedule``, sorted, each once."""
    return tuple(sorted({peer for hood in schedule for peer in hood.out_peers}))


def in_peers_of(schedule: Iterable[Neighbourhood]) -> tuple[str, ...]:
    """Every peer a node takes messages from in some slot of ``schedule``, sorted, each once."""
    return tuple(sorted({peer for hood in schedule for peer in hood.in_peers}))


def peers_of(schedule: Iterable[Neighbourhood]) -> tuple[str, ...]:
    """Every peer a node exchanges with, either way, in some slot of ``schedule``, sorted."""
    hoods = tuple(schedule)
    return tuple(sorted({*out_peers_of(hoods), *in_peers_of(hoods)}))


@dataclass(frozen=True)
class ModelSpec:
    name: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DataSpec:
    """Where a node's private data comes from. It is loaded on the node, never sent.

    ``source`` is ``"synthetic"`` (generated from ``seed`` and ``shard``) or ``"file"``
    (shard ``shard`` of ``num_shards`` of ``path``'s rows, read in ``format``; see
    :mod:`starling.node.data.partition` for ``partition`` and ``sizes``).
    """

    source: str
    shard: int
    num_shards: int
    seed: int = 0
    size: int = 0
    path: str = ""
    format: str = ""
    partition: str = "interleaved"
    """How a file's training rows are dealt out: ``interleaved`` or ``random`` (seeded)."""
    sizes: tuple[int, ...] = ()
    """Every shard's size (one per shard; empty: ``size`` each for synthetic data, an even
    share of the file). A random partition's blocks are placed by them."""
    total: int = 0
    """Synthetic data drawn once as ``total`` points (from ``seed``) and dealt out like a
    file's rows; 0: each shard drawn on its own from ``(seed, shard)``."""
    shards: tuple[int, ...] = ()
    """The shards this node holds; empty means just ``shard``. A centralised baseline
    holds them all: exactly the rows of the decentralised run it is compared with."""

    def held_shards(self) -> tuple[int, ...]:
        return self.shards or (self.shard,)

    def shard_size(self, shard: int) -> int:
        """Shard ``shard``'s size as configured (0: the default share of a file)."""
        return self.sizes[shard] if self.sizes else self.size

    test_fraction: float = 0.0
    """File data: this fraction of the file's rows, picked by
    :func:`starling.node.data.split.held_out` from ``test_seed``, is held out for evaluation
    and in no shard (0: none)."""
    test_seed: int = 0


@dataclass(frozen=True)
class LinkFault:
    """A scheduled fault on this node's outbound link to ``receiver``.

    During rounds ``[start, stop)`` the link is down (``drop=1``) or drops each message
    with probability ``drop``, decided from a seeded stream so the schedule replays exactly.
    ``receiver="*"`` means every outbound link.
    """

    receiver: str
    start: int
    stop: int
    drop: float = 1.0
    seed: int = 0


@dataclass(frozen=True)
class NodeSpec:
    experiment: str
    node_id: str
    node_index: int
    role: str
    algorithm: str
    hyperparameters: Mapping[str, Any]
    model: ModelSpec
    data: DataSpec | None
    seed: int
    rounds: int
    chains: int
    num_nodes: int
    prior_share: float
    schedule: tuple[Neighbourhood, ...]
    schedule_period: int = 1
    peers: Mapping[str, str] = field(default_factory=dict)
    round_deadline: float = 2.0
    link_faults: tuple[LinkFault, ...] = ()
    checkpoint_every: int = 1000
    inbound_faults: tuple[tuple[str, LinkFault], ...] = ()
    """(in-peer, fault on its link to this node) while the schedule has that in-peer killed
    (a node fault). A live sender whose message the schedule withholds says so with a
    notice; a dead one cannot, so a synchronous node does not wait for it in those rounds.
    A scheduled outage then costs its neighbours no deadline, and a networked run withholds
    exactly what the simulator does."""

    def out_peers(self) -> tuple[str, ...]:
        """The peers this node sends to over its whole schedule (in some graph period),
        sorted: the outbound links it opens, the nodes that wait for its messages."""
        return out_peers_of(self.schedule)

    def in_peers(self) -> tuple[str, ...]:
        """The peers this node takes messages from over its whole schedule, sorted: the
        senders it admits, and the fixed index of per-peer state such as stale copies."""
        return in_peers_of(self.schedule)

    def all_peers(self) -> tuple[str, ...]:
        """Every peer it exchanges with over its whole schedule, either way, sorted: the
        nodes whose addresses it needs."""
        return peers_of(self.schedule)

    def neighbourhood(self, round_index: int) -> Neighbourhood:
        """The neighbourhood in force at ``round_index`` (graphs cycle period by period)."""
        if not self.schedule:
            return Neighbourhood()
        slot = (round_index // max(self.schedule_period, 1)) % len(self.schedule)
        return self.schedule[slot]
