"""``starling run``: provision nodes, configure and start them, watch, collect, evaluate.

The loop polls every node's status, streams new samples from each node's store starting
at the offset it already holds (so a restarted node's samples are picked up where they
left off), carries out node faults — scheduled in the experiment file, or asked for with
``starling nodes kill|restart`` — and ends when every node has finished or can no longer
make progress. Whatever happens, the final status of every node (per-link counters and
the program's own metrics) is read before the node processes are stopped, and what was
collected is written with an account of what failed and when.

Scheduled node faults: a kill "at round r" fires when the victim itself reaches round r
(its status is polled quickly while such a kill is pending), a restart "at round s" when
every other running node has reached s (or when all of them have finished); a node killed
without a restart is not waited for. Both
engines also apply the fault as a schedule — the node is cut off from its peers for rounds
``[r, s)`` (:func:`orchestrator.experiment.isolation_faults`) — so what the node hears does
not depend on how fast the orchestrator's poll is; the account says at which round each
kill actually landed.

Collection after a restart: a node resumes from its last checkpoint and truncates its
store to the samples that checkpoint counts. If the collector already held samples past
that point (a SIGKILL between a sample and its checkpoint), they are replaced by the ones
the node re-computes, so the collected chain is always the node's durable one: every round
exactly once, with no gap.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from node.params import ConfigError
from node.spec import NodeSpec
from orchestrator import live
from orchestrator.backends.local import LocalBackend
from orchestrator.client import LinkStats, NodeClient, NodeStatus, NodeUnavailable
from orchestrator.evaluation import evaluate
from orchestrator.experiment import Experiment, node_specs
from orchestrator.faults import NodeFault, describe_link_faults, describe_node_faults
from orchestrator.results import link_account, link_summary, summary_table, write_results

__all__ = ["Account", "Collector", "run_experiment", "simulate_experiment"]

POLL_SECONDS = 0.2
FAST_POLL_SECONDS = 0.02
"""While a kill is due at a round, the victim's status is polled this often."""


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

    def truncate(self, node: str, count: int) -> int:
        """Keep the first ``count`` samples of ``node``; returns how many were let go."""
        extra = max(self.offset(node) - count, 0)
        if extra:
            del self.rounds[node][count:]
            del self.values[node][count:]
        return extra

    def arrays(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        samples = {n: np.stack(v) for n, v in self.values.items() if v}
        rounds = {n: np.asarray(self.rounds[n]) for n in samples}
        return samples, rounds


class Account:
    """What happened during a run: sentences for people, records for ``metrics.json``."""

    def __init__(self, say: Callable[[str], None]):
        self.started = time.monotonic()
        self.started_wall = time.time()
        self.lines: list[str] = []
        self.scheduled_links: list[dict] = []
        self.scheduled_nodes: list[dict] = []
        self.live_links: list[dict] = []
        self.node_events: list[dict] = []
        self._say = say

    def restart_clock(self) -> None:
        self.started = time.monotonic()
        self.started_wall = time.time()

    def elapsed(self, wall: float | None = None) -> float:
        if wall is not None:
            return wall - self.started_wall
        return time.monotonic() - self.started

    def plain(self, text: str) -> None:
        self.lines.append(text)

    def node(self, node: str, event: str, text: str, echo: bool = True, **fields) -> None:
        """A node event (killed, restarted, resumed, failed, given_up), stamped."""
        elapsed = self.elapsed()
        stamp = time.strftime("%H:%M:%S")
        self.node_events.append(
            {"node": node, "event": event, "clock": stamp, "elapsed": round(elapsed, 2),
             **fields}
        )  # fmt: skip
        self.lines.append(f"{stamp} (+{elapsed:.1f} s) node {node}: {text}")
        if echo:
            self._say(f"node {node}: {text}")

    def live_link(self, event: dict) -> None:
        """A link change made with ``starling links``, from the run's journal."""
        wall = float(event.get("time", time.time()))
        elapsed = self.elapsed(wall)
        stamp = time.strftime("%H:%M:%S", time.localtime(wall))
        record = {
            "clock": stamp,
            "elapsed": round(elapsed, 2),
            "who": event.get("who", "?"),
            "action": event.get("action"),
            "sender": event.get("sender"),
            "receiver": event.get("receiver"),
            "up": event.get("up"),
            "drop": event.get("drop"),
            "delay_ms": event.get("delay_ms"),
            "sender_round": event.get("round"),
        }
        self.live_links.append(record)
        what = _live_change_text(record)
        at = f" at its round {record['sender_round']}" if record["sender_round"] is not None else ""
        self.lines.append(
            f"{stamp} (+{elapsed:.1f} s) live: link {record['sender']}→{record['receiver']} "
            f"{what}{at}, by {record['who']}"
        )
        self._say(f"live: link {record['sender']}→{record['receiver']} {what}")

    def section(self) -> dict:
        return {
            "scheduled_links": self.scheduled_links,
            "scheduled_nodes": self.scheduled_nodes,
            "live_links": self.live_links,
            "nodes": self.node_events,
        }


def _live_change_text(record: dict) -> str:
    if record["action"] == "cut":
        return "cut"
    if record["action"] == "restore":
        return "restored"
    parts = []
    if record.get("drop") is not None:
        parts.append(f"drop {record['drop']:g}")
    if record.get("delay_ms") is not None:
        parts.append(f"delay {record['delay_ms']:g} ms")
    return "set " + ", ".join(parts)


class _Interrupted(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C is: stop the nodes, keep what was collected."""


def _raise_interrupt(signum, frame):  # pragma: no cover - signal path
    raise _Interrupted()


def run_experiment(
    experiment: Experiment, out_dir: Path, say: Callable[[str], None] = print
) -> dict:
    """Run ``experiment`` on local node processes; returns the metrics written to ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _clear_previous_run(out_dir)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    wall_started = time.monotonic()
    account = Account(say)
    _account_schedule(account, experiment)
    interrupted = False
    collector = Collector()
    watch: _Watch | None = None
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
                first_kill = _first_kills(experiment)
                for node, client in clients.items():
                    client.wait_ready()
                    client.configure(specs[node])
                    if node in first_kill:
                        client.hold(first_kill[node])  # see _Watch._due_faults
                    if experiment.link_delay_ms:
                        client.set_link("*", delay_ms=experiment.link_delay_ms)
                if experiment.link_delay_ms:
                    account.plain(f"every link delays each message by "
                                  f"{experiment.link_delay_ms:g} ms (link_delay)")  # fmt: skip
                for client in clients.values():
                    client.start()
                account.restart_clock()  # the account's times count from the start
                record = live.RunRecord(
                    name=experiment.name,
                    out_dir=str(out_dir.resolve()),
                    orchestrator_pid=os.getpid(),
                    addresses=addresses,
                    pids=backend.pids(),
                    link_delay_ms=experiment.link_delay_ms,
                )
                live.publish(record)
                watch = _Watch(experiment, specs, clients, backend, collector, record, account,
                               say)  # fmt: skip
                watch.run()
            except (KeyboardInterrupt, _Interrupted):
                interrupted = True
                account.plain(f"interrupted by the user after {account.elapsed():.1f} s")
                say("interrupted: collecting what the nodes hold, then stopping them")
                if watch is not None:
                    watch.finish()
                else:
                    _collect_all(clients, collector, account)
            finally:
                if watch is not None:
                    watch.read_journal()
                for client in clients.values():
                    client.close()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM while the nodes were starting
        interrupted = True
        account.plain("interrupted by the user while the nodes were starting")
    finally:
        signal.signal(signal.SIGTERM, previous)
        if record is not None:
            live.withdraw(record)
    samples, rounds = collector.arrays()
    link_stats = watch.link_stats() if watch is not None else {}
    return _finish(
        experiment, out_dir, samples, rounds, account, link_summary(link_stats),
        f"wall time {time.monotonic() - wall_started:.1f} s",
        {
            "link_stats": link_stats,
            "program_metrics": watch.program_metrics() if watch is not None else {},
            "backend": "local",
            "interrupted": interrupted,
        },
        say,
    )  # fmt: skip


def _finish(
    experiment: Experiment,
    out_dir: Path,
    samples: dict[str, np.ndarray],
    rounds: dict[str, np.ndarray],
    account: Account,
    links: dict,
    timing: str,
    extra: dict,
    say: Callable[[str], None] | None,
) -> dict:
    """Evaluate, close the account (links, divergence, timing), write the results folder
    and print the summary (unless ``say`` is None); returns the metrics written."""
    evaluation = evaluate(experiment, samples)
    for line in link_account(links):
        account.plain(line)
    _account_divergence(evaluation.metrics, account)
    account.plain(timing)
    extra = {"account": account.lines, "faults": account.section(), "links": links, **extra}
    write_results(out_dir, experiment.source, samples, rounds, evaluation, extra)
    metrics = {**evaluation.metrics, **extra}
    if say is not None:
        say(summary_table(metrics))
        say(f"results written to {out_dir}")
    return metrics


def simulate_experiment(
    experiment: Experiment,
    out_dir: Path,
    say: Callable[[str], None] = print,
    quiet: bool = False,
) -> dict:
    """``starling simulate``: the same programs in-process; the same results folder.

    There is no wire, so the link counters are what the schedule alone does
    (:func:`orchestrator.faults.scheduled_link_counts`) and node faults are their isolation
    schedule: the killed node's rounds go on without its peers, as in ``run``.
    """
    from orchestrator.faults import scheduled_link_counts
    from node.engine.simulate import simulate

    account = Account(say)
    _account_schedule(account, experiment, " (in-process: as its isolation schedule)")
    specs = node_specs(experiment)
    program_metrics: dict[str, dict[str, float]] = {}
    # A diverging sampler overflows on its way out; evaluation reports where it diverged.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        samples = simulate(specs, metrics_out=program_metrics)
    rounds = {node: np.arange(values.shape[0]) for node, values in samples.items()}
    return _finish(
        experiment, out_dir, samples, rounds, account, scheduled_link_counts(specs),
        f"simulated in-process in {account.elapsed():.2f} s",
        {
            "program_metrics": {n: m for n, m in program_metrics.items() if m},
            "backend": "simulate",
        },
        None if quiet else say,
    )  # fmt: skip


def _clear_previous_run(out_dir: Path) -> None:
    """A run into a results folder used before starts afresh: the nodes' state dirs would
    otherwise resume the old run from its checkpoints (a checkpoint ignores the fault
    schedule and the round count by design), and old sample files and live changes would
    mix with the new ones."""
    for folder in (out_dir / "nodes" / "state", out_dir / "samples", out_dir / "requests"):
        shutil.rmtree(folder, ignore_errors=True)
    (out_dir / live.JOURNAL).unlink(missing_ok=True)


def _account_schedule(account: Account, experiment: Experiment, node_note: str = "") -> None:
    """Open the account with the experiment's scheduled link and node faults."""
    for record, text in describe_link_faults(experiment.faults, experiment.rounds):
        account.scheduled_links.append(record)
        account.plain(text)
    for record, text in describe_node_faults(experiment.node_faults, experiment.rounds):
        account.scheduled_nodes.append(record)
        account.plain(text + node_note)


def _account_divergence(metrics: dict, account: Account) -> None:
    for node, first in (metrics.get("diverged") or {}).items():
        account.plain(f"node {node}: samples diverged (not finite) from round {first}")


def _collect_all(clients: dict[str, NodeClient], collector: Collector, account: Account) -> None:
    for node, client in clients.items():
        try:
            collector.pull(node, client)
        except NodeUnavailable as exc:
            account.plain(f"node {node}: samples could not be collected ({exc})")


def _counters(stats: LinkStats) -> dict:
    return dataclasses.asdict(stats)


def _add_books(total: dict, status: NodeStatus) -> None:
    """Add a status's outbound/inbound counters into ``total`` (counts add, the last error
    and the largest staleness are kept)."""
    for direction in ("outbound", "inbound"):
        book = total.setdefault(direction, {})
        for peer, stats in getattr(status, direction).items():
            mine = book.setdefault(peer, {})
            for key, value in _counters(stats).items():
                if key == "last_error":
                    mine[key] = value or mine.get(key, "")
                elif key == "max_staleness":
                    mine[key] = max(mine.get(key, 0), value)
                else:
                    mine[key] = mine.get(key, 0) + value


@dataclass
class _NodeState:
    last: NodeStatus | None = None
    """The latest status of the current process (counters since its configuration)."""
    carried: dict = field(default_factory=dict)
    """Counters of earlier processes of this node (before a kill or crash)."""
    down_since: float | None = None
    killed_at: float | None = None
    finished: bool = False
    given_up: bool = False
    awaiting_restart: bool = False
    failed_reported: bool = False


def _first_kills(experiment: Experiment) -> dict[str, int]:
    """Node -> the round of its first scheduled kill."""
    first: dict[str, int] = {}
    for fault in experiment.node_faults:
        first[fault.node] = min(first.get(fault.node, fault.at_round), fault.at_round)
    return first


@dataclass
class _Pending:
    action: str  # "kill" or "restart"
    node: str
    at_round: int
    scheduled: str
    """How the file put it, for the account: "round 20" or "6 s"."""
    fault: NodeFault | None = None


class _Watch:
    """The run loop: poll, collect, carry out node faults and requests, keep the account."""

    def __init__(
        self,
        experiment: Experiment,
        specs: dict[str, NodeSpec],
        clients: dict[str, NodeClient],
        backend: LocalBackend,
        collector: Collector,
        record: live.RunRecord,
        account: Account,
        say: Callable[[str], None],
    ):
        self.experiment = experiment
        self.specs = specs
        self.clients = clients
        self.backend = backend
        self.collector = collector
        self.record = record
        self.account = account
        self.say = say
        self.nodes = {node: _NodeState() for node in clients}
        self.journal_offset = 0
        # A node down for longer than this is given up on; the others finish without it.
        self.patience = max(30.0, 10 * experiment.round_deadline)
        self.pending: list[_Pending] = []
        # The round form of every node fault, also of one written in seconds: it is what
        # both engines isolate the node for, so the real kill lands where the schedule says.
        for fault in experiment.node_faults:
            given = f" ({fault.at_seconds:g} s)" if fault.at_seconds is not None else ""
            self.pending.append(_Pending("kill", fault.node, fault.at_round,
                                         f"round {fault.at_round}{given}", fault))
            if fault.restart_round is not None:
                self.pending.append(_Pending("restart", fault.node, fault.restart_round,
                                             f"round {fault.restart_round}", fault))

    # ------------------------------------------------------------ the loop

    def run(self) -> None:
        last_report = last_full = 0.0
        while True:
            if self._serve_requests():
                self._publish()
            self.read_journal()
            now = time.monotonic()
            full = now - last_full >= POLL_SECONDS
            victims = {p.node for p in self.pending if p.action == "kill"}
            if full:
                last_full = now
                self._poll(list(self.clients), pull=True)
            elif victims:
                self._poll(sorted(victims), pull=False)
            rounds = self._rounds()
            self._due_faults(rounds)
            self._give_up_on_silent()
            if all(state.finished for state in self.nodes.values()):
                break
            now = time.monotonic()
            if now - last_report > 2.0 and rounds:
                last_report = now
                down = sorted(n for n, s in self.nodes.items() if s.down_since is not None)
                low, high = min(rounds.values()), max(rounds.values())
                self.say(
                    f"round {low}..{high} of {self.experiment.rounds}"
                    + (f"; down: {down}" if down else "")
                )
            time.sleep(FAST_POLL_SECONDS if victims else POLL_SECONDS)
        self.finish()

    def _rounds(self) -> dict[str, int]:
        """Node -> its round, for the nodes up and answering."""
        return {
            node: state.last.round
            for node, state in self.nodes.items()
            if state.last is not None and state.down_since is None
        }

    def finish(self) -> None:
        """Collect the remaining samples and every node's final status (before the nodes
        are stopped: link counters and program metrics die with the processes)."""
        for node, client in self.clients.items():
            proc = self.backend.nodes.get(node)
            if proc is not None and not proc.alive():
                self._read_dead_store(node)
                continue  # dead: its counters up to the last look were kept
            try:
                self.collector.pull(node, client)
            except NodeUnavailable as exc:
                self.account.plain(f"node {node}: samples could not be collected ({exc})")
            try:
                self.nodes[node].last = client.status()
            except NodeUnavailable:
                pass

    def _read_dead_store(self, node: str) -> None:
        """What a node that is not coming back stored after the last collection."""
        offset = self.collector.offset(node)
        try:
            stored = self.backend.stored_samples(node, offset)
        except (OSError, RuntimeError, ValueError) as exc:
            self.account.plain(f"node {node}: its store could not be read ({exc})")
            return
        for round_index, value in stored:
            self.collector.rounds.setdefault(node, []).append(round_index)
            self.collector.values.setdefault(node, []).append(value)
        last = self.collector.rounds.get(node, [])
        self.account.plain(
            f"node {node}: down at the end; {len(last)} samples (rounds "
            f"{last[0] if last else '-'}..{last[-1] if last else '-'}) collected, "
            f"{len(stored)} of them read from its store on disk"
        )

    def _poll(self, nodes: list[str], pull: bool) -> None:
        """Read the status of these nodes (unless finished); collect new samples if ``pull``."""
        for node in nodes:
            client, state = self.clients[node], self.nodes[node]
            if state.finished:
                continue
            try:
                # One attempt: a dead node must not hold up the loop with retries.
                status = client.status(attempts=1)
            except NodeUnavailable:
                self._went_down(node)
                continue
            if status.state in ("idle", ""):
                self._reconfigure(node)
                continue
            if state.down_since is not None:
                state.down_since = None
            state.last = status
            if status.state == "failed":
                if not state.failed_reported:
                    state.failed_reported = True
                    self.account.node(node, "failed", f"failed: {status.error}",
                                      round=status.round, error=status.error)  # fmt: skip
                state.finished = True
            elif status.state in ("done", "stopped"):
                state.finished = True
            if pull or state.finished:
                try:
                    self.collector.pull(node, client)
                except NodeUnavailable:
                    self._went_down(node)

    def _went_down(self, node: str) -> None:
        state = self.nodes[node]
        if state.down_since is None:
            state.down_since = time.monotonic()
            self._fold(node)
            if state.killed_at is None and not state.awaiting_restart:
                proc = self.backend.nodes.get(node)
                how = "its process exited" if proc is not None and not proc.alive() else (
                    "unreachable"
                )
                self.account.node(node, "down", f"went down unasked ({how})")

    def _fold(self, node: str) -> None:
        """Carry the last status's counters over: the next process starts from zero."""
        state = self.nodes[node]
        if state.last is not None:
            _add_books(state.carried, state.last)
            state.last = None

    def _reconfigure(self, node: str) -> None:
        """A fresh process (restarted): give it its spec; it resumes from its checkpoint."""
        state = self.nodes[node]
        client = self.clients[node]
        try:
            configured = client.configure(self.specs[node])
            kills = [p.at_round for p in self.pending if p.action == "kill" and p.node == node]
            if kills:
                client.hold(min(kills))
            reapplied = self._reapply_links(node, client)
            client.start()
        except NodeUnavailable:
            return  # try again at the next poll
        self._fold(node)
        replaced = self.collector.truncate(node, configured.samples_stored)
        state.down_since = state.killed_at = None
        state.awaiting_restart = False
        if configured.resumed:
            text = f"back, resumed from its checkpoint at round {configured.next_round}"
        else:
            text = "back, with no checkpoint: starting again from round 0"
        if replaced:
            text += (
                f"; {replaced} collected sample(s) past that checkpoint are replaced by "
                "the ones it re-computes"
            )
        if reapplied:
            text += f"; live link state re-applied to {', '.join(reapplied)}"
        self.account.node(node, "resumed", text, round=configured.next_round,
                          resumed=configured.resumed, replaced_samples=replaced)  # fmt: skip

    def _reapply_links(self, node: str, client: NodeClient) -> list[str]:
        """A new process starts with every link up and undelayed: give it back the
        experiment's ``link_delay`` and the live changes made to its links so far."""
        if self.experiment.link_delay_ms:
            client.set_link("*", delay_ms=self.experiment.link_delay_ms)
        events, _ = live.read_events(self.record.out_dir)
        mine = [e for e in events if e.get("kind") == "link" and str(e.get("sender")) == node]
        touched = []
        for event in mine:
            change = {k: event[k] for k in ("up", "drop", "delay_ms") if event.get(k) is not None}
            try:
                client.set_link(str(event.get("receiver")), **change)
            except ConfigError:
                continue
            touched.append(f"{node}->{event.get('receiver')}")
        return sorted(set(touched))

    def _give_up_on_silent(self) -> None:
        for node, state in self.nodes.items():
            if state.finished or state.awaiting_restart or state.down_since is None:
                continue
            if time.monotonic() - state.down_since > self.patience:
                state.finished = state.given_up = True
                self.account.node(
                    node, "given_up",
                    f"unreachable for {self.patience:.0f} s, given up; the others finish "
                    "without it",
                )  # fmt: skip

    # ------------------------------------------------------------ node faults

    def _due_faults(self, rounds: dict[str, int]) -> None:
        for item in list(self.pending):
            if item not in self.pending:
                continue  # dropped with its kill
            state = self.nodes[item.node]
            if item.action == "kill":
                # The node was told to hold before its kill round (Control.Hold), so the
                # crash lands exactly there however slowly this loop polls.
                last = state.last
                due = (
                    last is not None
                    and last.holding
                    and last.round >= item.at_round
                    and self._quiet(item.node, item.at_round, rounds)
                )
                if state.finished:
                    self.pending.remove(item)
                    self._drop_restart(item.node)
                    self.account.node(
                        item.node, "kill_skipped",
                        f"finished before its kill scheduled at {item.scheduled}",
                    )  # fmt: skip
                    continue
                if due:
                    self.pending.remove(item)
                    self._kill(item.node, f"scheduled at {item.scheduled}", rounds.get(item.node),
                               item.fault)  # fmt: skip
                continue
            if any(p.action == "kill" and p.node == item.node for p in self.pending):
                continue  # its kill has not happened yet
            others = [
                r for n, r in rounds.items() if n != item.node and not self.nodes[n].finished
            ]
            alive = [n for n, s in self.nodes.items() if n != item.node and not s.finished]
            # Restart once every other node has reached the kill round. From then on the
            # schedule, not the dead process, keeps the node cut off until its restart
            # round: its neighbours know not to wait for it (NodeSpec.inbound_faults) and it
            # replays its isolated rounds alone from its checkpoint, so it rejoins at exactly
            # the restart round, as in the simulator. Its process has the whole outage plus
            # one round deadline to boot before anyone waits for it.
            kill_round = item.fault.at_round if item.fault is not None else item.at_round
            due = (bool(others) and min(others) >= kill_round) or not alive
            if due:
                self.pending.remove(item)
                try:
                    self._restart(item.node, f"scheduled at {item.scheduled}")
                except (ConfigError, NodeUnavailable):
                    pass  # in the account; the node is given up on after the patience

    def _quiet(self, node: str, at_round: int, rounds: dict[str, int]) -> bool:
        """Whether every live out-peer of ``node`` has moved on to ``at_round``, i.e. holds
        ``node``'s messages of the rounds before its outage. A scheduled kill waits for this
        (at most about a round), so the crash loses only what the schedule withholds —
        not a last message still in flight, which the simulator would have delivered."""
        peers = {p for hood in self.specs[node].schedule for p in hood.out_peers}
        return all(
            rounds.get(peer, at_round) >= at_round
            for peer in peers
            if not self.nodes[peer].finished
        )

    def _drop_restart(self, node: str) -> None:
        self.pending = [p for p in self.pending if not (p.action == "restart" and p.node == node)]

    def _kill(
        self, node: str, why: str, round_seen: int | None = None, fault: NodeFault | None = None
    ) -> None:
        """SIGKILL the node's process, after a last look at its counters and round."""
        state = self.nodes[node]
        at_round = round_seen
        try:
            state.last = self.clients[node].status()
            at_round = state.last.round
        except NodeUnavailable:
            pass
        self._fold(node)
        self.backend.kill(node)
        state.down_since = state.killed_at = time.monotonic()
        restart = any(p.action == "restart" and p.node == node for p in self.pending)
        state.awaiting_restart = restart
        where = f"at round {at_round}" if at_round is not None else "(its round unknown)"
        text = f"killed {where} ({why})"
        if fault is not None and fault.restart_round is None:
            # Down for good by design: nothing to wait for; the others finish without it.
            state.finished = True
            text += "; not restarted, the others finish without it"
        if (
            fault is not None and fault.restart_round is not None
            and at_round is not None and at_round >= fault.restart_round
        ):  # fmt: skip
            text += (
                f"; it was already past its scheduled restart round {fault.restart_round}, "
                "so this run's schedule no longer matches simulate's"
            )
        self.account.node(node, "killed", text, round=at_round, why=why)
        self._publish()

    def _restart(self, node: str, why: str) -> str:
        """Start the node again on its port and state dir; the next poll configures it."""
        state = self.nodes[node]
        running_at = None
        if self.backend.nodes[node].alive():  # a restart of a live node is a crash first
            try:
                state.last = self.clients[node].status()
                running_at = state.last.round
            except NodeUnavailable:
                pass
            self._fold(node)
        try:
            address = self.backend.restart(node)
            self.clients[node].close()
            self.clients[node] = NodeClient(address)
            self.clients[node].wait_ready()
        except (ConfigError, NodeUnavailable) as exc:
            state.awaiting_restart = False
            if state.down_since is None:
                state.down_since = time.monotonic()
            self.account.node(node, "restart_failed", f"could not be restarted ({why}): {exc}")
            raise
        state.finished = state.given_up = False
        state.awaiting_restart = True  # until it is configured again
        if state.down_since is None:
            state.down_since = time.monotonic()
        if state.killed_at is not None:
            text = f"restarted after {time.monotonic() - state.killed_at:.1f} s down ({why})"
        elif running_at is not None:
            text = f"killed at round {running_at} and restarted at once ({why})"
        else:
            text = f"restarted ({why})"
        self.account.node(node, "restarted", text, address=address, why=why,
                          round=running_at)  # fmt: skip
        self._publish()
        return address

    def _publish(self) -> None:
        live.publish(dataclasses.replace(self.record, pids=self.backend.pids()))

    # ------------------------------------------------------------ live requests

    def _serve_requests(self) -> bool:
        """Carry out kill/restart requests from the live CLI; True if any process changed."""
        changed = False
        for answer_path, body in live.take_requests(Path(self.record.out_dir)):
            node, action = body.get("node"), body.get("action")
            who = body.get("who", "someone")
            if node not in self.clients:
                error = f"node {node!r} is not in this run"
                live.answer(answer_path, {"ok": False, "error": error})
                continue
            if action == "kill":
                if not self.backend.nodes[node].alive():
                    live.answer(answer_path, {"ok": False, "error": f"node {node} is not running"})
                    continue
                self._kill(node, f"on request by {who}")
                live.answer(answer_path, {"ok": True, "address": self.backend.nodes[node].address})
                changed = True
            elif action == "restart":
                self._drop_restart(node)  # a manual restart replaces a scheduled one
                try:
                    address = self._restart(node, f"on request by {who}")
                except (ConfigError, NodeUnavailable) as exc:
                    live.answer(answer_path, {"ok": False, "error": str(exc)})
                else:
                    live.answer(answer_path, {"ok": True, "address": address})
                changed = True
            else:
                live.answer(answer_path, {"ok": False, "error": f"unknown action {action!r}"})
        return changed

    def read_journal(self) -> None:
        events, self.journal_offset = live.read_events(self.record.out_dir, self.journal_offset)
        for event in events:
            if event.get("kind") == "link":
                self.account.live_link(event)

    # ------------------------------------------------------------ results

    def link_stats(self) -> dict:
        """Node -> {outbound, inbound}: counters summed over all of the node's processes."""
        out = {}
        for node, state in self.nodes.items():
            total: dict = {}
            for direction, book in state.carried.items():
                total[direction] = {peer: dict(c) for peer, c in book.items()}
            if state.last is not None:
                _add_books(total, state.last)
            out[node] = {
                "outbound": dict(sorted(total.get("outbound", {}).items())),
                "inbound": dict(sorted(total.get("inbound", {}).items())),
            }
        return out

    def program_metrics(self) -> dict:
        return {
            node: dict(state.last.program_metrics)
            for node, state in self.nodes.items()
            if state.last is not None and state.last.program_metrics
        }
