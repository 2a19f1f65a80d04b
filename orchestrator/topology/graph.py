"""A communication graph: directed edges ``sender → receiver`` over named nodes.

An undirected graph holds both directions of every edge. Connectivity here is what the
algorithms' convergence needs: strong connectivity ([002] §2.1), plain for symmetric graphs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

__all__ = ["Graph"]


@dataclass(frozen=True)
class Graph:
    nodes: tuple[str, ...]
    edges: frozenset[tuple[str, str]]
    directed: bool = False

    @cached_property
    def _adjacency(self) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
        # Built once per graph: peers listed in node order, so large graphs stay cheap.
        order = {n: k for k, n in enumerate(self.nodes)}
        outs: dict[str, list[str]] = {n: [] for n in self.nodes}
        ins: dict[str, list[str]] = {n: [] for n in self.nodes}
        for a, b in self.edges:
            outs[a].append(b)
            ins[b].append(a)
        by_order = order.__getitem__
        return (
            {n: tuple(sorted(v, key=by_order)) for n, v in outs.items()},
            {n: tuple(sorted(v, key=by_order)) for n, v in ins.items()},
        )

    def out_peers(self, node: str) -> tuple[str, ...]:
        return self._adjacency[0][node]

    def in_peers(self, node: str) -> tuple[str, ...]:
        return self._adjacency[1][node]

    def missing_reverse(self) -> tuple[str, str] | None:
        """An edge whose reverse is absent (in node order), or None if the graph is symmetric."""
        order = {n: k for k, n in enumerate(self.nodes)}
        for a, b in sorted(self.edges, key=lambda e: (order[e[0]], order[e[1]])):
            if (b, a) not in self.edges:
                return a, b
        return None

    def reachable(self, start: str, reverse: bool = False) -> set[str]:
        """Nodes reachable from ``start`` along edges (against them if ``reverse``)."""
        successors: dict[str, list[str]] = {n: [] for n in self.nodes}
        for a, b in self.edges:
            if reverse:
                successors[b].append(a)
            else:
                successors[a].append(b)
        seen = {start}
        queue = deque([start])
        while queue:
            for nxt in successors[queue.popleft()]:
                if nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)
        return seen

    def connectivity_gap(self) -> str | None:
        """Why the graph is not strongly connected, in words; None if it is.

        For a symmetric graph strong connectivity is plain connectivity, and only the
        forward direction can fail.
        """
        if len(self.nodes) <= 1:
            return None
        root = self.nodes[0]
        forward = self.reachable(root)
        missing = [n for n in self.nodes if n not in forward]
        if missing:
            return f"nodes {_names(missing)} unreachable from {root}"
        backward = self.reachable(root, reverse=True)
        missing = [n for n in self.nodes if n not in backward]
        if missing:
            return f"{root} unreachable from nodes {_names(missing)}"
        return None

    def laplacian(self) -> Any:
        """The unweighted Laplacian ``D − A`` (row i: i's in-peers), rows and columns in
        node order, as a scipy sparse matrix (a graph may have thousands of nodes)."""
        from scipy.sparse import csr_matrix

        order = {n: k for k, n in enumerate(self.nodes)}
        n = len(self.nodes)
        rows = [order[b] for _, b in self.edges]
        cols = [order[a] for a, _ in self.edges]
        adjacency = csr_matrix(([1.0] * len(rows), (rows, cols)), shape=(n, n))
        degree = csr_matrix(
            (np.asarray(adjacency.sum(axis=1)).ravel(), (range(n), range(n))), shape=(n, n)
        )
        return degree - adjacency

    @staticmethod
    def union(graphs: Sequence[Graph]) -> Graph:
        edges: set[tuple[str, str]] = set()
        for g in graphs:
            edges |= g.edges
        return Graph(graphs[0].nodes, frozenset(edges), any(g.directed for g in graphs))


def _names(nodes: Iterable[str]) -> str:
    nodes = list(nodes)
    shown = ", ".join(nodes[:10])
    return shown + (f" and {len(nodes) - 10} more" if len(nodes) > 10 else "")
