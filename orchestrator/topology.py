"""Communication graphs and the neighbourhoods (with mixing weights) nodes are given.

A :class:`Graph` is a set of directed edges ``sender → receiver`` over named nodes; an
undirected graph holds both directions of every edge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from node.params import ConfigError
from node.spec import Neighbourhood

__all__ = ["Graph", "build_graph", "neighbourhoods", "metropolis_weights", "TOPOLOGIES"]


@dataclass(frozen=True)
class Graph:
    nodes: tuple[str, ...]
    edges: frozenset[tuple[str, str]]
    directed: bool = False

    def out_peers(self, node: str) -> tuple[str, ...]:
        return tuple(r for r in self.nodes if (node, r) in self.edges)

    def in_peers(self, node: str) -> tuple[str, ...]:
        return tuple(s for s in self.nodes if (s, node) in self.edges)


def _undirected(nodes: Sequence[str], pairs) -> Graph:
    edges = set()
    for a, b in pairs:
        if a != b:
            edges.add((a, b))
            edges.add((b, a))
    return Graph(tuple(nodes), frozenset(edges), directed=False)


def ring(nodes: Sequence[str], **_: Any) -> Graph:
    n = len(nodes)
    if n < 3:
        return path(nodes)
    return _undirected(nodes, [(nodes[k], nodes[(k + 1) % n]) for k in range(n)])


def path(nodes: Sequence[str], **_: Any) -> Graph:
    return _undirected(nodes, [(nodes[k], nodes[k + 1]) for k in range(len(nodes) - 1)])


def full(nodes: Sequence[str], **_: Any) -> Graph:
    return _undirected(nodes, [(a, b) for a in nodes for b in nodes if a < b])


def none(nodes: Sequence[str], **_: Any) -> Graph:
    return Graph(tuple(nodes), frozenset(), directed=False)


def star(nodes: Sequence[str], centre: str | None = None, **_: Any) -> Graph:
    hub = centre if centre is not None else nodes[0]
    return _undirected(nodes, [(hub, leaf) for leaf in nodes if leaf != hub])


def edge_list(
    nodes: Sequence[str], edges: Sequence[Sequence[str]] = (), directed: bool = False, **_: Any
) -> Graph:
    known = set(nodes)
    pairs = []
    for k, edge in enumerate(edges):
        if not isinstance(edge, (list, tuple)) or len(edge) != 2:
            raise ConfigError(f"topology.edges[{k}]: expected [sender, receiver], got {edge!r}")
        a, b = str(edge[0]), str(edge[1])
        for end in (a, b):
            if end not in known:
                raise ConfigError(f"topology.edges[{k}]: peer {end!r} is not a node")
        pairs.append((a, b))
    if directed:
        return Graph(tuple(nodes), frozenset((a, b) for a, b in pairs if a != b), directed=True)
    return _undirected(nodes, pairs)


TOPOLOGIES = {
    "ring": ring,
    "path": path,
    "full": full,
    "none": none,
    "star": star,
    "edges": edge_list,
}


def build_graph(kind: str, nodes: Sequence[str], params: Mapping[str, Any]) -> Graph:
    try:
        builder = TOPOLOGIES[kind]
    except KeyError:
        raise ConfigError(
            f"topology.kind: unknown topology {kind!r} (known: {', '.join(sorted(TOPOLOGIES))})"
        ) from None
    return builder(list(nodes), **dict(params))


def metropolis_weights(graph: Graph, node: str) -> dict[str, float]:
    """``S_ij = 1/(1 + max(deg_i, deg_j))``, ``S_ii = 1 − Σ_j S_ij``: doubly stochastic."""
    degree = {n: len(graph.in_peers(n)) for n in graph.nodes}
    weights = {j: 1.0 / (1.0 + max(degree[node], degree[j])) for j in graph.in_peers(node)}
    weights[node] = 1.0 - sum(weights.values())
    return weights


def neighbourhoods(graph: Graph) -> dict[str, Neighbourhood]:
    """Each node's out- and in-peers in ``graph``, with Metropolis–Hastings weights."""
    out = {}
    for node in graph.nodes:
        weights = metropolis_weights(graph, node) if not graph.directed else {}
        out[node] = Neighbourhood(
            out_peers=graph.out_peers(node), in_peers=graph.in_peers(node), weights=weights
        )
    return out
