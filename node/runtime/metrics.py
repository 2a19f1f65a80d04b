"""A node's Prometheus endpoint: ``starling node serve --metrics HOST:PORT``.

Nothing here counts: a custom collector reads, at scrape time, the counters the node keeps
anyway — the per-link books (:class:`starling.node.runtime.stats.StatsBook`, also behind
``Status``), the round and checkpoint tallies (:mod:`starling.node.runtime.timing`), the store's
length, the faults applied through Control — so the round loop is no slower with metrics
on than off. Each node has its own :class:`~prometheus_client.CollectorRegistry` (never the
process-global one), so several nodes in one process (tests, benchmarks) do not mix.

Names follow Prometheus conventions: ``starling_`` prefix, ``_total`` counters, seconds and
bytes. Labels: ``node`` (the node's id), ``experiment``, and on link metrics ``peer`` (the
other end) and ``direction`` (``out``: this node → peer, counted by the sender; ``in``:
peer → this node, counted by the receiver). All are bounded: one experiment at a time, one
series per configured neighbour (inbound strangers share ``<other>`` past 256). A new
configuration starts its counters at zero, as a restarted process does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from starling.node.protocol.contract import LinkCounters, NodeState
from starling.node.runtime.timing import TallySnapshot

if TYPE_CHECKING:  # the server imports this module, not the other way round
    from starling.node.runtime.gate import Gate
    from starling.node.runtime.runtime import NodeRuntime

__all__ = ["LINK_COUNTERS", "NodeCollector", "histogram", "node_registry"]

LINK_COUNTERS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    # field: (metric name without _total, help, directions it is counted in)
    "sent": ("starling_link_messages_sent", "Messages handed to the link's stream.", ("out",)),
    "resent": (
        "starling_link_messages_resent",
        "Messages sent again after their stream broke (each counted once in sent).",
        ("out",),
    ),
    "received": (
        "starling_link_messages_received",
        "Messages accepted in time for their round.",
        ("in",),
    ),
    "late": (
        "starling_link_messages_late",
        "Messages that arrived after the receiver closed their round.",
        ("in",),
    ),
    "dropped": (
        "starling_link_messages_dropped",
        "Messages discarded because the peer was unreachable.",
        ("out",),
    ),
    "withheld": (
        "starling_link_messages_withheld",
        "Messages an emulated fault took out (a notice went instead).",
        ("out", "in"),
    ),
    "rejected": ("starling_link_messages_rejected", "Messages that failed validation.", ("in",)),
    "screened": (
        "starling_link_messages_screened",
        "Messages refused for a value beyond the screening bound (also counted rejected).",
        ("in",),
    ),
    "send_errors": (
        "starling_link_send_errors",
        "Streams that broke and messages that could not be sent.",
        ("out",),
    ),
    "overruns": (
        "starling_link_overruns",
        "Rounds in which the peer's latest message was staler than the bound.",
        ("in",),
    ),
    "bytes": ("starling_link_bytes", "Tensor payload bytes over the link.", ("out", "in")),
}


def histogram(name: str, doc: str, labels: dict[str, str], tally: TallySnapshot) -> Metric:
    """A Prometheus histogram from a tally (cumulative buckets, ``+Inf`` last)."""
    family = HistogramMetricFamily(name, doc, labels=list(labels))
    cumulative, buckets = 0, []
    for bound, count in zip((*tally.bounds, float("inf")), tally.counts, strict=True):
        cumulative += count
        buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
    family.add_metric(list(labels.values()), buckets, tally.total)
    return family


class NodeCollector(Collector):
    """Reads one node's runtime at every scrape."""

    def __init__(
        self,
        runtime: NodeRuntime,
        node_id: str,
        gate: Gate | None = None,
        refusals: Callable[[], dict[str, int]] | None = None,
    ) -> None:
        self.runtime = runtime
        self.node_id = node_id
        self.gate = gate
        self.refusals = refusals or dict
        """What the node refused before serving, by "<door>:<reason>" (the server's)."""
        self.open_streams: Callable[[], int] = _none_open
        """Set by the server: inbound peer streams open now."""
        self.serving: Callable[[], dict[str, int]] = dict
        """Set by the server: calls each door serves now (:mod:`~starling.node.runtime.doors`)."""

    def collect(self) -> Iterator[Metric]:
        runtime = self.runtime
        status = runtime.status()
        run = runtime.current_run
        node = status.node_id or self.node_id
        experiment = status.experiment
        base = {"node": node, "experiment": experiment}

        state = GaugeMetricFamily(
            "starling_node_state", "1 for the node's current state.", labels=["node", "state"]
        )
        for each in NodeState:
            state.add_metric([node, each.value], 1.0 if status.state == each else 0.0)
        yield state
        yield _gauge("starling_node_round", "The round the node's loop is in.", base, status.round)
        yield _gauge(
            "starling_samples_stored",
            "Samples in the node's store for this run.",
            base,
            status.samples_stored,
        )
        streams = GaugeMetricFamily(
            "starling_inbound_streams_open", "Inbound peer streams open now.", labels=["node"]
        )
        streams.add_metric([node], float(self.open_streams()))
        yield streams
        doors = GaugeMetricFamily(
            "starling_door_calls_serving",
            "Calls each service's door serves now (its threads held), by door.",
            labels=["node", "door"],
        )
        for door, count in self.serving().items():
            doors.add_metric([node, door], float(count))
        yield doors

        rounds = run.round_times.snapshot() if run is not None else None
        checkpoints = run.checkpoint_times.snapshot() if run is not None else None
        completed = CounterMetricFamily(
            "starling_rounds_completed", "Rounds this process ran to the end.", labels=list(base)
        )
        completed.add_metric(list(base.values()), rounds.count if rounds else 0)
        yield completed
        if rounds is not None and checkpoints is not None:
            yield histogram(
                "starling_round_duration_seconds",
                "Seconds per round: send, gather, step, store.",
                base,
                rounds,
            )
            yield histogram(
                "starling_checkpoint_duration_seconds",
                "Seconds per checkpoint, store sync included.",
                base,
                checkpoints,
            )

        yield from _links(node, experiment, status.outbound, status.inbound)

        faults = CounterMetricFamily(
            "starling_faults_applied",
            "Faults applied through Control, by kind.",
            labels=["node", "experiment", "kind"],
        )
        for kind, count in runtime.faults_applied.snapshot().items():
            faults.add_metric([node, experiment, kind], count)
        yield faults

        refused = CounterMetricFamily(
            "starling_refused_requests",
            "Calls, streams and handshakes refused, by reason (capacity, peer_denied and "
            "control_denied, then <door>:<reason> from the doors and tls:handshake).",
            labels=["node", "reason"],
        )
        refused.add_metric([node, "capacity"], status.refused_streams)
        if self.gate is not None:
            refused.add_metric([node, "peer_denied"], self.gate.denied["peer"])
            refused.add_metric([node, "control_denied"], self.gate.denied["control"])
        for reason, count in self.refusals().items():
            refused.add_metric([node, reason], count)
        yield refused

        program = GaugeMetricFamily(
            "starling_program_metric",
            "The sampler's own figures (e.g. push-sum weight).",
            labels=["node", "experiment", "name"],
        )
        for name, value in sorted(status.program_metrics.items()):
            program.add_metric([node, experiment, name], value)
        yield program


def _none_open() -> int:
    return 0


def _gauge(name: str, doc: str, labels: dict[str, str], value: float) -> Metric:
    family = GaugeMetricFamily(name, doc, labels=list(labels))
    family.add_metric(list(labels.values()), float(value))
    return family


def _links(
    node: str,
    experiment: str,
    outbound: dict[str, LinkCounters],
    inbound: dict[str, LinkCounters],
) -> Iterator[Metric]:
    books = {"out": outbound, "in": inbound}
    names = ["node", "experiment", "peer", "direction"]
    for field, (name, doc, directions) in LINK_COUNTERS.items():
        family = CounterMetricFamily(name, doc, labels=names)
        for direction in directions:
            for peer, counters in books[direction].items():
                family.add_metric([node, experiment, peer, direction], getattr(counters, field))
        yield family
    staleness = GaugeMetricFamily(
        "starling_link_max_staleness_rounds",
        "Largest round gap of a message an asynchronous program used.",
        labels=names,
    )
    for peer, counters in inbound.items():
        staleness.add_metric([node, experiment, peer, "in"], counters.max_staleness)
    yield staleness


def node_registry(collector: NodeCollector) -> CollectorRegistry:
    """A private registry holding only this node's collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry
