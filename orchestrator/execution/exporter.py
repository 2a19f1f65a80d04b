"""The orchestrator's Prometheus endpoint: ``starling run --metrics HOST:PORT``.

Like a node's (:mod:`starling.node.runtime.metrics`), a custom collector in a private registry reads
at scrape time what the run keeps anyway — the supervisor's view of every node, the
collector's sample counts, the account's record of faults, as one
:class:`~starling.orchestrator.execution.supervisor.RunSnapshot` — and counts nothing itself.
Served from the start of ``starling run`` to its end; a study's experiments are attached
one after another (the ``experiment`` label says which).

Metrics: ``starling_orchestrator_node_up`` (1 up, 0 while down or given up, per node),
``starling_orchestrator_nodes`` (how many are up, down, finished, failed),
``starling_experiment_rounds`` (the rounds asked for), ``starling_experiment_node_round``
(each node's last reported round), ``starling_experiment_progress_ratio`` (mean over nodes
of round / rounds, 1 when done), ``starling_experiment_samples_collected`` (per node) and
``starling_orchestrator_faults_applied_total`` (by kind: node kills and restarts, live link
changes, kernel faults). The node processes export their own (``--metrics`` in a node's
config; the local backend does not start them with it).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from starling.node.exporter import MetricsServer
    from starling.orchestrator.execution.supervisor import RunSnapshot

__all__ = ["RunMetrics", "attach", "start_run_metrics"]

NODE_FAULT_EVENTS = ("killed", "restarted")
"""Node events of the account that are faults carried out (the others are what followed)."""


class RunMetrics(Collector):
    """What the endpoint shows: the experiment running now, if any, through its
    supervisor's :meth:`~starling.orchestrator.execution.supervisor.Supervisor.snapshot`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snapshot: Callable[[], RunSnapshot] | None = None
        self.server: MetricsServer | None = None

    def attach(self, snapshot: Callable[[], RunSnapshot]) -> None:
        with self._lock:
            self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            read = self._snapshot
        up = GaugeMetricFamily(
            "starling_orchestrator_node_up",
            "1 unless the node stopped answering (down or given up).",
            labels=["experiment", "node"],
        )
        counts = GaugeMetricFamily(
            "starling_orchestrator_nodes", "Nodes by state.", labels=["experiment", "state"]
        )
        rounds = GaugeMetricFamily(
            "starling_experiment_rounds", "Rounds the experiment asks for.", labels=["experiment"]
        )
        node_round = GaugeMetricFamily(
            "starling_experiment_node_round",
            "The round each node last reported.",
            labels=["experiment", "node"],
        )
        progress = GaugeMetricFamily(
            "starling_experiment_progress_ratio",
            "Mean over nodes of round / rounds (1 when done).",
            labels=["experiment"],
        )
        samples = GaugeMetricFamily(
            "starling_experiment_samples_collected",
            "Samples the orchestrator holds, per node.",
            labels=["experiment", "node"],
        )
        faults = CounterMetricFamily(
            "starling_orchestrator_faults_applied",
            "Faults the orchestrator carried out, by kind.",
            labels=["experiment", "kind"],
        )
        if read is not None:
            run = read()
            experiment = run.experiment
            total = max(run.rounds, 1)
            tally = {"up": 0, "down": 0, "finished": 0, "failed": 0}
            fractions = []
            for node in sorted(run.up):
                is_up = run.up[node]
                up.add_metric([experiment, node], 1.0 if is_up else 0.0)
                tally["up" if is_up else "down"] += 1
                tally["finished"] += run.finished[node]
                tally["failed"] += run.failed[node]
                reached = run.reached[node]
                node_round.add_metric([experiment, node], float(reached))
                fractions.append(min(reached / total, 1.0))
                samples.add_metric([experiment, node], float(run.samples[node]))
            for name, count in tally.items():
                counts.add_metric([experiment, name], float(count))
            rounds.add_metric([experiment], float(run.rounds))
            progress.add_metric([experiment], sum(fractions) / max(len(fractions), 1))
            for kind, count in sorted(_faults(run).items()):
                faults.add_metric([experiment, kind], count)
        yield from (up, counts, rounds, node_round, progress, samples, faults)


def _faults(run: RunSnapshot) -> Counter[str]:
    applied: Counter[str] = Counter()
    for event in run.node_events:
        if event.get("event") in NODE_FAULT_EVENTS:
            applied[f"node_{event['event']}"] += 1
    for change in run.live_links:
        applied[f"link_{change.get('action')}"] += 1
    for fault in run.kernel_faults:
        applied[f"kernel_{fault.get('kind')}"] += 1
    return applied


_active: list[RunMetrics] = []
"""The endpoint this process serves, if ``--metrics`` was given (one per process)."""


def start_run_metrics(address: str) -> RunMetrics:
    """Serve an (empty until attached) orchestrator endpoint on ``address``; every
    experiment this process runs from now on attaches to it (:func:`attach`)."""
    from starling.node.exporter import serve_metrics

    metrics = RunMetrics()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    metrics.server = serve_metrics(address, registry)
    _active[:] = [metrics]
    return metrics


def stop_run_metrics() -> None:
    for metrics in _active:
        if metrics.server is not None:
            metrics.server.close()
    _active.clear()


def attach(snapshot: Callable[[], RunSnapshot]) -> None:
    """Show the experiment ``snapshot`` reads on this process's endpoint, if it serves one
    (``snapshot``: its supervisor's
    :meth:`~starling.orchestrator.execution.supervisor.Supervisor.snapshot`)."""
    for metrics in _active:
        metrics.attach(snapshot)
