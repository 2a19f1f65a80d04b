"""Communication graphs, time-varying schedules of them, and the mixing weights nodes get.

A :class:`Graph` is a set of directed edges ``sender → receiver`` over named nodes; an
undirected graph holds both directions of every edge. A :class:`Topology` is a cyclic
schedule of graphs, each in force for ``period`` rounds (one graph: a static topology).

Experiment-file syntax (the ``topology`` section)::

    topology:
      kind: ring            # see KINDS below
      nodes: 8              # or give a top-level ``nodes`` list
      seed: 3               # random kinds; default: the experiment seed
      weights: metropolis   # or an N×N row-stochastic matrix S (row i: node i's weights)
      allow_disconnected: false

    topology:               # time-varying: each graph in force for ``period`` rounds, cycling
      nodes: 6
      period: 5
      window: 2             # B: every B consecutive graphs together must be connected
      schedule:
        - {kind: directed_ring}
        - {kind: random_digraph, p: 0.3}

Kinds and their own fields (node ``k`` is the k-th node id in experiment order):

    ring, path, full, none                   undirected; ``none`` has no edges at all
    star            centre (default: the hub-role node, else the first node)
    grid            rows, cols               rows × cols lattice, no wrap; sets the node count
    erdos_renyi     p, seed                  each pair linked with probability p
    random_regular  k, seed                  simple k-regular graph (n·k even, k < n)
    directed_ring                            one-way cycle 0 → 1 → … → n−1 → 0
    random_digraph  p, seed                  each ordered pair i → j with probability p
    edges           edges, directed          explicit [[a, b], …]; undirected unless directed

Validation follows what the algorithm declares (``AlgorithmInfo.graph``): ``undirected``
needs every graph symmetric and connected; ``directed`` needs it strongly connected; over a
schedule the union of every ``window`` consecutive graphs must be (strongly) connected
(B-strong connectivity, [002] §2.1); ``star`` needs one fixed star with the hub role at the
centre; ``none`` takes anything. ``kind: none`` (no edges, [000]'s "no-edge" baseline) is
always accepted because it is asked for by name; any other disconnected graph is rejected
unless ``allow_disconnected: true`` says it is meant.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from node.params import ConfigError
from node.spec import Neighbourhood

__all__ = [
    "KINDS",
    "TOPOLOGIES",
    "Graph",
    "Topology",
    "build_graph",
    "check_topology",
    "hub_role",
    "metropolis_weights",
    "neighbourhoods",
    "node_count",
    "parse_topology",
]

_TOLERANCE = 1e-9


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


# ---------------------------------------------------------------------------------------
# Graph builders. Each takes the node ids (in experiment order) and its own parameters.


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
    for k, edge in enumerate(edges):
        if not isinstance(edge, (list, tuple)) or len(edge) != 2:
            raise ConfigError(f"{where}.edges[{k}]: expected [sender, receiver], got {edge!r}")
        a, b = str(edge[0]), str(edge[1])
        for end in (a, b):
            if end not in known:
                raise ConfigError(f"{where}.edges[{k}]: peer {end!r} is not a node")
        if a == b:
            raise ConfigError(f"{where}.edges[{k}]: a self-loop {a}→{a} is not a link")
        pairs.append((a, b))
    if directed:
        return Graph(tuple(nodes), frozenset(pairs), directed=True)
    return _undirected(nodes, pairs)


def _probability(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(f"{where}: expected a probability in [0, 1], got {value!r}")
    return float(value)


def _count(value: Any, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}: expected an integer >= {minimum}, got {value!r}")
    return value


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    return value


def _node_id(value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ConfigError(f"{where}: expected a node id, got {value!r}")
    return str(value)


def _degree(value: Any, where: str) -> int:
    return _count(value, where, minimum=0)


def _as_is(value: Any, where: str) -> Any:
    return value


@dataclass(frozen=True)
class Kind:
    build: Callable[..., Graph]
    params: Mapping[str, Callable[[Any, str], Any]] = field(default_factory=dict)
    """Parameter name -> checker(value, where) returning the parsed value."""
    required: tuple[str, ...] = ()
    random: bool = False
    """Drawn from a seed (``topology.seed``, default the experiment seed)."""


KINDS: dict[str, Kind] = {
    "ring": Kind(ring),
    "path": Kind(path),
    "star": Kind(star, {"centre": _node_id}),
    "grid": Kind(grid, {"rows": _count, "cols": _count}, required=("rows", "cols")),
    "full": Kind(full),
    "none": Kind(none),
    "erdos_renyi": Kind(erdos_renyi, {"p": _probability}, required=("p",), random=True),
    "random_regular": Kind(random_regular, {"k": _degree}, required=("k",), random=True),
    "directed_ring": Kind(directed_ring),
    "random_digraph": Kind(random_digraph, {"p": _probability}, required=("p",), random=True),
    "edges": Kind(edge_list, {"edges": _as_is, "directed": _flag}, required=("edges",)),
}
TOPOLOGIES = {name: kind.build for name, kind in KINDS.items()}

_COMMON_KEYS = ("kind", "seed", "weights")
_TOPOLOGY_KEYS = ("nodes", "schedule", "period", "window", "allow_disconnected")


def _kind(name: Any, where: str) -> tuple[str, Kind]:
    key = str(name).replace("-", "_")
    if key not in KINDS:
        raise ConfigError(
            f"{where}.kind: unknown topology {name!r} (known: {', '.join(sorted(KINDS))})"
        )
    return key, KINDS[key]


def build_graph(
    kind: str,
    nodes: Sequence[str],
    params: Mapping[str, Any],
    *,
    where: str = "topology",
    seed: int = 0,
) -> Graph:
    """The graph of ``kind`` over ``nodes``; ``params`` are the kind's own fields."""
    name, spec = _kind(kind, where)
    unknown = sorted(set(params) - set(spec.params) - {"seed"})
    if unknown:
        known = sorted(set(spec.params) | set(_COMMON_KEYS))
        raise ConfigError(
            f"{where}.{unknown[0]}: unknown field for kind {name} (known: {', '.join(known)})"
        )
    if "seed" in params and not spec.random:
        raise ConfigError(f"{where}.seed: kind {name} is not random, it takes no seed")
    for key in spec.required:
        if key not in params:
            raise ConfigError(f"{where}.{key}: required for kind {name}")
    parsed = {
        key: spec.params[key](params[key], f"{where}.{key}") for key in spec.params if key in params
    }
    if spec.random:
        parsed["seed"] = _count(params.get("seed", seed), f"{where}.seed", minimum=0)
    if "centre" in parsed and parsed["centre"] not in nodes:
        raise ConfigError(f"{where}.centre: {parsed['centre']!r} is not a node")
    return spec.build(list(nodes), where=where, **parsed)


# ---------------------------------------------------------------------------------------
# Mixing weights.

Matrix = tuple[tuple[float, ...], ...]


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
        if abs(total - 1.0) > _TOLERANCE:
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


# ---------------------------------------------------------------------------------------
# Topologies: one graph or a cyclic schedule of graphs.


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
    rows, cols = raw.get("rows"), raw.get("cols")
    if str(raw.get("kind")) == "grid" and isinstance(rows, int) and isinstance(cols, int):
        return rows * cols
    return None


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
    period = _count(params.pop("period", 1), "topology.period")
    window = params.pop("window", None)
    allow = _flag(params.pop("allow_disconnected", False), "topology.allow_disconnected")
    if schedule is None:
        if window is not None:
            raise ConfigError("topology.window: only meaningful with a schedule")
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


# ---------------------------------------------------------------------------------------
# What an algorithm needs of its graph.


def hub_role(info: Any) -> str | None:
    """The role that sits at the hub of a star for this algorithm, as it declares it
    (``AlgorithmInfo.hub_role``), if it has one."""
    return info.hub_role


def check_topology(topology: Topology, info: Any, roles: Mapping[str, str]) -> None:
    """Raise a ConfigError naming ``topology`` if the graphs do not suit ``info.graph``.

    ``roles`` maps node id to role (a star's hub is the node holding the hub role).
    """
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
                a, b = edge
                raise ConfigError(
                    f"{where}: {info.name} needs an undirected graph, but the edge {a}→{b} "
                    f"has no reverse {b}→{a}"
                )
            matrix = topology.weights[k] if k < len(topology.weights) else None
            if matrix is not None:
                _check_doubly_stochastic(matrix, f"{where}.weights", info.name)
    if all(kind == "none" for kind in topology.kinds) or topology.allow_disconnected:
        return  # the no-edge baseline, or a disconnected graph asked for on purpose
    word = "connected" if need == "undirected" else "strongly connected"
    hint = _hint(topology)
    if not topology.time_varying:
        gap = topology.graphs[0].connectivity_gap()
        if gap is not None:
            raise ConfigError(f"topology: the graph is not {word}: {gap} ({hint})")
        return
    count, b = len(topology.graphs), topology.b
    for start in range(count):
        slots = [(start + j) % count for j in range(b)]
        gap = Graph.union([topology.graphs[s] for s in slots]).connectivity_gap()
        if gap is not None:
            which = (
                f"graph {slots[0]} is"
                if b == 1
                else f"graphs {', '.join(map(str, slots))} together are"
            )
            raise ConfigError(
                f"topology.schedule: {which} not {word} (the union of every B = {b} "
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
        if abs(total - 1.0) > _TOLERANCE:
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
