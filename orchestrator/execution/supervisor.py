"""The node supervisor: every node's condition during a run, and what is done to a node.

It reads statuses (noticing a node that went down, failed or finished), configures a
restarted process again (it resumes from its checkpoint, with its hold and live link state
given back), kills and restarts nodes through the
:class:`~starling.orchestrator.execution.backends.base.Backend`, gives up on a node silent for too
long, and at the end collects what every node holds — a node that is down for good is started again
idle on its state dir and streams its stored run over gRPC (``SamplesRequest.experiment``), so the
orchestrator never opens a node's files. Counters of a node's earlier processes are carried over
(:mod:`starling.orchestrator.results.link_books`), once a process is replaced, never while it is
only unreachable. The scheduled node and kernel faults act on the
nodes through it (it implements :class:`~starling.orchestrator.execution.node_actions.NodeActions`).

Dead is dead: a node is *declared down* when it is killed for good by the schedule, its round
loop failed, someone else stopped it (an outside ``Control.Stop``), or it stayed unreachable past
the grace period (``limits.down_grace``). Every node that waits for its messages — its
out-peers, over all graph periods — is then told through ``Control.SetPeerDown`` and stops
waiting for it at once, instead of waiting a round deadline for it in every round that is left.
When the node is configured again (it was restarted) they are told it is back and wait for it
again. A neighbour that cannot be told at the moment (it is down itself) is told at a later
poll, or given every mark when it is configured again. Each declaration is a node event in the
account (``declared_down``, ``declared_up``, with who was told): :class:`DownNotices`.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from starling.node.params import ConfigError
from starling.node.protocol.contract import NodeState as Lifecycle
from starling.node.spec import NodeSpec
from starling.orchestrator.core.errors import BackendError, MalformedSamples
from starling.orchestrator.execution import live
from starling.orchestrator.execution.backends.base import Backend
from starling.orchestrator.execution.client import NodeClient, NodeStatus, NodeUnavailable
from starling.orchestrator.execution.collector import Collector, Pull, StoredRun, pull_all
from starling.orchestrator.execution.node_actions import RESTART_ERRORS, NodeView
from starling.orchestrator.execution.node_faults import NodeFaultPlan
from starling.orchestrator.execution.snapshot import MAX_THREADS, read_all
from starling.orchestrator.faults.schedule import NodeFault
from starling.orchestrator.planning.plan import RunPlan
from starling.orchestrator.results.account import Account
from starling.orchestrator.results.link_books import add_books, summed_books

__all__ = ["DownNotices", "NodeState", "RunSnapshot", "Supervisor"]

HOLD_POLLS = 200
HOLD_POLL_SECONDS = 0.01
"""A kill by hand waits at most this many polls this far apart for the node to hold."""


@dataclass
class NodeState:
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
    samples_refused: bool = False
    """A sample it streamed broke its rule (:class:`MalformedSamples`): not collected since."""


@dataclass(frozen=True)
class RunSnapshot:
    """The run at one moment, as the orchestrator's metrics endpoint shows it
    (:mod:`starling.orchestrator.execution.exporter`): plain data, read at scrape time."""

    experiment: str
    rounds: int
    up: dict[str, bool]
    """Node -> not down and not given up on, in node order."""
    finished: dict[str, bool]
    failed: dict[str, bool]
    reached: dict[str, int]
    """Node -> the round it last reported (0 before any)."""
    samples: dict[str, int]
    """Node -> samples collected so far."""
    node_events: tuple[dict, ...]
    live_links: tuple[dict, ...]
    kernel_faults: tuple[dict, ...]


class Supervisor:
    """Node states, and the actions on nodes: poll, kill, restart, reconfigure, collect."""

    def __init__(
        self,
        run: RunPlan,
        specs: Mapping[str, NodeSpec],
        clients: dict[str, NodeClient],
        backend: Backend,
        collector: Collector,
        record: live.RunRecord,
        account: Account,
        plan: NodeFaultPlan,
        clock: Callable[[], float] = time.monotonic,
    ):
        """``run``: the run's plan; ``specs``: its node specs with their peers' addresses;
        ``plan``: the scheduled node faults still to come; ``clock`` times how long a node is
        down (its patience, restart texts): a test hands its own."""
        self.run = run
        self.clock = clock
        self.specs = specs
        self.clients = clients
        self.backend = backend
        self.collector = collector
        self.record = record
        self.account = account
        self.plan = plan
        self.nodes = {node: NodeState() for node in clients}
        # A node down for longer than this is given up on; the others finish without it.
        grace = run.down_grace
        self.patience = grace if grace is not None else max(30.0, 10 * run.round_deadline)
        self.notices = DownNotices(self.out_peers, self.in_peers, self.nodes, clients, account)
        self.uncollected: list[str] = []
        """Nodes whose samples could not be collected at the end (their stores keep them)."""
        self.answered_at_end: set[str] = set()
        """Nodes whose process answered the final collection (up at the end, whatever
        happened to them before: a node given up on may come back)."""
        self.books_cut_short: set[str] = set()
        """Nodes a process of which died (or was unreachable at the end) after its last
        status: what it counted after that died with it
        (:func:`starling.orchestrator.results.link_books.link_summary`, ``cut_short``)."""
        self._respawning = threading.Lock()  # the collection's threads restart nodes
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, min(MAX_THREADS, len(clients))), thread_name_prefix="status"
        )

    # ------------------------------------------------------------ reading nodes

    def rounds(self) -> dict[str, int]:
        """Node -> its round, for the nodes up and answering."""
        return {
            node: state.last.round
            for node, state in self.nodes.items()
            if state.last is not None and state.down_since is None
        }

    def node_ids(self) -> list[str]:
        return list(self.clients)

    def view(self, node: str) -> NodeView:
        state = self.nodes[node]
        last = state.last
        return NodeView(
            finished=state.finished,
            round=None if last is None else last.round,
            holding=last is not None and last.holding,
        )

    def out_peers(self, node: str) -> tuple[str, ...]:
        return self.specs[node].out_peers()

    def in_peers(self, node: str) -> tuple[str, ...]:
        return self.specs[node].in_peers()

    def hold(self, node: str, round_index: int | None) -> None:
        self.clients[node].hold(round_index)

    def silenced(self) -> set[str]:
        return self.backend.silenced()

    def snapshot(self) -> RunSnapshot:
        """The run now, for the metrics endpoint."""
        states = self.nodes.items()
        return RunSnapshot(
            experiment=self.run.name,
            rounds=self.run.rounds,
            up={n: s.down_since is None and not s.given_up for n, s in states},
            finished={n: s.finished for n, s in states},
            failed={n: s.failed_reported for n, s in states},
            reached={n: s.last.round if s.last is not None else 0 for n, s in states},
            samples={node: self.collector.offset(node) for node in self.nodes},
            node_events=tuple(self.account.node_events),
            live_links=tuple(self.account.live_links),
            kernel_faults=tuple(self.account.kernel_faults),
        )

    def all_finished(self) -> bool:
        return all(state.finished for state in self.nodes.values())

    def down(self) -> list[str]:
        return sorted(n for n, s in self.nodes.items() if s.down_since is not None)

    def down_unscheduled(self) -> list[str]:
        """Nodes down when the run ends that the experiment's schedule did not take down for
        good: killed by hand and not restarted, died, or unreachable and given up on, and
        not answering the final collection. A node the schedule kills without a restart is
        down by design and not among them; one given up on that came back is up."""
        planned = {f.node for f in self.run.node_faults if f.restart_round is None}
        return [
            node
            for node, state in self.nodes.items()
            if node not in planned
            and node not in self.answered_at_end
            and not state.failed_reported
            and (state.given_up or state.down_since is not None)
        ]

    def poll(self, nodes: list[str], pull: bool) -> None:
        """Read the status of these nodes (unless finished); collect new samples if ``pull``.

        Every node is asked at once (:func:`~starling.orchestrator.execution.snapshot.read_all`),
        so the rounds the metrics endpoint shows are of one moment, not of a walk from the first
        node to the last."""
        self.notices.tell_untold()
        asked = {n: self.clients[n] for n in nodes if not self.nodes[n].finished}
        # One attempt: a dead node must not hold up the loop with retries.
        answers = read_all(asked, lambda client: client.status(attempts=1), self._pool)
        for node in nodes:
            client, state = self.clients[node], self.nodes[node]
            if state.finished or node not in answers:
                continue
            status = answers[node]
            if isinstance(status, NodeUnavailable):
                self._went_down(node)
                continue
            if status.state == Lifecycle.IDLE:
                self._reconfigure(node)
                continue
            if state.down_since is not None:
                state.down_since = None
            state.last = status
            if status.state == Lifecycle.FAILED:
                if not state.failed_reported:
                    state.failed_reported = True
                    self.account.node(
                        node,
                        "failed",
                        f"failed: {status.error}",
                        round=status.round,
                        error=status.error,
                    )
                    self.notices.declare(node, f"failed at round {status.round}")
                state.finished = True
            elif status.state == Lifecycle.STOPPED:
                # This orchestrator never stops a node mid-run: someone else did.
                if not state.finished:
                    self.account.node(
                        node,
                        "stopped",
                        f"stopped at round {status.round} from outside "
                        "(Control.Stop), not by this run",
                        round=status.round,
                    )
                    self.notices.declare(node, f"stopped at round {status.round}")
                state.finished = True
            elif status.state == Lifecycle.DONE:
                state.finished = True
            if (pull or state.finished) and not state.samples_refused:
                try:
                    self.collector.pull(node, client)
                except MalformedSamples as exc:
                    self._refuse_samples(node, exc)
                except NodeUnavailable:
                    self._went_down(node)

    def _refuse_samples(self, node: str, exc: MalformedSamples) -> None:
        """Stop collecting a node whose samples broke their rule (what came before is
        kept); said once in the account, which names the sample."""
        self.nodes[node].samples_refused = True
        self.account.node(node, "samples_refused", f"samples refused from here on: {exc}")

    def _went_down(self, node: str) -> None:
        state = self.nodes[node]
        if state.down_since is None:
            state.down_since = self.clock()
            # Not folded: an unreachable process (paused, cut off) may answer again with
            # the same books; it is carried over only once it is replaced (killed,
            # restarted, or found idle: :meth:`_reconfigure`).
            if state.killed_at is None and not state.awaiting_restart:
                alive = self.backend.alive(node)
                how = "its process exited" if alive is False else "unreachable"
                self.account.node(node, "down", f"went down unasked ({how})")

    def _fold(self, node: str) -> None:
        """Carry the last status's counters over, less what the process held pending
        (:mod:`starling.orchestrator.results.link_books`): the next process starts from zero."""
        state = self.nodes[node]
        self.books_cut_short.add(node)
        if state.last is not None:
            add_books(state.carried, state.last, died=True)
            state.last = None
            try:  # for `starling status`, which reads the nodes, not this process
                event = {"kind": live.CARRIED, "node": node, "books": state.carried}
                live.log_event(self.record.out_dir, event)
            except OSError:
                pass  # the live view only: the run's account keeps the counts

    def _reconfigure(self, node: str) -> None:
        """A fresh process (restarted): give it its spec; it resumes from its checkpoint."""
        state = self.nodes[node]
        client = self.clients[node]
        try:
            configured = client.configure(self.specs[node])
            kill = self.plan.next_kill(node)
            if kill is not None:
                client.hold(kill)
            reapplied = self._reapply_links(node, client)
            self.notices.reapply(node, client)
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
        self.account.node(
            node,
            "resumed",
            text,
            round=configured.next_round,
            resumed=configured.resumed,
            replaced_samples=replaced,
        )
        self.notices.undeclare(node)

    def _reapply_links(self, node: str, client: NodeClient) -> list[str]:
        """A new process starts with every link up and undelayed: give it back the
        experiment's ``link_delay`` and the live changes made to its links so far."""
        if self.run.link_delay_ms:
            client.set_link("*", delay_ms=self.run.link_delay_ms)
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

    def give_up_on_silent(self) -> None:
        for node, state in self.nodes.items():
            if state.finished or state.awaiting_restart or state.down_since is None:
                continue
            if self.clock() - state.down_since > self.patience:
                state.finished = state.given_up = True
                self.account.node(
                    node,
                    "given_up",
                    f"unreachable for {self.patience:g} s, given up; the others finish without it",
                )
                self.notices.declare(node, f"unreachable for {self.patience:g} s")

    # ------------------------------------------------------------ acting on nodes

    def kill(
        self, node: str, why: str, round_seen: int | None = None, fault: NodeFault | None = None
    ) -> None:
        """Crash the node through the backend, after a last look at its counters and round."""
        state = self.nodes[node]
        at_round = round_seen
        if fault is None:
            self._hold_for_kill(node)
        try:
            state.last = self.clients[node].status()
            at_round = state.last.round
        except NodeUnavailable:
            pass
        try:
            self.backend.kill(node)
        except BackendError:
            if fault is None:  # leave the node as it was: running, not held for the kill
                self._release(node)
            raise
        self._fold(node)
        state.down_since = state.killed_at = self.clock()
        state.awaiting_restart = self.plan.restart_pending(node)
        where = f"at round {at_round}" if at_round is not None else "(its round unknown)"
        text = f"killed {where} ({why})"
        if fault is not None and fault.restart_round is None:
            # Down for good by design: nothing to wait for; the others finish without it.
            state.finished = True
            text += "; not restarted, the others finish without it"
        if (
            fault is not None
            and fault.restart_round is not None
            and at_round is not None
            and at_round >= fault.restart_round
        ):
            text += (
                f"; it was already past its scheduled restart round {fault.restart_round}, "
                "so this run's schedule no longer matches simulate's"
            )
        self.account.node(node, "killed", text, round=at_round, why=why)
        if fault is not None and fault.restart_round is None:
            self.notices.declare(node, f"killed at round {at_round}, not restarted")
        self.publish()

    def _release(self, node: str) -> None:
        """Lift a hold :meth:`_hold_for_kill` set, as the schedule's next hold stands
        (none if it has no kill to come); a node that does not answer is left as it is."""
        try:
            self.clients[node].hold(self.plan.next_kill(node))
        except (NodeUnavailable, ConfigError):
            pass

    def _hold_for_kill(self, node: str) -> None:
        """A kill asked for by hand lands between two rounds, as a scheduled one does (the
        node holds before its kill round): the node is told to hold before its next round
        and the kill waits until it does (a few polls; never longer than
        :data:`HOLD_POLLS` of them). Its last status then counts exactly the rounds its
        successor, resuming from that round, will not run again, so no message is counted
        sent twice. A node that does not answer is killed as it is."""
        client = self.clients[node]
        try:
            status = client.status(attempts=1)
            if status.state != Lifecycle.RUNNING:
                return
            client.hold(status.round + 1)
            for _ in range(HOLD_POLLS):
                status = client.status(attempts=1)
                if status.holding or status.state != Lifecycle.RUNNING:
                    return
                time.sleep(HOLD_POLL_SECONDS)
        except (NodeUnavailable, ConfigError):
            return

    def restart(self, node: str, why: str) -> str:
        """Start the node again on its state dir; the next poll configures it. Raises one
        of :data:`RESTART_ERRORS` (and says so in the account) if it does not come back."""
        state = self.nodes[node]
        running_at = None
        if self.backend.alive(node) is not False:  # a restart of a live node is a crash first
            try:
                state.last = self.clients[node].status()
                running_at = state.last.round
            except NodeUnavailable:
                pass
        try:
            address = self._respawn(node)
        except RESTART_ERRORS as exc:
            # Counters stay with the last status: the next poll folds them if the node is
            # down, or reads them afresh if it never went (a backend that cannot restart).
            state.awaiting_restart = False
            if state.down_since is None:
                state.down_since = self.clock()
            self.account.node(node, "restart_failed", f"could not be restarted ({why}): {exc}")
            raise
        self._fold(node)  # the old process is gone: the new one counts from zero
        state.finished = state.given_up = False
        state.awaiting_restart = True  # until it is configured again
        if state.down_since is None:
            state.down_since = self.clock()
        if state.killed_at is not None:
            text = f"restarted after {self.clock() - state.killed_at:.1f} s down ({why})"
        elif running_at is not None:
            text = f"killed at round {running_at} and restarted at once ({why})"
        else:
            text = f"restarted ({why})"
        self.account.node(node, "restarted", text, address=address, why=why, round=running_at)
        self.publish()
        return address

    def _respawn(self, node: str) -> str:
        """A new process of ``node`` on its state dir, answering; returns its address."""
        address = self.backend.restart(node)
        self._connect(node, address)
        return address

    def _connect(self, node: str, address: str) -> None:
        """A client for the new process of ``node`` at ``address``, once it answers."""
        access = self.clients[node].access  # the run's credentials and peer secret
        self.clients[node].close()
        self.clients[node] = NodeClient(address, access=access, node_id=node)
        self.clients[node].wait_ready()

    def publish(self) -> None:
        live.publish(dataclasses.replace(self.record, pids=self.backend.pids()))

    # ------------------------------------------------------------ the end

    def finish(self, within: float | None = None) -> list[str]:
        """Collect the remaining samples and every node's final status (before the nodes
        are stopped: link counters and program metrics die with the processes): every node
        at once (:func:`~starling.orchestrator.execution.collector.pull_all`), so one slow node
        costs its own calls' time, not theirs added up. With ``within`` (seconds, an interrupted
        run) the whole collection ends by then; returns the nodes that had not answered (their store
        keeps what was not collected)."""
        outcomes = pull_all(
            self.collector, {node: self._final(node) for node in self.clients}, within
        )
        late = []
        for node, outcome in outcomes.items():  # in node order: the account reads the same
            if outcome.late:
                late.append(node)
            elif outcome.error is not None:  # a bug, not a node: as it was before
                raise outcome.error
            elif isinstance(outcome.result, NodeStatus):
                self.nodes[node].last = outcome.result
                self.answered_at_end.add(node)
                continue
            elif isinstance(outcome.result, str):  # the node's collection failed
                self.account.plain(outcome.result)
                self.uncollected.append(node)
            elif isinstance(outcome.result, StoredRun):
                self.account.plain(outcome.result.line(self.collector, outcome.got))
            self.books_cut_short.add(node)  # no final status: its books end at the last one
        self._pool.shutdown(wait=False)  # no poll after this
        return late

    def _final(self, node: str) -> Callable[[Pull], object]:
        """What one node's thread does at the end: a live node streams the rest and is
        asked its status (-> the status, or a line, or None); a dead one is started again
        idle on its state dir and streams its stored run (-> :class:`StoredRun`)."""

        def final(pull: Pull) -> object:
            if self.backend.alive(node) is False:
                return self._collect_stored_run(node, pull)
            client = self.clients[node]
            try:
                if not self.nodes[node].samples_refused:
                    pull.take(client)
            except NodeUnavailable as exc:
                return f"node {node}: samples could not be collected ({exc})"
            try:
                return client.status()
            except NodeUnavailable:
                return None  # its counters up to the last look are kept

        return final

    def _collect_stored_run(self, node: str, pull: Pull) -> StoredRun | str | None:
        """What a node that is not coming back stored after the last collection: its
        process is started again, idle, on its state dir, and streams that run's store."""
        spec = self.specs[node]
        try:
            with self._respawning:  # one backend call at a time: backends are not threadsafe
                if pull.dropped:
                    return None  # given up on already: no process is started for nothing
                address = self.backend.restart(node)
            self._connect(node, address)
            pull.take(self.clients[node], (spec.experiment, spec.node_id))
        except RESTART_ERRORS as exc:
            return f"node {node}: its stored samples could not be collected ({exc})"
        return StoredRun(node, pull.offset)

    def link_stats(self) -> dict:
        """Node -> {outbound, inbound}: counters summed over all of the node's processes."""
        return {node: summed_books(s.carried, s.last) for node, s in self.nodes.items()}

    def refusals(self) -> dict[str, dict[str, int]]:
        """Node -> the calls and connections its last process refused before serving them,
        by ``<door>:<reason>`` (a flood, a wrong token, a stranger's stream): the run's own
        record of who knocked, kept in ``metrics.json`` after the nodes are gone."""
        return {
            node: dict(state.last.refused)
            for node, state in self.nodes.items()
            if state.last is not None and state.last.refused
        }

    def program_metrics(self) -> dict:
        return {
            node: dict(state.last.program_metrics)
            for node, state in self.nodes.items()
            if state.last is not None and state.last.program_metrics
        }


class DownNotices:
    """Which nodes are declared down, and which neighbours still have to hear of it."""

    def __init__(
        self,
        out_peers: Callable[[str], tuple[str, ...]],
        in_peers: Callable[[str], tuple[str, ...]],
        nodes: Mapping[str, NodeState],
        clients: Mapping[str, NodeClient],
        account: Account,
    ):
        """``nodes`` and ``clients``: the supervisor's, read as they change."""
        self._out_peers = out_peers
        self._in_peers = in_peers
        self._nodes = nodes
        self._clients = clients
        self._account = account
        self.declared: dict[str, str] = {}
        """Node declared down -> why; its out-peers do not wait for it."""
        self._untold: dict[tuple[str, str], bool] = {}
        """(receiver, node) -> down: a mark the receiver could not be given yet."""

    def declare(self, node: str, why: str) -> None:
        """``node`` is down for good (until configured again): its out-peers stop waiting."""
        if node in self.declared:
            return
        self.declared[node] = why
        told, later = self._tell(node, True)
        text = f"declared down ({why}); "
        if told:
            verb = "waits" if len(told) == 1 else "wait"
            text += f"{', '.join(told)} no longer {verb} for it"
        else:
            text += "nobody waits for it"
        if later:
            text += f"; {', '.join(later)} will be told when they answer"
        self._account.node(node, "declared_down", text, why=why, told=told, untold=later)

    def undeclare(self, node: str) -> None:
        """``node`` is configured again: its out-peers wait for it again."""
        if self.declared.pop(node, None) is None:
            return
        told, later = self._tell(node, False)
        text = f"back up; {', '.join(told + later) or 'nobody'} wait for it again"
        self._account.node(node, "declared_up", text, told=told, untold=later)

    def reapply(self, node: str, client: NodeClient) -> None:
        """A new process of ``node`` waits for every in-peer: give it back the marks of
        those declared down (before it starts). Raises NodeUnavailable like any call."""
        for key in [k for k in self._untold if k[0] == node]:
            del self._untold[key]
        for peer in self._in_peers(node):
            if peer in self.declared:
                client.set_peer_down(peer, True)

    def tell_untold(self) -> None:
        """Give the marks that could not be given before to receivers that now answer."""
        nodes = self._nodes
        for (peer, node), down in list(self._untold.items()):
            if nodes[peer].finished or nodes[peer].down_since is not None:
                continue  # given with the rest when it is configured again, if it is
            try:
                self._clients[peer].set_peer_down(node, down)
            except (NodeUnavailable, ConfigError):
                continue
            del self._untold[(peer, node)]

    def _tell(self, node: str, down: bool) -> tuple[list[str], list[str]]:
        """Mark ``node`` down (or up) on each of its out-peers that still runs; returns
        those told and those to be told later (unreachable now)."""
        told, later = [], []
        for peer in self._out_peers(node):
            if self._nodes[peer].finished or peer in self.declared:
                self._untold.pop((peer, node), None)
                continue
            try:
                self._clients[peer].set_peer_down(node, down)
            except (NodeUnavailable, ConfigError):
                self._untold[(peer, node)] = down
                later.append(peer)
                continue
            self._untold.pop((peer, node), None)
            told.append(peer)
        return told, later
