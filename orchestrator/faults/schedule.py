"""Fault schedules from the experiment file: link faults for the senders' outbound links,
node faults for the orchestrator's run loop.

Syntax (the ``faults`` list; every entry is one fault)::

    faults:
      - {link: [A, B], rounds: [10, 30]}            # cut A–B for rounds 10..29
      - {link: [A, B], at_round: 10, for_rounds: 20} # the same (``rounds: 20`` also works)
      - {link: [A, B], at_seconds: 5, for_seconds: 2}# needs round_seconds (below)
      - {link: all, drop: 0.1}                       # every link fails w.p. 0.1 each round
      - {link: [A, B], drop: 0.3, rounds: [0, 50]}   # one link, i.i.d. failures
      - {node: C, kill_at_round: 30, restart_after_rounds: 10}
      - {node: C, kill_at_seconds: 6, restart_after_seconds: 3}

Without a time field a fault lasts the whole run; without ``for_…`` it lasts until the
end. ``drop`` (default 1: the link is down) is the per-round failure probability,
decided by :func:`starling.node.faults.withheld_by_schedule` from a seed derived from the
experiment seed and the fault's position (or the fault's own ``seed``), so a schedule
replays exactly. ``link`` must be an edge of the topology (of some graph of a
time-varying schedule). On an undirected topology ``link: [A, B]`` means the link between
A and B, both directions, failing together (``both_ways: false`` keeps it one-way); on a
directed one it means ``A → B`` only (``both_ways: true`` adds ``B → A`` if that is an
edge). ``link: all`` with ``drop`` fails each undirected link as a whole, or each one-way
link independently on a directed topology.

Time. A schedule given in seconds is turned into rounds with the experiment's nominal
``round_seconds`` (R): a stretch ``[t, t + d)`` covers every round whose nominal span
``[r·R, (r+1)·R)`` overlaps it, i.e. rounds ``floor(t/R) .. ceil((t+d)/R) − 1``. ``simulate``
and ``run`` both apply the round form, so one schedule means the same thing in both; a
networked run whose rounds take longer or shorter than R still sees the fault at the same
rounds. Node faults keep the seconds as written too, for a run loop that prefers the clock.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
from pydantic import AfterValidator, BaseModel, ValidationError

from starling.node.params import ConfigError
from starling.node.spec import LinkFault
from starling.orchestrator.core.validation import STRICT, Bool, config_error
from starling.orchestrator.topology import Graph, Topology

__all__ = [
    "FOREVER",
    "FaultSchedule",
    "NodeFault",
    "fault_seed",
    "parse_faults",
    "rounds_covering",
]

FOREVER = 2**62
"""The ``stop`` of a fault that lasts until the end of the run."""

# Seconds are converted by floor/ceil; a ratio like 0.3 / 0.1 = 2.9999999999999996 must
# still count as round 3.
_SLACK = 1e-9


@dataclass(frozen=True)
class NodeFault:
    """A node process killed at a round and, optionally, restarted later.

    The node is down for rounds ``[at_round, restart_round)``; ``restart_round`` None means
    it stays down. ``at_seconds`` / ``restart_after_seconds`` are the values as written when
    the fault was given in seconds (the round fields are then derived from them).
    """

    node: str
    at_round: int
    restart_round: int | None = None
    at_seconds: float | None = None
    restart_after_seconds: float | None = None

    @property
    def restart_after_rounds(self) -> int | None:
        return None if self.restart_round is None else self.restart_round - self.at_round

    def down(self, round_index: int) -> bool:
        """Whether the node is down at ``round_index``."""
        stop = FOREVER if self.restart_round is None else self.restart_round
        return self.at_round <= round_index < stop


@dataclass(frozen=True)
class FaultSchedule:
    links: tuple[tuple[str, LinkFault], ...] = ()
    """(sender, fault on one of its outbound links), for ``NodeSpec.link_faults``."""
    nodes: tuple[NodeFault, ...] = ()

    def link_faults(self, sender: str) -> tuple[LinkFault, ...]:
        return tuple(f for s, f in self.links if s == sender)


def fault_seed(experiment_seed: int, *path: int) -> int:
    """A fault's draw seed, from the experiment seed and the fault's position."""
    return int(np.random.SeedSequence([experiment_seed, *path]).generate_state(1)[0])


def rounds_covering(at_seconds: float, for_seconds: float | None, round_seconds: float):
    """``(start, stop)``: the rounds whose nominal span overlaps ``[at, at + for)`` seconds."""
    start = math.floor(at_seconds / round_seconds + _SLACK)
    if for_seconds is None:
        return start, FOREVER
    stop = math.ceil((at_seconds + for_seconds) / round_seconds - _SLACK)
    return start, max(stop, start + 1)


def _at_least(minimum: int, maximum: int | None = None):
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"expected an integer >= {minimum}, got {value!r}")
        if maximum is not None and value > maximum:
            raise ValueError(f"must be at most {maximum}, got {value!r}")
        return value

    return AfterValidator(check)


def _seconds(positive: bool):
    def check(value: Any) -> float:
        bad = isinstance(value, bool) or not isinstance(value, (int, float))
        if bad or not math.isfinite(value) or value < 0 or (positive and value == 0):
            kind = "a positive" if positive else "a non-negative"
            raise ValueError(f"expected {kind} number of seconds, got {value!r}")
        return float(value)

    return AfterValidator(check)


def _probability(value: Any) -> float:
    bad = isinstance(value, bool) or not isinstance(value, (int, float))
    if bad or not math.isfinite(value) or not 0 <= value <= 1:
        raise ValueError(f"expected a probability in [0, 1], got {value!r}")
    return float(value)


class LinkFaultEntry(BaseModel):
    """One ``{link: ...}`` entry of ``faults``, typed; spans are checked by :func:`_span`."""

    model_config = STRICT
    link: Any = "all"
    rounds: Any = None
    at_round: Annotated[Any, _at_least(0)] = None
    for_rounds: Annotated[Any, _at_least(1)] = None
    at_seconds: Annotated[Any, _seconds(positive=False)] = None
    for_seconds: Annotated[Any, _seconds(positive=True)] = None
    drop: Annotated[Any, AfterValidator(_probability)] = 1.0
    both_ways: Bool | None = None
    seed: Annotated[Any, _at_least(0, 2**63 - 1)] = None  # sent to the nodes as int64


class NodeFaultEntry(BaseModel):
    """One ``{node: ...}`` entry of ``faults``, typed."""

    model_config = STRICT
    node: Any
    kill_at_round: Annotated[Any, _at_least(0)] = None
    kill_at_seconds: Annotated[Any, _seconds(positive=False)] = None
    restart_after_rounds: Annotated[Any, _at_least(1)] = None
    restart_after_seconds: Annotated[Any, _seconds(positive=True)] = None


def _entry(schema: type[BaseModel], item: Mapping[str, Any], where: str, what: str):
    try:
        return schema.model_validate(dict(item))
    except ValidationError as exc:
        error = config_error(exc, where, schema)
        message = str(error).replace("unknown field", f"unknown field for {what}", 1)
        raise ConfigError(message) from None


def _need_round_seconds(round_seconds: float | None, where: str) -> float:
    if round_seconds is None:
        raise ConfigError(
            f"{where}: a time in seconds needs round_seconds (the nominal length of a round) "
            "at the top level of the experiment"
        )
    return round_seconds


def _span(entry: LinkFaultEntry, where: str, rounds: int, round_seconds: float | None):
    """The rounds ``[start, stop)`` a link fault covers."""
    item = entry.model_fields_set
    given: list[str] = [key for key in ("at_round", "at_seconds") if key in item]
    span = entry.rounds
    if isinstance(span, list):
        given.insert(0, "rounds")
    if len(given) > 1:
        raise ConfigError(f"{where}.{given[1]}: give only one of rounds, at_round, at_seconds")
    if "for_rounds" in item and "at_round" not in item:
        raise ConfigError(f"{where}.for_rounds: needs at_round")
    if "for_seconds" in item and "at_seconds" not in item:
        raise ConfigError(f"{where}.for_seconds: needs at_seconds")
    if "rounds" in item and not isinstance(span, list) and "at_round" not in item:
        raise ConfigError(
            f"{where}.rounds: expected [start, stop] (or a count after at_round), got {span!r}"
        )
    if not given:
        return 0, FOREVER
    if given[0] == "rounds":
        start, stop = _window(span, where)
    elif given[0] == "at_round":
        start, stop = _from_round(entry, where)
    else:
        rs = _need_round_seconds(round_seconds, f"{where}.at_seconds")
        start, stop = rounds_covering(entry.at_seconds, entry.for_seconds, rs)
    if start >= rounds:
        raise ConfigError(
            f"{where}.{given[0]}: starts at round {start}, after the last round ({rounds - 1})"
        )
    return start, min(stop, FOREVER)  # the nodes get stop as an int64: FOREVER is the end


def _window(span: list, where: str) -> tuple[int, int]:
    """``rounds: [start, stop]``."""
    if len(span) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in span):
        raise ConfigError(f"{where}.rounds: expected [start, stop], got {span!r}")
    start, stop = span
    if start < 0:
        raise ConfigError(f"{where}.rounds: start must be >= 0, got {start}")
    if stop <= start:
        raise ConfigError(f"{where}.rounds: stop must come after start, got {span!r}")
    return start, stop


def _from_round(entry: LinkFaultEntry, where: str) -> tuple[int, int]:
    """``at_round`` with ``for_rounds`` (or a count in ``rounds``), or to the end."""
    item = entry.model_fields_set
    start = entry.at_round
    if "for_rounds" in item and "rounds" in item:
        raise ConfigError(f"{where}.rounds: give either rounds or for_rounds, not both")
    duration = entry.for_rounds
    if "rounds" in item:
        span = entry.rounds
        if isinstance(span, bool) or not isinstance(span, int) or span < 1:
            raise ConfigError(f"{where}.rounds: expected an integer >= 1, got {span!r}")
        duration = span
    return start, FOREVER if duration is None else start + duration


def _link_fault(
    item: Mapping[str, Any],
    k: int,
    graph: Graph,
    seed: int,
    rounds: int,
    round_seconds: float | None,
    symmetric: bool,
) -> list[tuple[str, LinkFault]]:
    """``symmetric``: whether every edge of ``graph`` has its reverse (asked once for the
    whole list: asked per fault, a list of 10⁵ faults on a large graph took minutes)."""
    where = f"faults[{k}]"
    entry = _entry(LinkFaultEntry, item, where, "a link fault")
    start, stop = _span(entry, where, rounds, round_seconds)
    drop = entry.drop
    both = symmetric if entry.both_ways is None else entry.both_ways
    base = fault_seed(seed, k) if entry.seed is None else entry.seed
    link = entry.link
    if link == "all":
        # Both-way faults share one seed so each undirected link fails as a whole; one-way
        # faults get a seed per sender so the two directions of a link fail independently.
        seeds = [base if both else fault_seed(base, i) for i in range(len(graph.nodes))]
        return [
            (sender, LinkFault("*", start, stop, float(drop), seeds[i]))
            for i, sender in enumerate(graph.nodes)
        ]
    if not isinstance(link, list) or len(link) != 2:
        raise ConfigError(f"{where}.link: expected [sender, receiver] or 'all', got {link!r}")
    for end in link:
        if isinstance(end, bool) or not isinstance(end, (str, int)):
            raise ConfigError(f"{where}.link: expected node ids, got {end!r}")
    sender, receiver = (str(v) for v in link)
    for end in (sender, receiver):
        if end not in graph.nodes:
            raise ConfigError(f"{where}.link: peer {end!r} is not a node")
    if (sender, receiver) not in graph.edges:
        raise ConfigError(f"{where}.link: {sender}→{receiver} is not an edge of the topology")
    out = [(sender, LinkFault(receiver, start, stop, float(drop), base))]
    if both:
        if (receiver, sender) not in graph.edges:
            if "both_ways" in item:
                raise ConfigError(
                    f"{where}.both_ways: {receiver}→{sender} is not an edge of the topology"
                )
        else:
            out.append((receiver, LinkFault(sender, start, stop, float(drop), base)))
    return out


def _node_fault(
    item: Mapping[str, Any],
    k: int,
    nodes: tuple[str, ...],
    rounds: int,
    round_seconds: float | None,
) -> NodeFault:
    where = f"faults[{k}]"
    entry = _entry(NodeFaultEntry, item, where, "a node fault")
    item = {key: getattr(entry, key) for key in entry.model_fields_set}
    node = entry.node
    if isinstance(node, bool) or not isinstance(node, (str, int)) or str(node) not in nodes:
        raise ConfigError(f"{where}.node: {node!r} is not a node")
    when = [key for key in ("kill_at_round", "kill_at_seconds") if key in item]
    if len(when) != 1:
        raise ConfigError(
            f"{where}.kill_at_round: give exactly one of kill_at_round, kill_at_seconds"
        )
    at_seconds = after_seconds = None
    if "restart_after_rounds" in item and "restart_after_seconds" in item:
        raise ConfigError(
            f"{where}.restart_after_seconds: give only one of restart_after_rounds, "
            "restart_after_seconds"
        )
    if when[0] == "kill_at_round":
        at = entry.kill_at_round
        if "restart_after_seconds" in item:
            raise ConfigError(
                f"{where}.restart_after_seconds: with kill_at_round, give restart_after_rounds"
            )
        restart = None
        if "restart_after_rounds" in item:  # long after the run still fits an int64
            restart = min(at + entry.restart_after_rounds, FOREVER - 1)
    else:
        rs = _need_round_seconds(round_seconds, f"{where}.kill_at_seconds")
        at_seconds = entry.kill_at_seconds
        if "restart_after_rounds" in item:
            raise ConfigError(
                f"{where}.restart_after_rounds: with kill_at_seconds, give restart_after_seconds"
            )
        if "restart_after_seconds" in item:
            after_seconds = entry.restart_after_seconds
        at, stop = rounds_covering(at_seconds, after_seconds, rs)
        restart = None if after_seconds is None else min(stop, FOREVER - 1)
    if at >= rounds:
        raise ConfigError(
            f"{where}.{when[0]}: kills at round {at}, after the last round ({rounds - 1})"
        )
    return NodeFault(str(node), at, restart, at_seconds, after_seconds)


def parse_faults(
    raw: Any,
    topology: Topology | Graph,
    *,
    seed: int,
    rounds: int,
    round_seconds: float | None = None,
) -> FaultSchedule:
    """The experiment's ``faults`` list, checked against the topology and the run length."""
    graph = topology.union if isinstance(topology, Topology) else topology
    if raw is None:
        return FaultSchedule()
    if not isinstance(raw, list):
        raise ConfigError("faults: expected a list of faults ({link: ...} or {node: ...})")
    links: list[tuple[str, LinkFault]] = []
    node_faults: list[tuple[int, NodeFault]] = []
    downs: dict[str, list[tuple[int, int, int]]] = {}  # node -> its (start, stop, k), sorted
    symmetric = graph.missing_reverse() is None
    for k, item in enumerate(raw):
        where = f"faults[{k}]"
        if not isinstance(item, Mapping):
            raise ConfigError(f"{where}: expected a mapping such as {{link: [A, B], ...}}")
        if "node" in item and "link" in item:
            raise ConfigError(f"{where}: a fault is on a link or on a node, not both")
        if "node" not in item and "link" not in item and "drop" not in item:
            # Only ``{drop: p}`` is short for ``link: all``: an entry naming nothing (``{}``,
            # ``{rounds: [2, 5]}``, a node fault without its node) cut every link.
            keys = ", ".join(str(key) for key in item) or "nothing"
            raise ConfigError(
                f"{where}: name what fails, link: [A, B], link: all or node: ID (got {keys})"
            )
        if "node" in item:
            fault = _node_fault(item, k, graph.nodes, rounds, round_seconds)
            _refuse_overlap(downs.setdefault(fault.node, []), fault, k, where)
            node_faults.append((k, fault))
        else:
            links.extend(_link_fault(item, k, graph, seed, rounds, round_seconds, symmetric))
    return FaultSchedule(links=tuple(links), nodes=tuple(f for _, f in node_faults))


def _refuse_overlap(spans: list[tuple[int, int, int]], fault: NodeFault, k: int, where: str):
    """Add ``fault``'s down span to its node's ``spans`` (sorted, none overlapping), or
    refuse it if it overlaps one: only its two neighbours in order can (a list of 10⁵ node
    faults was compared pair by pair, 10¹⁰ times)."""
    stop = FOREVER if fault.restart_round is None else fault.restart_round
    at = bisect.bisect_left(spans, (fault.at_round, stop, k))
    for neighbour in spans[max(at - 1, 0) : at + 1]:
        start, end, j = neighbour
        if start < stop and fault.at_round < end:
            raise ConfigError(f"{where}.node: node {fault.node} is already down then (faults[{j}])")
    spans.insert(at, (fault.at_round, stop, k))
