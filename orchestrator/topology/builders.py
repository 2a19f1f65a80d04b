"""Graph builders: each takes the node ids (in experiment order) and its own parameters."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from starling.node.params import ConfigError
from starling.orchestrator.topology.graph import Graph


def _undirected(nodes: Sequence[str], pairs: Iterable[tuple[str, str]]) -> Graph:
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


def grid(nodes: Sequence[str], rows: int = 0, cols: int = 0, where: str = "topology", **_: Any):
    """A rows × cols lattice (no wrap-around); node ``r·cols + c`` sits at (r, c)."""
    if rows * cols != len(nodes):
        raise ConfigError(
            f"{where}.rows: a {rows}×{cols} grid has {rows * cols} nodes, "
            f"but the experiment has {len(nodes)}"
        )
    pairs = []
    for r in range(rows):
        for c in range(cols):
            here = nodes[r * cols + c]
            if c + 1 < cols:
                pairs.append((here, nodes[r * cols + c + 1]))
            if r + 1 < rows:
                pairs.append((here, nodes[(r + 1) * cols + c]))
    return _undirected(nodes, pairs)


def erdos_renyi(nodes: Sequence[str], p: float = 0.5, seed: int = 0, **_: Any) -> Graph:
    """G(n, p): each unordered pair is an edge with probability p, drawn from ``seed``."""
    n = len(nodes)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    draws = np.random.default_rng(seed).random(len(pairs))
    return _undirected(
        nodes, [(nodes[i], nodes[j]) for (i, j), u in zip(pairs, draws, strict=True) if u < p]
    )


def random_regular(
    nodes: Sequence[str], k: int = 2, seed: int = 0, where: str = "topology", **_: Any
) -> Graph:
    """A uniformly-ish random simple k-regular graph (Steger & Wormald's pairing, 1999)."""
    n = len(nodes)
    if not 0 <= k < n:
        raise ConfigError(f"{where}.k: a {k}-regular graph needs 0 <= k < nodes ({n})")
    if (n * k) % 2:
        raise ConfigError(f"{where}.k: a {k}-regular graph on {n} nodes needs n·k even")
    rng = np.random.default_rng(seed)
    for _attempt in range(1000):
        pairs = _pair_stubs(n, k, rng)
        if pairs is not None:
            return _undirected(nodes, [(nodes[i], nodes[j]) for i, j in sorted(pairs)])
    raise ConfigError(f"{where}.k: could not draw a {k}-regular graph on {n} nodes")


def _pair_stubs(n: int, k: int, rng: np.random.Generator) -> set[tuple[int, int]] | None:
    """Join k stubs per node at random, re-pairing only the clashes; None when stuck."""
    edges: set[tuple[int, int]] = set()
    stubs = [v for v in range(n) for _ in range(k)]
    while stubs:
        leftover: dict[int, int] = {}
        order = rng.permutation(len(stubs))
        shuffled = [stubs[i] for i in order]
        for u, v in zip(shuffled[0::2], shuffled[1::2], strict=True):
            pair = (min(u, v), max(u, v))
            if u == v or pair in edges:
                leftover[u] = leftover.get(u, 0) + 1
                leftover[v] = leftover.get(v, 0) + 1
            else:
                edges.add(pair)
        open_nodes = sorted(leftover)
        if not any(
            (a, b) not in edges for i, a in enumerate(open_nodes) for b in open_nodes[i + 1 :]
        ):
            return None if leftover else edges
        stubs = [v for v in open_nodes for _ in range(leftover[v])]
    return edges


def directed_ring(nodes: Sequence[str], **_: Any) -> Graph:
    """One-way cycle ``0 → 1 → … → n−1 → 0``."""
    n = len(nodes)
    edges = {(nodes[k], nodes[(k + 1) % n]) for k in range(n) if n > 1}
    return Graph(tuple(nodes), frozenset(edges), directed=True)


def random_digraph(nodes: Sequence[str], p: float = 0.5, seed: int = 0, **_: Any) -> Graph:
    """Each ordered pair ``i → j`` (i ≠ j) is an edge with probability p, drawn from ``seed``."""
    n = len(nodes)
    draws = np.random.default_rng(seed).random((n, n))
    edges = {(nodes[i], nodes[j]) for i in range(n) for j in range(n) if i != j and draws[i, j] < p}
    return Graph(tuple(nodes), frozenset(edges), directed=True)


def edge_list(
    nodes: Sequence[str],
    edges: Sequence[Sequence[Any]] = (),
    directed: bool = False,
    where: str = "topology",
    **_: Any,
) -> Graph:
    known = set(nodes)
    if not isinstance(edges, (list, tuple)):
        raise ConfigError(f"{where}.edges: expected a list of [sender, receiver], got {edges!r}")
    pairs = []
    seen: dict[tuple[str, ...], int] = {}
    for k, edge in enumerate(edges):
        if not isinstance(edge, (list, tuple)) or len(edge) != 2:
            raise ConfigError(f"{where}.edges[{k}]: expected [sender, receiver], got {edge!r}")
        a, b = str(edge[0]), str(edge[1])
        for end in (a, b):
            if end not in known:
                raise ConfigError(f"{where}.edges[{k}]: peer {end!r} is not a node")
        if a == b:
            raise ConfigError(f"{where}.edges[{k}]: a self-loop {a}→{a} is not a link")
        # The same link twice was kept once without a word: a typo for another link, or a
        # weight the file meant to give, would go unnoticed.
        link = (a, b) if directed else tuple(sorted((a, b)))
        if link in seen:
            both_ways = "" if directed else " (an undirected link runs both ways)"
            raise ConfigError(f"{where}.edges[{k}]: {a}→{b} repeats edges[{seen[link]}]{both_ways}")
        seen[link] = k
        pairs.append((a, b))
    if directed:
        return Graph(tuple(nodes), frozenset(pairs), directed=True)
    return _undirected(nodes, pairs)
