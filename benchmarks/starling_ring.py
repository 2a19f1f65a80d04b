"""Starling's side of the ring benchmarks: real node processes of the local backend.

One call starts ``nodes`` nodes with
:class:`~starling.orchestrator.execution.backends.local.LocalBackend` (exactly what ``starling run``
does), configures them for a ring experiment, starts them and polls their status until every node is
done. Each phase is timed on its own, so a figure never mixes them: ``startup_s`` (processes
launched until every node answers its health check), ``configure_s``, ``loop_s`` (Start sent to
every node done: the round loop),
``cpu_s`` (the CPU time every node process used during the loop), ``switches`` (the
context switches of all their threads during the loop: voluntary, involuntary) and, if asked,
``evaluate_s`` (the orchestrator's evaluation of the collected samples, once the nodes have
stopped, as in ``starling run``), with its parts
(:func:`benchmarks.evaluation_parts.timed_evaluation`) and one W2 set timed alone
(``one_set_ms``). Peak RSS is read
from ``/proc`` before the nodes stop, with the private part of the resident set beside it.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

__all__ = ["node_ready_seconds", "ring_experiment", "starling_ring"]

POLL_S = 0.01


def ring_experiment(
    nodes: int,
    rounds: int,
    chains: int,
    dim: int,
    algorithm: str = "d-admms",
    hyperparameters: dict | None = None,
    topology: str = "ring",
    checkpoint_every: int | None = None,
):
    """The quickstart's model (Bayesian linear regression, [000] §6.2) on a ring; the
    experiment file's default ``checkpoint_every`` unless one is given."""
    from starling.orchestrator.config.experiment import parse_experiment

    raw = {
        "name": f"bench-{algorithm}-{nodes}n-{dim}d",
        "algorithm": algorithm,
        "hyperparameters": hyperparameters if hyperparameters is not None else {"rho": 5.0},
        "model": {
            "name": "linear_regression",
            "params": {"dim": dim, "noise_std": 4.0, "prior_var": 10.0},
        },
        "data": {"source": "synthetic", "size": 50, "seed": 1},
        "topology": {"kind": topology, "nodes": nodes},
        "rounds": rounds,
        "chains": chains,
        "seed": 7,
        "round_deadline": 600.0,
    }
    if checkpoint_every is not None:
        raw["checkpoint_every"] = checkpoint_every
    return parse_experiment(raw, default_name=raw["name"])


def _status_mb(pid: int | None, field: str) -> float:
    """:func:`benchmarks.raw_ring.status_kb` of a node process, in MB (0 without a pid)."""
    from benchmarks.raw_ring import status_kb

    return 0.0 if pid is None else status_kb(field, pid) / 1024.0


def _cpu_seconds(pids: list[int | None]) -> float:
    """User plus system CPU time the processes have used so far (all their threads)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def _switches(pids: list[int | None]) -> tuple[int, int]:
    """Context switches (voluntary, involuntary) of the processes' live threads so far."""
    voluntary = involuntary = 0
    for pid in pids:
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                status = (task / "status").read_text()
            except OSError:
                continue  # the thread ended meanwhile
            for line in status.splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    voluntary += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    involuntary += int(line.split()[1])
    return voluntary, involuntary


def starling_ring(experiment, evaluate: bool = False) -> dict:
    """Run ``experiment`` on local node processes; returns the timed phases (see module)."""
    from benchmarks.evaluation_parts import one_set_ms, timed_evaluation
    from starling.orchestrator.execution.backends.local import LocalBackend
    from starling.orchestrator.execution.client import NodeClient
    from starling.orchestrator.execution.collector import Collector
    from starling.orchestrator.planning.node_specs import node_specs
    from starling.orchestrator.planning.plan import plan_run

    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="starling-bench-") as tmp:
        backend = LocalBackend("127.0.0.1", 0, Path(tmp), ready_timeout=600.0)
        with backend:
            began = time.perf_counter()
            addresses = backend.start(list(experiment.node_ids))
            clients = {node: NodeClient(address) for node, address in addresses.items()}
            try:
                for client in clients.values():
                    client.wait_ready(timeout=600.0)
                out["startup_s"] = time.perf_counter() - began
                specs = {s.node_id: s for s in node_specs(experiment, addresses)}
                began = time.perf_counter()
                for node, client in clients.items():
                    client.configure(specs[node], fresh=True)
                out["configure_s"] = time.perf_counter() - began
                pids = list(backend.pids().values())
                cpu_began, switches_began = _cpu_seconds(pids), _switches(pids)
                began = time.perf_counter()
                for client in clients.values():
                    client.start()
                # One node is asked at a time, until it is done: the loop's end is seen
                # within POLL_S, while the nodes answer ~100 status calls a second in all,
                # not 100 each (what a run's progress display asks is 5 a second).
                pending = sorted(clients)
                while pending:
                    node = pending[0]
                    status = clients[node].status()
                    if status.state == "failed":
                        raise RuntimeError(f"node {node} failed: {status.error}")
                    if status.state == "done":
                        pending.pop(0)
                    else:
                        time.sleep(POLL_S)
                out["loop_s"] = time.perf_counter() - began
                out["cpu_s"] = _cpu_seconds(pids) - cpu_began
                out["switches"] = [
                    now - then for now, then in zip(_switches(pids), switches_began, strict=True)
                ]
                rss = [_status_mb(pid, "VmHWM") for pid in pids]
                out["peak_rss_mb_max"] = max(rss)
                out["peak_rss_mb_sum"] = sum(rss)
                out["anon_rss_mb_max"] = max(_status_mb(pid, "RssAnon") for pid in pids)
                if evaluate:
                    collector = Collector()
                    for node, client in clients.items():
                        collector.pull(node, client)
                    samples, _ = collector.arrays()
            finally:
                for client in clients.values():
                    client.close()
        if evaluate:
            # Scored once the backend has stopped the nodes, as `starling run` scores them
            # (execution/runner.py). Scored while they were still up, the same evaluation
            # took a third longer here, most of it the kernel clearing pages that the nodes'
            # freed memory gives back at once (docs/performance.md).
            plan = plan_run(experiment).evaluation
            out.update(timed_evaluation(plan, samples))
            first = samples[sorted(samples)[0]]
            out["one_set_ms"] = one_set_ms(plan, first[-1])
    return out


def node_ready_seconds() -> float:
    """Seconds from launching one node process (the local backend, as ``starling run``) to
    its health check answering: a node's own start-up, imports included."""
    from starling.orchestrator.execution.backends.local import LocalBackend
    from starling.orchestrator.execution.client import NodeClient

    with tempfile.TemporaryDirectory(prefix="starling-bench-") as tmp:
        with LocalBackend("127.0.0.1", 0, Path(tmp), ready_timeout=600.0) as backend:
            began = time.perf_counter()
            address = backend.start(["0"])["0"]
            client = NodeClient(address)
            try:
                client.wait_ready(timeout=600.0)
                return time.perf_counter() - began
            finally:
                client.close()
