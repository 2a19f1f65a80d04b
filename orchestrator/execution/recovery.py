"""``starling collect RESULTS_DIR``: the results of a run whose orchestrator died.

When its nodes have started, ``starling run`` writes ``start.json`` (which node ran where:
its address, process id, state dir and the (experiment, node id) its store is kept under)
and ``experiment.yaml`` (the experiment as run). If the orchestrator is then killed
outright (``kill -9``, a power cut of the machine it ran on), no ``metrics.json`` or
``samples/`` are written, but every node has its samples in its own store; local nodes stop
when their orchestrator dies.

``collect`` reads those two files, starts every local node again, idle, on its state dir
(as the orchestrator does for a node that is down at the end of a run) and streams each
node's stored samples over gRPC; nodes of an inventory are asked at their address. It then
evaluates what came and writes ``samples/*.npz``, ``metrics.json`` and ``summary.txt`` with
``status: partial``, and the folder's manifest. The orchestrator never opens a node's files.

It also finishes a run that ended but could not collect some nodes: after Ctrl-C or SIGTERM
the collection has a deadline (``runner.INTERRUPT_SECONDS``), and the manifest of such a run
names the nodes that did not answer (``not_collected``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from starling.node.params import ConfigError
from starling.orchestrator.config.backends import BackendSettings
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.config.yaml_files import read_yaml_file
from starling.orchestrator.core.processes import process_alive
from starling.orchestrator.execution.access import access_from_section
from starling.orchestrator.execution.backends import backend_class
from starling.orchestrator.execution.client import NodeClient, NodeUnavailable
from starling.orchestrator.execution.collector import Collector
from starling.orchestrator.execution.live_requests import Journal
from starling.orchestrator.planning.plan import plan_run
from starling.orchestrator.results.account import Account, account_schedule
from starling.orchestrator.results.folder import RUNNING, ResultsFolder
from starling.orchestrator.results.node_recipes import load_node_data
from starling.orchestrator.results.start_record import check_experiment_file, read_start
from starling.orchestrator.results.unwritable import unwritable
from starling.orchestrator.results.write import close_run

__all__ = ["collect_run"]

NODES_STOP_SECONDS = 30.0
"""How long ``collect`` waits for the crashed run's node processes to stop."""


def collect_run(out: Path, say: Callable[[str], None] = print) -> dict:
    """Recover the results of the crashed run in ``out``; returns the metrics written."""
    out = Path(out)
    if not out.is_dir():
        raise ConfigError(f"collect: {out} is not a folder")
    folder, manifest = ResultsFolder.existing(out)
    # An ended run whose manifest names nodes it did not collect left the rest to us.
    if manifest.get("status") != RUNNING and not manifest.get("not_collected"):
        raise ConfigError(
            f"collect: the run in {out} ended ({manifest.get('status')}); its "
            "results are already there"
        )
    _refuse_if_alive(
        manifest.get("pid"),
        "the run writing {folder} (pid {pid}) still runs; "
        "stop it first (Ctrl-C or `kill` keep its results)",
        folder=out,
    )
    start = read_start(out)
    check_experiment_file(out, start)
    plan = plan_run(
        parse_experiment(read_yaml_file(out / "experiment.yaml"), default_name=start["experiment"])
    )
    _same_experiment(out, plan.name, start)
    _wait_stopped(start["nodes"], _live_pids(out))
    account = Account(say)
    account.plain(
        "the orchestrator stopped before writing results; `starling collect` "
        "recovered what the nodes stored"
    )
    # What the run was meant to go through, and the live link changes made during it: the
    # schedule is the experiment's, the changes are in the run's journal. (Node events and
    # link counters lived in the dead orchestrator; they are not recovered.)
    account_schedule(account, plan.link_faults, plan.node_faults, plan.rounds)
    Journal(str(out.resolve()), account).read()
    started = time.monotonic()
    collector = Collector(chains=plan.evaluation.chains, run_rounds=plan.rounds)
    samples, rounds = _gather(out, start, account, plan.backend, collector)
    try:
        metrics = close_run(
            plan.evaluation,
            out,
            samples,
            rounds,
            account,
            {},
            f"collected in {time.monotonic() - started:.1f} s",
            {"backend": start.get("backend"), "recovered": True, "status": "partial"},
            say,
            load_node_data(start),  # data: {source: node}: the nodes' recipes
        )
        folder.end("partial")
    except OSError as exc:  # a full disk, say: one line, and the stores stay for a next try
        raise unwritable(out, exc) or exc from None
    return metrics


def _same_experiment(out: Path, name: str, start: Mapping) -> None:
    """The experiment file, ``start.json`` and the nodes' stores name one experiment: a
    folder whose ``experiment.yaml`` was replaced (copied from another run, edited) had its
    results written under that other experiment's name, scored against its posterior."""
    if name != start["experiment"]:
        raise ConfigError(
            f"collect: {out / 'experiment.yaml'} is experiment {name!r}, but the run in {out} "
            f"was {start['experiment']!r} (start.json); put its own experiment file back"
        )
    for node, entry in start["nodes"].items():
        stored = entry["stored_run"][0]
        if stored != name:
            raise ConfigError(
                f"collect: {out / 'start.json'}: nodes.{node}.stored_run names experiment "
                f"{stored!r}, not {name!r}; the file is damaged"
            )


def _gather(
    out: Path, start: dict, account: Account, settings: BackendSettings, collector: Collector
):
    """Every node's stored samples into ``collector``, over gRPC from a process started again
    on its state dir (a backend that keeps the stores on this machine) or from the node
    where it runs."""
    nodes: dict = start["nodes"]
    access = access_from_section(settings, "backend")  # the run's tls / token_file
    backend = None
    if settings.capabilities.local_stores:
        backend = backend_class(settings.kind).for_collect(settings, out / "nodes")
    try:
        if backend is not None:
            addresses = backend.start(list(nodes))
            for node, state in backend.state_dirs().items():
                recorded = nodes[node].get("state_dir")
                if recorded and (out / recorded).resolve() != state.resolve():
                    raise ConfigError(
                        f"collect: node {node}: its state dir {recorded} is not "
                        f"where the {settings.kind} backend keeps it"
                    )
        else:
            addresses = {node: entry["address"] for node, entry in nodes.items()}
        for node, entry in nodes.items():
            client = NodeClient(addresses[node], access=access, node_id=node)
            try:
                got = collector.pull(node, client, tuple(entry["stored_run"]))
            except NodeUnavailable as exc:
                account.plain(f"node {node}: its stored samples could not be read ({exc})")
                continue
            finally:
                client.close()
            done = collector.rounds.get(node, [])
            span = f"rounds {done[0]}..{done[-1]}" if done else "no rounds"
            account.plain(f"node {node}: {got} stored samples recovered ({span})")
    finally:
        if backend is not None:
            backend.stop()
    return collector.arrays()


def _alive(pid) -> bool:
    """A process other than this one that still runs."""
    return pid != os.getpid() and process_alive(pid)


def _refuse_if_alive(pid, message: str, **names) -> None:
    if _alive(pid):
        raise ConfigError("collect: " + message.format(pid=pid, **names))


def _live_pids(out: Path) -> dict:
    """Node -> process id as last published by the run (a restarted node has a new one)."""
    try:
        return dict(json.loads((out / "run.json").read_text()).get("pids") or {})
    except (OSError, ValueError, AttributeError):
        return {}


def _wait_stopped(nodes: Mapping[str, dict], latest: Mapping[str, int | None]) -> None:
    """Local nodes stop when their orchestrator dies; wait for that before reopening their
    state dirs (two processes must never write one store)."""
    deadline = time.monotonic() + NODES_STOP_SECONDS
    while True:
        running = {
            n: pid for n, e in nodes.items() for pid in {e.get("pid"), latest.get(n)} if _alive(pid)
        }
        if not running:
            return
        if time.monotonic() > deadline:
            which = ", ".join(f"{n} (pid {p})" for n, p in sorted(running.items()))
            raise ConfigError(f"collect: nodes of the run still run: {which}; stop them first")
        time.sleep(0.2)
