"""Topologies: one graph or a cyclic schedule of graphs, and parsing the ``topology`` section."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from starling.node.params import ConfigError
from starling.node.spec import Neighbourhood
from starling.orchestrator.topology.graph import Graph
from starling.orchestrator.topology.kinds import (
    MAX_LINKS,
    _count,
    _flag,
    _kind,
    build_graph,
    link_bound,
)
from starling.orchestrator.topology.weights import Matrix, neighbourhoods, parse_weights

__all__ = ["Topology", "node_count", "parse_topology"]

_TOPOLOGY_KEYS = ("nodes", "schedule", "period", "window", "allow_disconnected")


@dataclass(frozen=True)
class Topology:
    """Graphs in force one after another, ``period`` rounds each, cycling."""

    graphs: tuple[Graph, ...]
    period: int = 1
    window: int = 0
    """B of B-strong connectivity, in graphs of the schedule; 0 means the schedule length."""
    weights: tuple[Matrix | None, ...] = ()
    """User mixing matrix per graph, or None for Metropolis–Hastings."""
    kinds: tuple[str, ...] = ()
    hub: str | None = None
    """The centre of a star topology."""
    allow_disconnected: bool = False

    @classmethod
    def static(cls, graph: Graph) -> Topology:
        return cls(graphs=(graph,))

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.graphs[0].nodes

    @property
    def union(self) -> Graph:
        """Every edge used at some point: who may ever talk to whom."""
        return Graph.union(self.graphs)

    @property
    def time_varying(self) -> bool:
        return len(self.graphs) > 1

    @property
    def b(self) -> int:
        return self.window or len(self.graphs)

    def graph_at(self, round_index: int) -> Graph:
        """The graph in force at ``round_index`` (same rule as ``NodeSpec.neighbourhood``)."""
        return self.graphs[(round_index // max(self.period, 1)) % len(self.graphs)]

    def neighbourhoods(self) -> dict[str, tuple[Neighbourhood, ...]]:
        """Node id -> its neighbourhood in each graph of the schedule, in order."""
        per_graph = [
            neighbourhoods(g, self.weights[k] if k < len(self.weights) else None)
            for k, g in enumerate(self.graphs)
        ]
        return {node: tuple(hoods[node] for hoods in per_graph) for node in self.nodes}


def node_count(raw: Mapping[str, Any]) -> int | None:
    """How many nodes a ``topology`` section implies: ``nodes``, or a grid's rows × cols."""
    if "nodes" in raw:
        return raw["nodes"]
    if str(raw.get("kind")) == "grid" and "schedule" not in raw:
        # A bad rows or cols is named here: a None would read as "nodes is missing".
        rows = _count(raw.get("rows"), "topology.rows")
        return rows * _count(raw.get("cols"), "topology.cols")
    return None


def _check_size(params: Mapping[str, Any], schedule: Any, nodes: int) -> None:
    """Refuse, before building anything, graphs that would hold over MAX_LINKS links."""
    entries = [(params, "topology")]
    if isinstance(schedule, list):
        entries = [
            (item, f"topology.schedule[{k}]")
            for k, item in enumerate(schedule)
            if isinstance(item, Mapping)
        ]
    total = 0
    for entry, where in entries:
        total += link_bound(entry.get("kind", ""), entry, nodes)
        if total > MAX_LINKS:
            raise ConfigError(
                f"{where}.kind: {entry.get('kind')} on {nodes:,} nodes "
                + ("(with the schedule's graphs before it) " if where != "topology" else "")
                + f"would hold up to {total:,} links, over {MAX_LINKS:,}; use a sparser "
                "kind or fewer nodes"
            )


def _entry_seed(base: int, slot: int) -> int:
    """A schedule slot's default seed: distinct per slot, fixed by the experiment seed."""
    return int(np.random.SeedSequence([base, slot]).generate_state(1)[0])


def _graph_entry(
    raw: Mapping[str, Any], nodes: Sequence[str], where: str, seed: int, hub: str | None
) -> tuple[Graph, Matrix | None, str]:
    params = dict(raw)
    if "kind" not in params:
        raise ConfigError(f"{where}.kind: required field is missing")
    name, _ = _kind(params.pop("kind"), where)
    weights = params.pop("weights", None)
    if name == "star" and "centre" not in params and hub is not None:
        params["centre"] = hub
    graph = build_graph(name, nodes, params, where=where, seed=seed)
    return graph, parse_weights(weights, graph, f"{where}.weights"), name


def parse_topology(
    raw: Mapping[str, Any], nodes: Sequence[str], *, seed: int = 0, hub: str | None = None
) -> Topology:
    """The ``topology`` section over ``nodes`` (ids in experiment order).

    ``seed`` is the default for random kinds (the experiment seed); ``hub`` the default
    centre of a star (the node holding the hub role).
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(f"topology: expected a mapping, got {raw!r}")
    params = dict(raw)
    params.pop("nodes", None)
    schedule = params.pop("schedule", None)
    _check_size(params, schedule, len(nodes))
    period = _count(params.pop("period", 1), "topology.period")
    window = params.pop("window", None)
    allow = _flag(params.pop("allow_disconnected", False), "topology.allow_disconnected")
    if schedule is None:
        for key in ("window", "period"):
            if raw.get(key) is not None:
                raise ConfigError(f"topology.{key}: only meaningful with a schedule")
        if "kind" not in params:
            raise ConfigError("topology.kind: required field is missing (or give a schedule)")
        graph, weights, name = _graph_entry(params, nodes, "topology", seed, hub)
        centre = None
        if name == "star":
            centre = str(params.get("centre", hub if hub is not None else nodes[0]))
        return Topology(
            graphs=(graph,),
            period=period,
            weights=(weights,),
            kinds=(name,),
            hub=centre,
            allow_disconnected=allow,
        )
    base = _count(params.pop("seed", seed), "topology.seed", minimum=0)
    if params:
        key = sorted(params)[0]
        raise ConfigError(
            f"topology.{key}: with a schedule, give {key} inside each schedule entry "
            f"(known here: {', '.join(sorted(_TOPOLOGY_KEYS + ('seed',)))})"
        )
    if not isinstance(schedule, list) or not schedule:
        raise ConfigError("topology.schedule: expected a non-empty list of graphs ({kind: ...})")
    graphs, matrices, kinds = [], [], []
    for k, item in enumerate(schedule):
        where = f"topology.schedule[{k}]"
        if not isinstance(item, Mapping):
            raise ConfigError(f"{where}: expected a mapping such as {{kind: ring}}, got {item!r}")
        graph, weights, name = _graph_entry(item, nodes, where, _entry_seed(base, k), hub)
        graphs.append(graph)
        matrices.append(weights)
        kinds.append(name)
    b = len(graphs) if window is None else _count(window, "topology.window")
    if b > len(graphs):
        raise ConfigError(f"topology.window: B = {b} exceeds the schedule length ({len(graphs)})")
    return Topology(
        graphs=tuple(graphs),
        period=period,
        window=b,
        weights=tuple(matrices),
        kinds=tuple(kinds),
        allow_disconnected=allow,
    )
