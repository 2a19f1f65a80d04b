"""The named graph kinds of the ``topology`` section, their fields, and building one."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from starling.node.params import ConfigError
from starling.orchestrator.topology.builders import (
    directed_ring,
    edge_list,
    erdos_renyi,
    full,
    grid,
    none,
    path,
    random_digraph,
    random_regular,
    ring,
    star,
)
from starling.orchestrator.topology.graph import Graph

__all__ = ["KINDS", "MAX_LINKS", "MAX_NODES", "TOPOLOGIES", "Kind", "build_graph", "link_bound"]

MAX_NODES = 100_000
"""The most nodes an experiment may have: a ring of 100,000 parses in about 3 s; a typo
(``nodes: 100000000000000``) would otherwise build ids, graphs and shards for ever."""

MAX_LINKS = 1_000_000
"""The most directed links the graphs of one topology may hold together (a full graph
on 1,000 nodes has 999,000): checked on each kind's bound before a graph is built, since
``full`` or ``erdos_renyi`` on 5,000 nodes took minutes and gigabytes to build and check."""


def _probability(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(f"{where}: expected a probability in [0, 1], got {value!r}")
    return float(value)


def _count(value: Any, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}: expected an integer >= {minimum}, got {value!r}")
    if value > 2**63 - 1:  # ``period`` is sent to the nodes as an int64
        raise ConfigError(f"{where}: must be at most {2**63 - 1}, got {value}")
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


def link_bound(kind: str, params: Mapping[str, Any], nodes: int) -> int:
    """At most how many directed links (and pairs drawn) ``kind`` builds over ``nodes``:
    known before a graph is built, so an oversized one is refused, not built."""
    key = str(kind).replace("-", "_")
    if key in ("full", "erdos_renyi", "random_digraph"):
        return nodes * (nodes - 1)
    if key == "random_regular":
        k = params.get("k")
        return nodes * k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else 0
    if key == "edges":
        edges = params.get("edges")
        return 2 * len(edges) if isinstance(edges, (list, tuple)) else 0
    if key == "none":
        return 0
    if key == "directed_ring":
        return nodes
    return (4 if key == "grid" else 2) * nodes  # ring, path, star, grid


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
