"""``starling run``: provision nodes, configure and start them, watch, collect, evaluate.

The loop polls every node's status, streams new samples from each node's store starting
at the offset it already holds (so a restarted node's samples are picked up where they
left off), carries out kill/restart requests from the live CLI, and ends when every node
has finished or can no longer make progress. Whatever happens, the node processes are
stopped and what was collected is written.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from node.spec import NodeSpec
from orchestrator import live
from orchestrator.backends.local import LocalBackend
from orchestrator.client import NodeClient, NodeUnavailable
from orchestrator.evaluation import evaluate
from orchestrator.experiment import Experiment, node_specs
from orchestrator.results import summary_table, write_results

__all__ = ["Collector", "run_experiment"]

POLL_SECONDS = 0.2


@dataclass
class Collector:
    """Samples gathered so far per node, with the offset to resume from."""

    rounds: dict[str, list[int]] = field(default_factory=dict)
    values: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def offset(self, node: str) -> int:
        return len(self.rounds.get(node, []))

    def pull(self, node: str, client: NodeClient) -> int:
        got = 0
        for round_index, value in client.samples(offset=self.offset(node)):
            self.rounds.setdefault(node, []).append(round_index)
            self.values.setdefault(node, []).append(value)
            got += 1
        return got

    def arrays(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        samples = {n: np.stack(v) for n, v in self.values.items() if v}
        rounds = {n: np.asarray(self.rounds[n]) for n in samples}
        return samples, rounds


class _Interrupted(Exception):
    pass


def _raise_interrupt(signum, frame):  # pragma: no cover - signal path
    raise _Interrupted()


def run_experiment(
    experiment: Experiment, out_dir: Path, say: Callable[[str], None] = print
) -> dict:
    """Run ``experiment`` on local node processes; returns the metrics written to ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    account: list[str] = []
    interrupted = False
    collector = Collector()
    started = time.monotonic()
    record = None
    try:
        with LocalBackend(
            experiment.backend.host, experiment.backend.base_port, out_dir / "nodes"
        ) as backend:
            fixed = {n.id: n.address for n in experiment.nodes if n.address}
            addresses = backend.start(list(experiment.node_ids), fixed)
            say(
                f"started {len(addresses)} nodes: "
                + ", ".join(f"{k}@{v}" for k, v in addresses.items())
            )
            specs = {s.node_id: s for s in node_specs(experiment, addresses)}
            clients = {node: NodeClient(address) for node, address in addresses.items()}
            try:
                for node, client in clients.items():
                    client.wait_ready()
                    client.configure(specs[node])
                for client in clients.values():
                    client.start()
                record = live.RunRecord(
                    name=experiment.name,
                    out_dir=str(out_dir.resolve()),
                    orchestrator_pid=os.getpid(),
                    addresses=addresses,
                    pids=backend.pids(),
                )
                live.publish(record)
                _watch(experiment, specs, clients, backend, collector, record, account, say)
            except (KeyboardInterrupt, _Interrupted):
                interrupted = True
                account.append(f"interrupted by the user after {time.monotonic() - started:.1f} s")
                say("interrupted: collecting what the nodes hold, then stopping them")
                _collect_all(clients, collector, account)
            finally:
                for client in clients.values():
                    client.close()
    finally:
        signal.signal(signal.SIGTERM, previous)
        if record is not None:
            live.withdraw(record)
    samples, rounds = collector.arrays()
    evaluation = evaluate(experiment, samples)
    account.append(f"wall time {time.monotonic() - started:.1f} s")
    extra = {"account": account, "backend": "local", "interrupted": interrupted}
    write_results(out_dir, experiment.source, samples, rounds, evaluation, extra)
    metrics = {**evaluation.metrics, **extra}
    say(summary_table(metrics))
    say(f"results written to {out_dir}")
    return metrics


def _collect_all(clients: dict[str, NodeClient], collector: Collector, account: list[str]) -> None:
    for node, client in clients.items():
        try:
            collector.pull(node, client)
        except NodeUnavailable as exc:
            account.append(f"node {node}: samples could not be collected ({exc})")


def _watch(
    experiment: Experiment,
    specs: dict[str, NodeSpec],
    clients: dict[str, NodeClient],
    backend: LocalBackend,
    collector: Collector,
    record: live.RunRecord,
    account: list[str],
    say: Callable[[str], None],
) -> None:
    finished: set[str] = set()
    down: dict[str, float] = {}
    last_report = 0.0
    started = time.monotonic()
    schedule = _NodeFaultSchedule(experiment.node_faults)
    # A node that is down for longer than this is given up on; the others finish without it.
    patience = max(30.0, 10 * experiment.round_deadline)
    while True:
        if _serve_requests(record, backend, clients, account, say):
            live.publish(dataclasses.replace(record, pids=backend.pids()))
        rounds = {}
        for node, client in clients.items():
            if node in finished:
                continue
            try:
                status = client.status()
            except NodeUnavailable:
                down.setdefault(node, time.monotonic())
                continue
            if node in down:
                down.pop(node)
            if status.state in ("idle", ""):
                # A fresh process (restarted): give it its spec; it resumes from its checkpoint.
                client.configure(specs[node])
                client.start()
                account.append(
                    f"node {node}: reconfigured after restart, resumed at its checkpoint"
                )
                continue
            rounds[node] = status.round
            if status.state == "failed":
                account.append(f"node {node}: failed: {status.error}")
                finished.add(node)
            elif status.state in ("done", "stopped"):
                finished.add(node)
            try:
                collector.pull(node, client)
            except NodeUnavailable:
                down.setdefault(node, time.monotonic())
        progress = max(rounds.values(), default=0)
        for action, node in schedule.due(progress, time.monotonic() - started):
            _kill_or_restart(action, node, backend, clients, account, say, "scheduled")
            live.publish(dataclasses.replace(record, pids=backend.pids()))
        for node, since in list(down.items()):
            if time.monotonic() - since > patience and node not in finished:
                account.append(f"node {node}: unreachable for {patience:.0f} s, given up")
                finished.add(node)
        if len(finished) == len(clients):
            break
        now = time.monotonic()
        if now - last_report > 2.0 and rounds:
            last_report = now
            low, high = min(rounds.values()), max(rounds.values())
            say(
                f"round {low}..{high} of {experiment.rounds}"
                + (f"; down: {sorted(down)}" if down else "")
            )
        time.sleep(POLL_SECONDS)
    _collect_all(clients, collector, account)


def _serve_requests(
    record: live.RunRecord,
    backend: LocalBackend,
    clients: dict[str, NodeClient],
    account: list[str],
    say: Callable[[str], None],
) -> bool:
    """Carry out kill/restart requests from the live CLI; True if any process changed."""
    changed = False
    for answer_path, body in live.take_requests(Path(record.out_dir)):
        node, action = body.get("node"), body.get("action")
        if node not in clients:
            live.answer(answer_path, {"ok": False, "error": f"node {node!r} is not in this run"})
            continue
        if action in ("kill", "restart"):
            address = _kill_or_restart(action, node, backend, clients, account, say, "on request")
            live.answer(answer_path, {"ok": True, "address": address})
            changed = True
        else:
            live.answer(answer_path, {"ok": False, "error": f"unknown action {action!r}"})
    return changed


def _kill_or_restart(
    action: str,
    node: str,
    backend: LocalBackend,
    clients: dict[str, NodeClient],
    account: list[str],
    say: Callable[[str], None],
    why: str,
) -> str:
    """SIGKILL a node, or start it again on its port and state dir (it then resumes)."""
    stamp = time.strftime("%H:%M:%S")
    if action == "kill":
        backend.kill(node)
        account.append(f"{stamp} node {node}: killed ({why})")
        say(f"node {node} killed ({why})")
        return backend.nodes[node].address
    address = backend.restart(node)
    clients[node].close()
    clients[node] = NodeClient(address)
    clients[node].wait_ready()
    account.append(f"{stamp} node {node}: restarted ({why}) at {address}")
    say(f"node {node} restarted ({why})")
    return address


class _NodeFaultSchedule:
    """Node faults from the experiment file, due by the network's round or by the clock.

    A fault given in rounds fires when the furthest node reaches that round; one given in
    seconds fires by the run's clock.
    """

    def __init__(self, faults):
        self._pending = []
        for fault in faults:
            if fault.at_seconds is not None:
                self._pending.append(("kill", fault.node, None, fault.at_seconds))
                if fault.restart_after_seconds is not None:
                    at = fault.at_seconds + fault.restart_after_seconds
                    self._pending.append(("restart", fault.node, None, at))
            else:
                self._pending.append(("kill", fault.node, fault.at_round, None))
                if fault.restart_round is not None:
                    self._pending.append(("restart", fault.node, fault.restart_round, None))

    def due(self, progress: int, elapsed: float) -> list[tuple[str, str]]:
        ready = [
            item for item in self._pending
            if (item[2] is not None and progress >= item[2])
            or (item[3] is not None and elapsed >= item[3])
        ]  # fmt: skip
        self._pending = [item for item in self._pending if item not in ready]
        return [(action, node) for action, node, _, _ in ready]
