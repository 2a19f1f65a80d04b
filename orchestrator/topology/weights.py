"""Mixing weights: Metropolis–Hastings by default, or a user matrix checked against the graph."""

from __future__ import annotations

import math
from typing import Any

from starling.node.params import ConfigError
from starling.node.spec import Neighbourhood
from starling.orchestrator.topology.graph import Graph

__all__ = ["TOLERANCE", "Matrix", "metropolis_weights", "neighbourhoods", "parse_weights"]

TOLERANCE = 1e-9
"""How far a row or column sum may stray from one."""

Matrix = tuple[tuple[float, ...], ...]
"""A mixing matrix S, ``S[i][j]`` the weight node i gives node j."""


def metropolis_weights(graph: Graph, node: str) -> dict[str, float]:
    """``S_ij = 1/(1 + max(deg_i, deg_j))``, ``S_ii = 1 − Σ_j S_ij``: doubly stochastic.

    Metropolis–Hastings weights for an undirected graph ([000] §6.1; Xiao & Boyd 2004).
    """
    degree = len(graph.in_peers(node))
    weights = {j: 1.0 / (1.0 + max(degree, len(graph.in_peers(j)))) for j in graph.in_peers(node)}
    weights[node] = 1.0 - sum(weights.values())
    return weights


def parse_weights(value: Any, graph: Graph, where: str) -> Matrix | None:
    """``metropolis`` (None) or a user matrix S with ``S[i][j]`` the weight i gives j.

    A weight on j must be zero unless j sends to i; rows sum to one. Whether columns must
    too depends on the algorithm and is checked by :func:`check_topology`.
    """
    if value is None or value == "metropolis":
        return None
    n = len(graph.nodes)
    if not isinstance(value, list) or len(value) != n:
        raise ConfigError(
            f"{where}: expected 'metropolis' or a {n}×{n} matrix (one row per node), got {value!r}"
        )
    rows = []
    for i, row in enumerate(value):
        if not isinstance(row, list) or len(row) != n:
            raise ConfigError(f"{where}[{i}]: expected a row of {n} numbers, got {row!r}")
        for j, w in enumerate(row):
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
                raise ConfigError(f"{where}[{i}][{j}]: expected a number, got {w!r}")
            if w < 0:
                raise ConfigError(f"{where}[{i}][{j}]: weights must be non-negative, got {w}")
            receiver, sender = graph.nodes[i], graph.nodes[j]
            if i != j and w != 0 and (sender, receiver) not in graph.edges:
                raise ConfigError(
                    f"{where}[{i}][{j}]: {sender} does not send to {receiver} in this graph, "
                    "so the weight must be 0"
                )
        total = math.fsum(row)
        if abs(total - 1.0) > TOLERANCE:
            raise ConfigError(f"{where}[{i}]: row sums to {total:g}, must be 1")
        rows.append(tuple(float(w) for w in row))
    return tuple(rows)


def neighbourhoods(graph: Graph, matrix: Matrix | None = None) -> dict[str, Neighbourhood]:
    """Each node's out- and in-peers in ``graph``, with its mixing weights.

    Weights come from ``matrix`` when given, else Metropolis–Hastings when the graph is
    symmetric. A one-way graph gets none: push-sum nodes weight by ``1/d_i`` from their own
    out-degree ([002] eq. 5), which they know without being told.
    """
    symmetric = graph.missing_reverse() is None
    index = {n: k for k, n in enumerate(graph.nodes)}
    out = {}
    for i, node in enumerate(graph.nodes):
        in_peers = graph.in_peers(node)
        if matrix is not None:
            weights = {j: matrix[i][index[j]] for j in in_peers}
            weights[node] = matrix[i][i]
        elif symmetric:
            weights = metropolis_weights(graph, node)
        else:
            weights = {}
        out[node] = Neighbourhood(
            out_peers=graph.out_peers(node), in_peers=in_peers, weights=weights
        )
    return out
