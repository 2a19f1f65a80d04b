"""What an algorithm needs of its graph (``AlgorithmInfo.graph``), with field-named errors."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from starling.node.params import ConfigError
from starling.orchestrator.topology.graph import Graph
from starling.orchestrator.topology.kinds import KINDS
from starling.orchestrator.topology.schedule import Topology
from starling.orchestrator.topology.weights import TOLERANCE, Matrix

__all__ = ["check_topology", "hub_role"]


def hub_role(info: Any) -> str | None:
    """The role that sits at the hub of a star for this algorithm, as it declares it
    (``AlgorithmInfo.hub_role``), if it has one."""
    return info.hub_role


def check_topology(
    topology: Topology,
    info: Any,
    roles: Mapping[str, str],
    params: Mapping[str, Any] | None = None,
) -> None:
    """Raise a ConfigError naming ``topology`` if the graphs do not suit ``info.graph``,
    or (given ``params``, node id -> its parsed hyperparameters) ``info.graph_check``.

    ``roles`` maps node id to role (a star's hub is the node holding the hub role).
    """
    _check_graphs(topology, info, roles)
    if info.graph_check is None or params is None:
        return
    for k, graph in enumerate(topology.graphs):
        reason = info.graph_check([params[n] for n in graph.nodes], graph.laplacian())
        if reason is not None:
            where = f"topology.schedule[{k}]" if topology.time_varying else "topology"
            raise ConfigError(f"{where}: {info.name}: {reason}")


def _check_graphs(topology: Topology, info: Any, roles: Mapping[str, str]) -> None:
    _check_weights_used(topology, info)
    need = info.graph
    if need == "none":
        return
    if need == "star":
        _check_star(topology, info, roles)
        return
    for k, graph in enumerate(topology.graphs):
        if need == "undirected":
            where = f"topology.schedule[{k}]" if topology.time_varying else "topology"
            edge = graph.missing_reverse()
            if edge is not None:
                sender, receiver = edge
                raise ConfigError(
                    f"{where}: {info.name} needs an undirected graph, but the edge "
                    f"{sender}→{receiver} has no reverse {receiver}→{sender}"
                )
            matrix = topology.weights[k] if k < len(topology.weights) else None
            if matrix is not None:
                _check_doubly_stochastic(matrix, f"{where}.weights", info.name)
    if all(kind == "none" for kind in topology.kinds) or topology.allow_disconnected:
        return  # the no-edge baseline, or a disconnected graph asked for on purpose
    word = "connected" if need == "undirected" else "strongly connected"
    _check_connected(topology, topology.graphs, word, "")
    if need == "undirected" and any(w is not None for w in topology.weights):
        mixing = tuple(
            _weighted_links(g, w) if w is not None else g
            for g, w in zip(topology.graphs, topology.weights, strict=False)
        )
        _check_connected(topology, mixing, word, " by its nonzero weights")


def _check_weights_used(topology: Topology, info: Any) -> None:
    """Refuse a weight matrix given to an algorithm that mixes with no weights (push-sum
    divides by out-degrees, D-ULA and D-ADMMS use the graph's Laplacian, the star
    algorithms a hub): it was ignored without a word."""
    if info.mixing_weights:
        return
    for k, matrix in enumerate(topology.weights):
        if matrix is not None:
            where = f"topology.schedule[{k}]" if topology.time_varying else "topology"
            raise ConfigError(
                f"{where}.weights: {info.name} does not average with mixing weights and "
                "would ignore them; remove them"
            )


def _weighted_links(graph: Graph, matrix: Matrix) -> Graph:
    """The links of ``graph`` a mixing matrix gives a nonzero weight: a zero weight on both
    of a node's links cuts it off the consensus, however connected the graph."""
    nodes = graph.nodes
    kept = frozenset(
        (nodes[j], nodes[i])
        for i, row in enumerate(matrix)
        for j, weight in enumerate(row)
        if i != j and weight > 0
    )
    return Graph(nodes, kept, graph.directed)


def _check_connected(
    topology: Topology, graphs: tuple[Graph, ...], word: str, through: str
) -> None:
    """Refuse ``graphs`` (the topology's, or the links its weights use: ``through`` says
    which) unless connected, or over a schedule B-strongly connected."""
    hint = _hint(topology)
    if not topology.time_varying:
        gap = graphs[0].connectivity_gap()
        if gap is not None:
            where = "topology.weights" if through else "topology"
            raise ConfigError(f"{where}: the graph is not {word}{through}: {gap} ({hint})")
        return
    count, b = len(graphs), topology.b
    for start in range(count):
        slots = [(start + j) % count for j in range(b)]
        gap = Graph.union([graphs[s] for s in slots]).connectivity_gap()
        if gap is not None:
            which = (
                f"graph {slots[0]} is"
                if b == 1
                else f"graphs {', '.join(map(str, slots))} together are"
            )
            raise ConfigError(
                f"topology.schedule: {which} not {word}{through} (the union of every B = {b} "
                f"consecutive graphs must be): {gap} (raise topology.window, up to the "
                f"schedule length, or add edges; {hint})"
            )


def _hint(topology: Topology) -> str:
    hint = (
        "kind: none is the no-edge baseline; topology.allow_disconnected: true "
        "runs a disconnected graph on purpose"
    )
    if any(KINDS[k].random for k in topology.kinds):
        hint = "try another topology.seed or a denser graph; " + hint
    return hint


def _check_doubly_stochastic(matrix: Matrix, where: str, algorithm: str) -> None:
    for j in range(len(matrix)):
        total = math.fsum(row[j] for row in matrix)
        if abs(total - 1.0) > TOLERANCE:
            raise ConfigError(
                f"{where}: {algorithm} needs a doubly stochastic matrix, but column {j} "
                f"sums to {total:g}"
            )


def _check_star(topology: Topology, info: Any, roles: Mapping[str, str]) -> None:
    if topology.time_varying:
        raise ConfigError(
            f"topology.schedule: {info.name} runs on one fixed star; give kind: star instead"
        )
    graph = topology.graphs[0]
    role = hub_role(info)
    holders = [n for n in graph.nodes if role is not None and roles.get(n) == role]
    hub = holders[0] if holders else topology.hub
    if hub is None:
        hub = max(graph.nodes, key=lambda n: len(graph.out_peers(n)))
    label = f"its {role} {hub}" if role else f"node {hub}"
    if len(graph.nodes) < 2:
        # A hub alone has nothing to gather: no data, no gradient, no sample worth keeping.
        others = "/".join(r for r in info.roles if r != role) or "leaf"
        raise ConfigError(
            f"topology: {info.name} needs at least one {others} besides {label}, "
            f"got {len(graph.nodes)} node"
        )
    for leaf in graph.nodes:
        if leaf != hub and ((hub, leaf) not in graph.edges or (leaf, hub) not in graph.edges):
            raise ConfigError(
                f"topology: {info.name} needs a star around {label}, but {hub} and {leaf} "
                "are not linked both ways"
            )
    stray = sorted(e for e in graph.edges if hub not in e)
    if stray:
        a, b = stray[0]
        raise ConfigError(
            f"topology: {info.name} needs a star around {label}, but the edge {a}→{b} "
            "bypasses the hub"
        )
