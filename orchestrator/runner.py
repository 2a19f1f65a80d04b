"""``starling run``: provision nodes, configure and start them, watch, collect, evaluate.

The run loop polls every node's status, streams new samples from each node's store starting
at the offset it already holds (so a restarted node's samples are picked up where they
left off), carries out node faults — scheduled in the experiment file
(:mod:`starling.orchestrator.fault_plan`), or asked for with ``starling nodes kill|restart``
(:mod:`starling.orchestrator.live_requests`) — and ends when every node has finished or can no
longer make progress. Whatever happens, the final status of every node (per-link counters and
the program's own metrics) is read before the nodes are stopped, and what was collected is
written with an account of what failed and when (:func:`starling.orchestrator.results.close_run`).

The jobs live in their own modules: where nodes run is a
:class:`~starling.orchestrator.backends.base.Backend` chosen by ``backend.kind``
(:func:`starling.orchestrator.backends.make_backend`); what is done to a node, and the node states,
is the :class:`~starling.orchestrator.supervisor.Supervisor`; samples are gathered by the
:class:`~starling.orchestrator.collector.Collector`; the story is kept by the
:class:`~starling.orchestrator.account.Account`. The orchestrator talks to nodes only over gRPC.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from starling.node.spec import DataSpec, NodeSpec
from starling.orchestrator import exporter, live, phases
from starling.orchestrator.access import access_from_section, access_paths
from starling.orchestrator.account import Account, account_schedule
from starling.orchestrator.backends import make_backend
from starling.orchestrator.client import NodeClient, NodeUnavailable
from starling.orchestrator.collector import Collector, Pull, pull_all
from starling.orchestrator.experiment import Experiment
from starling.orchestrator.fault_plan import NodeFaultPlan, first_kills
from starling.orchestrator.halt import halt_rounds
from starling.orchestrator.interrupts import sigterm_interrupts
from starling.orchestrator.kernel_faults import KernelFaultPlan, kernel_holds
from starling.orchestrator.live_requests import Journal, serve_requests
from starling.orchestrator.node_recipes import save_node_data
from starling.orchestrator.node_specs import node_specs
from starling.orchestrator.progress import Progress
from starling.orchestrator.recovery import START, write_start
from starling.orchestrator.results import close_run, link_summary, run_status
from starling.orchestrator.store_release import release_local_stores
from starling.orchestrator.supervisor import Supervisor, backend_pids

__all__ = ["run_experiment"]

POLL_SECONDS = 0.2
FAST_POLL_SECONDS = 0.02
"""While a kill is due at a round, the victim's status is polled this often."""
INTERRUPT_SECONDS = 30.0
"""After Ctrl-C or SIGTERM, stopping the nodes' rounds (15 s at most,
:mod:`starling.orchestrator.halt`) and collecting what they hold end within this; a node that
has not answered by then is named, and left to ``starling collect``. Before, the nodes were
collected one after another with no overall bound: two unresponsive nodes held the
orchestrator minutes after the Ctrl-C, and no line said which."""
COLLECT_AT_LEAST_SECONDS = 10.0
"""The collection after an interrupt gets this much even if stopping the rounds took longer."""


def run_experiment(
    experiment: Experiment,
    out_dir: Path,
    say: Callable[[str], None] = print,
    progress: Progress | None = None,
    after_manifest: Callable[[Callable[[], None]], None] | None = None,
) -> dict:
    """Run ``experiment`` on the nodes of its backend; returns the metrics written to
    ``out_dir``. ``after_manifest``, if given, is handed the release of a complete local
    run's node stores (:mod:`starling.orchestrator.store_release`) to call once the folder's
    final manifest is written: until then ``starling collect`` may need them. Without it
    they are released at once (a study's runs). ``progress`` shows start-up steps and rounds
    (:mod:`starling.orchestrator.progress`; none by default). SIGTERM is Ctrl-C until the
    results are written, through their evaluation too (before, SIGTERM then killed the
    orchestrator outright: no message, exit -15)."""
    with sigterm_interrupts():
        return _run(experiment, Path(out_dir), say, progress or Progress(), after_manifest)


def _run(
    experiment: Experiment,
    out_dir: Path,
    say: Callable[[str], None],
    progress: Progress,
    after_manifest: Callable | None = None,
) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    wall_started = time.monotonic()
    account = Account(say)
    account_schedule(account, experiment)
    interrupted = False
    interrupted_during: str | None = None  # the phase of the first interrupt
    not_collected: dict = {}  # nodes that did not answer the collection after an interrupt
    phases.enter("starting")
    collector = Collector()
    supervisor: Supervisor | None = None
    record = None
    node_data: dict[str, DataSpec] = {}
    backend = None
    try:
        with make_backend(experiment, out_dir / "nodes") as backend:
            fixed = {n.id: n.address for n in experiment.nodes if n.address}
            progress.step(
                f"starting {len(experiment.node_ids)} nodes ({experiment.backend.kind} backend): "
                "waiting until each one serves"
            )
            addresses = backend.start(list(experiment.node_ids), fixed)
            say(
                f"started {len(addresses)} nodes: "
                + ", ".join(f"{k}@{v}" for k, v in addresses.items())
            )
            specs = {s.node_id: s for s in node_specs(experiment, addresses)}
            write_start(out_dir, experiment, specs, backend)  # what `starling collect` reads
            access = access_from_section(experiment.backend)  # with a fresh peer secret
            phases.enter("configuring")
            clients = {
                node: NodeClient(address, access=access, node_id=node)
                for node, address in addresses.items()
            }
            journal: Journal | None = None
            try:
                node_data = _configure_and_start(experiment, specs, clients, account, progress)
                save_node_data(out_dir / START, node_data)  # collect's ground truth, too
                record = live.RunRecord(
                    name=experiment.name,
                    out_dir=str(out_dir.resolve()),
                    orchestrator_pid=os.getpid(),
                    addresses=addresses,
                    pids=backend_pids(backend),
                    link_delay_ms=experiment.link_delay_ms,
                    access=access_paths(experiment.backend, access),
                )
                live.publish(record)
                journal = Journal(record.out_dir, account)
                plan = NodeFaultPlan(experiment)
                kernel = KernelFaultPlan(
                    experiment.kernel_faults, backend, kernel_holds(experiment)
                )
                supervisor = Supervisor(
                    experiment, specs, clients, backend, collector, record, account, plan
                )
                exporter.attach(supervisor)  # the --metrics endpoint, if any
                phases.enter("rounds")
                _watch(supervisor, plan, journal, progress, kernel)
                not_collected = _unreached(supervisor.uncollected, out_dir, account)
            except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (Terminated)
                interrupted, interrupted_during = True, phases.now()
                account.plain(
                    f"interrupted by the user {phases.during()}, after {account.elapsed():.1f} s"
                )
                phases.enter("collecting")
                say("interrupted: stopping the nodes' rounds, then collecting what they hold")
                began = time.monotonic()
                if supervisor is not None:
                    kernel.finish(supervisor)  # a paused node must answer the collection
                    alive = {n: c for n, c in clients.items() if backend.alive(n) is not False}
                    halt_rounds(alive, account)  # see starling.orchestrator.halt
                    late = supervisor.finish(within=_left(began))
                else:
                    halt_rounds(clients, account)
                    late = _collect_all(clients, collector, account, _left(began))
                not_collected = _not_collected(late, time.monotonic() - began, out_dir, account)
            finally:
                if journal is not None:
                    journal.read()
                for client in clients.values():
                    client.close()
            phases.enter("shutting down")  # leaving the backend stops its nodes
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM outside the rounds: phases.now() says when
        interrupted_during = interrupted_during or phases.now()
        interrupted = True
        if phases.now() == "shutting down":
            account.plain(f"interrupted by the user {phases.during()}, after the collection")
        else:
            account.plain(f"interrupted by the user {phases.during()}")
        if phases.now() == "shutting down" and backend is not None:
            backend.stop()  # what the interrupt cut short: no node of the run outlives it
    finally:
        if record is not None:
            live.withdraw(record)
    phases.enter("evaluating")  # the nodes are done with: what they gave is put together
    samples, rounds = collector.arrays()
    link_stats = supervisor.link_stats() if supervisor is not None else {}
    metrics = close_run(
        experiment,
        out_dir,
        samples,
        rounds,
        account,
        link_summary(link_stats),
        f"wall time {time.monotonic() - wall_started:.1f} s",
        {
            "link_stats": link_stats,
            "program_metrics": supervisor.program_metrics() if supervisor is not None else {},
            "backend": experiment.backend.kind,
            "interrupted": interrupted,
            **({"interrupted_during": interrupted_during} if interrupted else {}),
            **({"not_collected": not_collected} if not_collected else {}),
            "status": _status(experiment, samples, interrupted, supervisor),
        },
        say,
        node_data,
    )
    if experiment.backend.kind == "local" and metrics.get("status") == "complete":
        release = lambda: _release(out_dir, samples, rounds, say)  # noqa: E731
        (after_manifest or (lambda now: now()))(release)
    return metrics


def _release(out_dir: Path, samples: dict, rounds: dict, say: Callable[[str], None]) -> None:
    _, kept = release_local_stores(out_dir, samples, rounds)
    if kept:
        say(
            f"nodes {', '.join(kept)}: samples/ does not read back equal to what was "
            "collected; their stores are kept in nodes/state/"
        )


def _configure_and_start(
    experiment: Experiment,
    specs: Mapping[str, NodeSpec],
    clients: Mapping[str, NodeClient],
    account: Account,
    progress: Progress,
) -> dict[str, DataSpec]:
    """Configure every node (with its hold before a scheduled kill and the experiment's
    link delay), then start them all; the account's clock starts with them. Returns what
    nodes holding their own data (``data.source: node``) reported using."""
    first_kill = first_kills(experiment)
    kernel_first = kernel_holds(experiment)
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
            client.hold(first_kill[node])  # see starling.orchestrator.fault_plan
        elif node in kernel_first:
            client.hold(kernel_first[node])  # see starling.orchestrator.kernel_faults
        if experiment.link_delay_ms:
            client.set_link("*", delay_ms=experiment.link_delay_ms)
    if experiment.link_delay_ms:
        account.plain(
            f"every link delays each message by {experiment.link_delay_ms:g} ms (link_delay)"
        )
    for client in clients.values():
        client.start()
    account.restart_clock()  # the account's times count from the start
    return node_data


def _watch(
    supervisor: Supervisor,
    plan: NodeFaultPlan,
    journal: Journal,
    progress: Progress,
    kernel: KernelFaultPlan | None = None,
) -> None:
    """The run loop: poll (victims of a pending kill fast), collect, fire due faults, serve
    live requests, until every node has finished; then collect what is left."""
    total_rounds = supervisor.experiment.rounds
    last_full = 0.0
    while True:
        if serve_requests(supervisor, kernel):
            supervisor.publish()
        journal.read()
        now = time.monotonic()
        victims = plan.victims() | (kernel.subjects() if kernel is not None else set())
        # Paused or disconnected on purpose (kernel faults): not polled until back.
        quiet: set[str] = getattr(supervisor.backend, "silenced", set())
        if now - last_full >= POLL_SECONDS:
            last_full = now
            supervisor.poll([n for n in supervisor.clients if n not in quiet], pull=True)
        elif victims:
            supervisor.poll(sorted(victims - quiet), pull=False)
        rounds = supervisor.rounds()
        plan.fire_due(rounds, supervisor)
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
    """Every node's samples at once, within ``within`` s; returns the nodes that were late."""
    work = {node: _client_pull(client) for node, client in clients.items()}
    outcomes = pull_all(collector, work, within)
    late = []
    for node, outcome in outcomes.items():
        if outcome.late:
            late.append(node)
        elif isinstance(outcome.error, NodeUnavailable):
            account.plain(f"node {node}: samples could not be collected ({outcome.error})")
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


def _status(
    experiment: Experiment, samples: dict, interrupted: bool, supervisor: Supervisor | None
) -> str:
    nodes = supervisor.nodes.values() if supervisor is not None else ()
    return run_status(
        experiment.rounds,
        samples,
        interrupted,
        failed=any(s.failed_reported for s in nodes),
        incomplete=supervisor is None or any(s.given_up or not s.finished for s in nodes),
        expected=experiment.sampling_nodes(),
    )
