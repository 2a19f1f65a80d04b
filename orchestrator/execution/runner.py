"""``starling run``: provision nodes, configure and start them, watch, collect, evaluate.

The run loop polls every node's status, streams new samples from each node's store starting
at the offset it already holds (so a restarted node's samples are picked up where they
left off), carries out node faults — scheduled in the experiment file
(:mod:`starling.orchestrator.execution.node_faults`), or asked for with ``starling nodes
kill|restart`` (:mod:`starling.orchestrator.execution.live_requests`) — and ends when every
node has finished or can no longer make progress. Whatever happens, the final status of every
node (per-link counters and the program's own metrics) is read before the nodes are stopped.

:func:`execute` carries out a :class:`~starling.orchestrator.planning.plan.RunPlan` and returns
what the run gathered, a :class:`RunOutcome`; :func:`run_experiment` hands it to the results
folder (:func:`starling.orchestrator.results.write.close_run`), which evaluates and writes it
with an account of what failed and when.

The jobs live in their own modules: where nodes run is a
:class:`~starling.orchestrator.execution.backends.base.Backend` chosen by ``backend.kind``
(:func:`starling.orchestrator.execution.backends.make_backend`); what is done to a node, and the
node states, is the :class:`~starling.orchestrator.execution.supervisor.Supervisor`; samples are
gathered by the :class:`~starling.orchestrator.execution.collector.Collector`; the story is kept
by the :class:`~starling.orchestrator.results.account.Account`. The orchestrator talks to nodes
only over gRPC.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from starling.node.spec import DataSpec, NodeSpec
from starling.orchestrator.core import phases
from starling.orchestrator.core.interrupts import interrupts_remembered, raise_remembered
from starling.orchestrator.core.progress import Progress
from starling.orchestrator.execution import exporter, live
from starling.orchestrator.execution.access import access_from_section, access_paths
from starling.orchestrator.execution.backends import Backend, make_backend
from starling.orchestrator.execution.client import NodeClient, NodeUnavailable
from starling.orchestrator.execution.collector import Collector, Pull, pull_all
from starling.orchestrator.execution.halt import halt_rounds
from starling.orchestrator.execution.kernel_faults import KernelFaultPlan
from starling.orchestrator.execution.live_requests import Journal, serve_requests
from starling.orchestrator.execution.node_faults import NodeFaultPlan, first_kills
from starling.orchestrator.execution.store_release import release_local_stores
from starling.orchestrator.execution.supervisor import Supervisor
from starling.orchestrator.faults.kernel import kernel_holds
from starling.orchestrator.planning.node_specs import addressed
from starling.orchestrator.planning.plan import RunPlan
from starling.orchestrator.results.account import Account, account_schedule
from starling.orchestrator.results.link_books import link_summary
from starling.orchestrator.results.node_recipes import save_node_data
from starling.orchestrator.results.start_record import START, write_start
from starling.orchestrator.results.write import close_run, run_status

__all__ = ["RunOutcome", "execute", "run_experiment"]

POLL_SECONDS = 0.2
FAST_POLL_SECONDS = 0.02
"""While a kill is due at a round, the victim's status is polled this often."""
INTERRUPT_SECONDS = 30.0
"""After Ctrl-C or SIGTERM, stopping the nodes' rounds (15 s at most,
:mod:`starling.orchestrator.execution.halt`) and collecting what they hold end within this; a
node that has not answered by then is named, and left to ``starling collect``. Before, the
nodes were collected one after another with no overall bound: two unresponsive nodes held the
orchestrator minutes after the Ctrl-C, and no line said which."""
COLLECT_AT_LEAST_SECONDS = 10.0
"""The collection after an interrupt gets this much even if stopping the rounds took longer."""


@dataclass
class RunOutcome:
    """What a networked run gathered: the record the results folder is written from."""

    account: Account
    samples: dict[str, np.ndarray] = field(default_factory=dict)
    """Node -> its collected samples, (rounds, chains, d)."""
    rounds: dict[str, np.ndarray] = field(default_factory=dict)
    """Node -> the round index of each of its samples."""
    link_stats: dict = field(default_factory=dict)
    """Node -> {outbound, inbound}: its link counters over all of its processes."""
    books_cut_short: set[str] = field(default_factory=set)
    """Nodes a process of which died after its last status (its last counts were lost)."""
    program_metrics: dict = field(default_factory=dict)
    refused: dict[str, dict[str, int]] = field(default_factory=dict)
    """Node -> what its last process refused before serving it, by ``<door>:<reason>``."""
    node_data: dict[str, DataSpec] = field(default_factory=dict)
    """What nodes holding their own data (``data.source: node``) reported using."""
    interrupted: bool = False
    interrupted_during: str | None = None
    """The phase of the first Ctrl-C or SIGTERM."""
    stopped_together: list[str] = field(default_factory=list)
    """The nodes whose rounds the interrupt stopped at once: the evaluation takes them over
    the rounds they all recorded
    (:func:`~starling.orchestrator.evaluation.evaluate.common_rounds`)."""
    not_collected: dict = field(default_factory=dict)
    """Nodes whose samples could not be collected, and the line that says so."""
    down_at_end: dict = field(default_factory=dict)
    """Nodes down when the rounds ended that the schedule did not plan to be (a container
    killed by hand, a crash, a node given up on), and the line that says so: the run's
    exit code says it (``cli.run.EXIT_NODE_DOWN``)."""
    status: str = "complete"
    wall_seconds: float = 0.0

    def extra(self, backend: str) -> dict:
        """The run's own keys of ``metrics.json``, beside the evaluation's."""
        outbound = [
            counters
            for books in self.link_stats.values()
            for counters in (books.get("outbound") or {}).values()
        ]
        return {
            "link_stats": self.link_stats,
            "program_metrics": self.program_metrics,
            **({"refused": self.refused} if self.refused else {}),
            "traffic": {
                "seconds": self.wall_seconds,
                "messages": sum(int(c.get("sent", 0)) for c in outbound),
                "bytes": sum(int(c.get("bytes", 0)) for c in outbound),
            },
            "backend": backend,
            "interrupted": self.interrupted,
            **({"interrupted_during": self.interrupted_during} if self.interrupted else {}),
            **({"not_collected": self.not_collected} if self.not_collected else {}),
            **({"down_at_end": self.down_at_end} if self.down_at_end else {}),
            "status": self.status,
        }


def run_experiment(
    plan: RunPlan,
    out_dir: Path,
    say: Callable[[str], None] = print,
    progress: Progress | None = None,
    after_manifest: Callable[[Callable[[], None]], None] | None = None,
) -> dict:
    """Run ``plan`` on the nodes of its backend and write its results folder; returns the
    metrics written to ``out_dir``. ``after_manifest``, if given, is handed the release of
    a complete run's node stores kept on this machine
    (:mod:`starling.orchestrator.execution.store_release`) to call once the folder's final
    manifest is written: until then ``starling collect`` may need them. Without it they are
    released at once (a study's runs). ``progress`` shows start-up steps and rounds
    (:mod:`starling.orchestrator.core.progress`; none by default). SIGTERM is Ctrl-C until the
    results are written, through their evaluation too (before, SIGTERM then killed the
    orchestrator outright: no message, exit -15)."""
    out_dir = Path(out_dir)
    with interrupts_remembered():
        outcome = execute(plan, out_dir, say, progress or Progress())
        metrics = close_run(
            plan.evaluation,
            out_dir,
            outcome.samples,
            outcome.rounds,
            outcome.account,
            link_summary(outcome.link_stats, outcome.books_cut_short),
            f"wall time {outcome.wall_seconds:.1f} s",
            outcome.extra(plan.backend.kind),
            say,
            outcome.node_data,
            outcome.stopped_together,
        )
    if plan.backend.capabilities.local_stores and metrics.get("status") == "complete":
        samples, rounds = outcome.samples, outcome.rounds
        release = lambda: _release(out_dir, samples, rounds, say)  # noqa: E731
        (after_manifest or (lambda now: now()))(release)
    return metrics


def execute(
    plan: RunPlan, out_dir: Path, say: Callable[[str], None], progress: Progress
) -> RunOutcome:
    """Carry ``plan`` out: start its nodes, configure and start them, watch and collect
    until every node has finished (or Ctrl-C), stop them; ``out_dir`` gets what ``starling
    collect`` needs should this process die (``start.json``)."""
    return _Execution(plan, out_dir, say, progress).run()


class _Execution:
    """One run of :func:`execute`, from the backend's start to its stop."""

    def __init__(
        self, plan: RunPlan, out_dir: Path, say: Callable[[str], None], progress: Progress
    ):
        self.plan = plan
        self.out_dir = out_dir
        self.say = say
        self.progress = progress
        self.outcome = RunOutcome(Account(say))
        self.collector = Collector(chains=plan.evaluation.chains, run_rounds=plan.rounds)
        self.supervisor: Supervisor | None = None
        self.kernel: KernelFaultPlan | None = None
        self.record: live.RunRecord | None = None

    def run(self) -> RunOutcome:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        outcome, plan = self.outcome, self.plan
        account_schedule(outcome.account, plan.link_faults, plan.node_faults, plan.rounds)
        phases.enter("starting")
        backend: Backend | None = None
        try:
            with make_backend(plan.backend, self.out_dir / "nodes", plan) as backend:
                self._run_on(backend)
                phases.enter("shutting down")  # leaving the backend stops its nodes
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM outside the rounds: phases.now() says when
            outcome.interrupted_during = outcome.interrupted_during or phases.now()
            outcome.interrupted = True
            after = ", after the collection" if phases.now() == "shutting down" else ""
            outcome.account.plain(f"interrupted by the user {phases.during()}{after}")
            if phases.now() == "shutting down" and backend is not None:
                backend.stop()  # what the interrupt cut short: no node of the run outlives it
        finally:
            if self.record is not None:
                live.withdraw(self.record)
        phases.enter("evaluating")  # the nodes are done with: what they gave is put together
        outcome.samples, outcome.rounds = self.collector.arrays()
        supervisor = self.supervisor
        if supervisor is not None:
            outcome.link_stats = supervisor.link_stats()
            outcome.books_cut_short = set(supervisor.books_cut_short)
            outcome.program_metrics = supervisor.program_metrics()
            outcome.refused = supervisor.refusals()
        outcome.status = _status(plan, outcome.samples, outcome.interrupted, supervisor)
        outcome.wall_seconds = time.monotonic() - started
        return outcome

    def _run_on(self, backend: Backend) -> None:
        """Start the nodes on ``backend``, run them to the end or to an interrupt, collect."""
        plan, account = self.plan, self.outcome.account
        self.progress.step(
            f"starting {len(plan.node_ids)} nodes ({plan.backend.kind} backend): "
            "waiting until each one serves"
        )
        addresses = backend.start(list(plan.node_ids), plan.fixed_addresses)
        self.say(
            f"started {len(addresses)} nodes: "
            + ", ".join(f"{k}@{v}" for k, v in addresses.items())
        )
        specs = addressed(plan.specs, addresses)
        write_start(self.out_dir, plan, specs, addresses, backend.pids(), backend.state_dirs())
        access = access_from_section(plan.backend)  # with a fresh peer secret
        phases.enter("configuring")
        clients = {
            node: NodeClient(address, access=access, node_id=node)
            for node, address in addresses.items()
        }
        journal: Journal | None = None
        try:
            self.outcome.node_data = _configure_and_start(
                plan, specs, clients, account, self.progress
            )
            save_node_data(self.out_dir / START, self.outcome.node_data)  # collect's ground truth
            self.record = live.RunRecord(
                name=plan.name,
                out_dir=str(self.out_dir.resolve()),
                orchestrator_pid=os.getpid(),
                addresses=addresses,
                pids=backend.pids(),
                link_delay_ms=plan.link_delay_ms,
                access=access_paths(plan.backend, access),
            )
            live.publish(self.record)
            journal = Journal(self.record.out_dir, account)
            faults = NodeFaultPlan(plan.node_faults)
            self.kernel = KernelFaultPlan(
                plan.kernel_faults, backend, kernel_holds(plan.kernel_faults, plan.node_faults)
            )
            self.supervisor = Supervisor(
                plan, specs, clients, backend, self.collector, self.record, account, faults
            )
            exporter.attach(self.supervisor.snapshot)  # the --metrics endpoint, if any
            phases.enter("rounds")
            _watch(self.supervisor, faults, journal, self.progress, self.kernel)
            self.outcome.not_collected = _unreached(
                self.supervisor.uncollected, self.out_dir, account
            )
            self.outcome.down_at_end = _down_at_end(self.supervisor.down_unscheduled(), account)
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (Terminated)
            self._collect_after_interrupt(backend, clients)
        finally:
            if journal is not None:
                journal.read()
            for client in clients.values():
                client.close()

    def _collect_after_interrupt(self, backend: Backend, clients: dict[str, NodeClient]) -> None:
        """Stop the nodes' rounds, then collect what they hold, within
        :data:`INTERRUPT_SECONDS`; a node that did not answer is named."""
        outcome, account = self.outcome, self.outcome.account
        outcome.interrupted, outcome.interrupted_during = True, phases.now()
        account.plain(f"interrupted by the user {phases.during()}, after {account.elapsed():.1f} s")
        phases.enter("collecting")
        self.say("interrupted: stopping the nodes' rounds, then collecting what they hold")
        began = time.monotonic()
        if self.supervisor is not None:
            if self.kernel is not None:
                self.kernel.finish(self.supervisor)  # a paused node must answer the collection
            alive = {n: c for n, c in clients.items() if backend.alive(n) is not False}
            halt_rounds(alive, account)  # see starling.orchestrator.execution.halt
            outcome.stopped_together = sorted(alive)
            late = self.supervisor.finish(within=_left(began))
            # A node whose calls failed at once (its connection given up on: a node frozen
            # long enough for the keepalive to end it, a cut network) did not answer either.
            unanswered = set(late) | set(self.supervisor.uncollected)
            late = [node for node in clients if node in unanswered]
        else:
            halt_rounds(clients, account)
            outcome.stopped_together = sorted(clients)
            late = _collect_all(clients, self.collector, account, _left(began))
        outcome.not_collected = _not_collected(
            late, time.monotonic() - began, self.out_dir, account
        )


def _release(out_dir: Path, samples: dict, rounds: dict, say: Callable[[str], None]) -> None:
    _, kept = release_local_stores(out_dir, samples, rounds)
    if kept:
        say(
            f"nodes {', '.join(kept)}: samples/ does not read back equal to what was "
            "collected; their stores are kept in nodes/state/"
        )


def _configure_and_start(
    plan: RunPlan,
    specs: Mapping[str, NodeSpec],
    clients: Mapping[str, NodeClient],
    account: Account,
    progress: Progress,
) -> dict[str, DataSpec]:
    """Configure every node (with its hold before a scheduled kill and the experiment's
    link delay), then start them all; the account's clock starts with them. Returns what
    nodes holding their own data (``data.source: node``) reported using."""
    first_kill = first_kills(plan.node_faults)
    kernel_first = kernel_holds(plan.kernel_faults, plan.node_faults)
    node_data: dict[str, DataSpec] = {}
    for node, client in clients.items():
        progress.step(f"waiting for node {node} at {client.address} to answer its health check")
        client.wait_ready()
        progress.step(f"configuring node {node}")
        # fresh: a node that outlives runs (inventory) holds no state of this run to resume.
        configured = client.configure(specs[node], fresh=True)
        if configured.data is not None:
            node_data[node] = configured.data
        if node in first_kill:
            client.hold(first_kill[node])  # see starling.orchestrator.execution.node_faults
        elif node in kernel_first:
            client.hold(kernel_first[node])  # see starling.orchestrator.faults.kernel
        if plan.link_delay_ms:
            client.set_link("*", delay_ms=plan.link_delay_ms)
    if plan.link_delay_ms:
        account.plain(f"every link delays each message by {plan.link_delay_ms:g} ms (link_delay)")
    for client in clients.values():
        client.start()
    account.restart_clock()  # the account's times count from the start
    return node_data


def _watch(
    supervisor: Supervisor,
    faults: NodeFaultPlan,
    journal: Journal,
    progress: Progress,
    kernel: KernelFaultPlan | None = None,
) -> None:
    """The run loop: poll (victims of a pending kill fast), collect, fire due faults, serve
    live requests, until every node has finished; then collect what is left."""
    total_rounds = supervisor.run.rounds
    last_full = 0.0
    while True:
        raise_remembered()  # a Ctrl-C whose raise Python dropped (interrupts_remembered)
        if serve_requests(supervisor, kernel):
            supervisor.publish()
        journal.read()
        now = time.monotonic()
        victims = faults.victims() | (kernel.subjects() if kernel is not None else set())
        # Paused or disconnected on purpose (kernel faults): not polled until back.
        quiet = supervisor.silenced()
        if now - last_full >= POLL_SECONDS:
            last_full = now
            supervisor.poll([n for n in supervisor.clients if n not in quiet], pull=True)
        elif victims:
            supervisor.poll(sorted(victims - quiet), pull=False)
        rounds = supervisor.rounds()
        faults.fire_due(rounds, supervisor)
        if kernel is not None:
            kernel.fire_due(rounds, supervisor)
        supervisor.give_up_on_silent()
        if supervisor.all_finished():
            if kernel is not None:
                kernel.finish(supervisor)
            break
        if rounds:
            late, withheld = _losses(supervisor.link_stats())
            progress.rounds(rounds, total_rounds, late, withheld)
        time.sleep(FAST_POLL_SECONDS if victims else POLL_SECONDS)
    progress.finished()
    phases.enter("collecting")
    supervisor.finish()


def _losses(link_stats: Mapping[str, Mapping]) -> tuple[int, int]:
    """Messages late (counted by receivers) and withheld (by senders) so far."""
    late = withheld = 0
    for books in link_stats.values():
        late += sum(int(c.get("late", 0)) for c in (books.get("inbound") or {}).values())
        withheld += sum(int(c.get("withheld", 0)) for c in (books.get("outbound") or {}).values())
    return late, withheld


def _left(began: float) -> float:
    """What is left of :data:`INTERRUPT_SECONDS` since ``began`` for the collection."""
    return max(began + INTERRUPT_SECONDS - time.monotonic(), COLLECT_AT_LEAST_SECONDS)


def _collect_all(
    clients: Mapping[str, NodeClient], collector: Collector, account: Account, within: float
) -> list[str]:
    """Every node's samples at once, within ``within`` s; returns the nodes that did not
    answer: late, or unreachable (each of those named in the account with why)."""
    work = {node: _client_pull(client) for node, client in clients.items()}
    outcomes = pull_all(collector, work, within)
    late = []
    for node, outcome in outcomes.items():
        if outcome.late:
            late.append(node)
        elif isinstance(outcome.error, NodeUnavailable):
            account.plain(f"node {node}: samples could not be collected ({outcome.error})")
            late.append(node)
        elif outcome.error is not None:
            raise outcome.error
    return late


def _client_pull(client: NodeClient) -> Callable[[Pull], int]:
    return lambda pull: pull.take(client)


def _not_collected(late: list[str], seconds: float, out_dir: Path, account: Account) -> dict:
    """The nodes that did not answer the collection after an interrupt, each named in the
    account; for ``metrics.json`` and the last line (``cli.exit_code``): their nodes, and the
    line. The run's manifest lets ``starling collect`` recover them."""
    if not late:
        return {}
    for node in late:
        account.plain(_not_collected_line([node], seconds, out_dir))
    _testbed_warning(late, out_dir, account)
    return {
        "nodes": late,
        "within_seconds": round(seconds, 1),
        "line": _not_collected_line(late, seconds, out_dir),
    }


def _unreached(nodes: list[str], out_dir: Path, account: Account) -> dict:
    """Nodes unreachable when the rounds ended (a container killed and not started again):
    what they stored since their last collection is only in their stores, so the manifest
    names them (as after an interrupt) and ``starling collect`` may finish the run once
    they serve again."""
    if not nodes:
        return {}
    who, they = _naming(nodes)
    line = (
        f"not collected: {who} unreachable at the end; once {they} serve again, "
        f"`starling collect {out_dir}` recovers what {they} stored"
    )
    account.plain(line)
    _testbed_warning(nodes, out_dir, account)
    return {"nodes": list(nodes), "line": line}


def _testbed_warning(nodes: list[str], out_dir: Path, account: Account) -> None:
    """On the compose testbed (``STARLING_TESTBED=compose``, set by docker-compose.yml), the
    commands that collect what ``nodes`` hold, and the one that would destroy it: their
    samples are on their volumes only, which ``docker compose down -v`` deletes."""
    if os.environ.get("STARLING_TESTBED") != "compose" or not nodes:
        return
    services = " ".join(f"node-{node}" for node in nodes)
    where = "its volume" if len(nodes) == 1 else "their volumes"
    account.plain(
        f"compose testbed: {_naming(nodes)[0]}: samples on {where} only; collect them with "
        f"`docker compose start {services}` then `docker compose run --rm orchestrator "
        f"starling collect {out_dir}`; `docker compose down -v` before that deletes them"
    )


def _down_at_end(nodes: list[str], account: Account) -> dict:
    """Nodes down at the end that the schedule did not take down: named in the account
    and in ``metrics.json`` (``down_at_end``), for the exit code."""
    if not nodes:
        return {}
    who, _ = _naming(nodes)
    line = f"{who} down at the end, not by the experiment's schedule; the others finished without"
    line += " it" if len(nodes) == 1 else " them"
    account.plain(line)
    return {"nodes": list(nodes), "line": line}


def _naming(nodes: list[str]) -> tuple[str, str]:
    """("node a", "it") or ("nodes a, b", "they"): how a line names ``nodes``."""
    if len(nodes) == 1:
        return f"node {nodes[0]}", "it"
    return f"nodes {', '.join(nodes)}", "they"


def _not_collected_line(nodes: list[str], seconds: float, out_dir: Path) -> str:
    who, they = _naming(nodes)
    return (
        f"not collected: {who} did not answer within {seconds:.0f} s; "
        f"`starling collect {out_dir}` recovers what {they} stored"
    )


def _status(plan: RunPlan, samples: dict, interrupted: bool, supervisor: Supervisor | None) -> str:
    nodes = supervisor.nodes.values() if supervisor is not None else ()
    return run_status(
        plan.rounds,
        samples,
        interrupted,
        failed=any(s.failed_reported for s in nodes),
        incomplete=supervisor is None or any(s.given_up or not s.finished for s in nodes),
        expected=plan.sampling_nodes,
    )
