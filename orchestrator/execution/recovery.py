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
from typing import Any

import yaml

from starling.node.params import ConfigError
from starling.node.spec import NodeSpec
from starling.orchestrator.config.experiment import Experiment, parse_experiment
from starling.orchestrator.config.yaml_files import read_yaml_file
from starling.orchestrator.results.account import Account, account_schedule
from starling.orchestrator.results.folder import RUNNING, ResultsFolder
from starling.orchestrator.results.node_recipes import load_node_data

__all__ = ["START", "collect_run", "write_start"]

START = "start.json"
NODES_STOP_SECONDS = 30.0
"""How long ``collect`` waits for the crashed run's node processes to stop."""


def write_start(
    out_dir: Path, experiment: Experiment, specs: Mapping[str, NodeSpec], backend
) -> None:
    """What ``collect`` needs if this run's orchestrator dies: written once nodes started."""
    out_dir = Path(out_dir)
    processes = getattr(backend, "nodes", {}) if backend.kind == "local" else {}
    pids: dict[str, int | None] = getattr(backend, "pids", lambda: {})()
    nodes = {}
    for node, spec in specs.items():
        process = processes.get(node)
        nodes[node] = {
            "address": backend.addresses().get(node),
            "pid": pids.get(node),
            "state_dir": os.path.relpath(process.state_dir, out_dir) if process else None,
            "stored_run": [spec.experiment, spec.node_id],
        }
    body = {
        "experiment": experiment.name,
        "backend": backend.kind,
        "host": experiment.backend.host,
        "orchestrator_pid": os.getpid(),
        "nodes": nodes,
    }
    (out_dir / "experiment.yaml").write_text(
        yaml.safe_dump(dict(experiment.source), sort_keys=False)
    )
    (out_dir / START).write_text(json.dumps(body, indent=2) + "\n")


def collect_run(out: Path, say: Callable[[str], None] = print) -> dict:
    """Recover the results of the crashed run in ``out``; returns the metrics written."""
    from starling.orchestrator.execution.live_requests import Journal
    from starling.orchestrator.results.unwritable import unwritable
    from starling.orchestrator.results.write import close_run

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
    start = _read_start(out)
    experiment = parse_experiment(
        read_yaml_file(out / "experiment.yaml"), default_name=start["experiment"]
    )
    _wait_stopped(start["nodes"], _live_pids(out))
    account = Account(say)
    account.plain(
        "the orchestrator stopped before writing results; `starling collect` "
        "recovered what the nodes stored"
    )
    # What the run was meant to go through, and the live link changes made during it: the
    # schedule is the experiment's, the changes are in the run's journal. (Node events and
    # link counters lived in the dead orchestrator; they are not recovered.)
    account_schedule(account, experiment)
    Journal(str(out.resolve()), account).read()
    started = time.monotonic()
    samples, rounds = _gather(out, start, account, experiment.backend)
    try:
        metrics = close_run(
            experiment,
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


def _read_start(out: Path) -> dict:
    """``start.json`` as written by :func:`write_start`; anything else is one line naming
    the file and the field."""
    path = out / START
    try:
        start = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"collect: {out} has no {START}: the run stopped before its nodes "
            "started, so nothing was stored"
        ) from None
    except OSError as exc:
        raise ConfigError(f"collect: {path}: unreadable ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ConfigError(f"collect: {path}: unreadable ({exc})") from None

    def damaged(field: str, expected: str, got: object) -> ConfigError:
        shown = repr(got) if len(repr(got)) <= 60 else repr(got)[:57] + "..."
        return ConfigError(
            f"collect: {path}: {field}: expected {expected}, got {shown} (the file is damaged)"
        )

    if not isinstance(start, dict):
        raise ConfigError(
            f"collect: {path}: expected a JSON object, got a "
            f"{type(start).__name__} (the file is damaged)"
        )
    for key in ("experiment", "backend"):
        if not isinstance(start.get(key), str) or not start[key]:
            raise damaged(key, "a name", start.get(key))
    if start.get("host") is not None and not isinstance(start["host"], str):
        raise damaged("host", "a host name", start["host"])
    nodes = start.get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        raise damaged("nodes", "a mapping of node ids", nodes)
    local = start["backend"] == "local"
    for node, entry in nodes.items():
        if not isinstance(entry, dict):
            raise damaged(f"nodes.{node}", "a mapping", entry)
        stored = entry.get("stored_run")
        if not (
            isinstance(stored, list)
            and len(stored) == 2
            and all(isinstance(v, str) and v for v in stored)
        ):
            raise damaged(f"nodes.{node}.stored_run", "[experiment, node id]", stored)
        address = entry.get("address")
        if not (isinstance(address, str) and address) and not (local and address is None):
            raise damaged(f"nodes.{node}.address", "host:port", address)
        pid = entry.get("pid")
        if pid is not None and (isinstance(pid, bool) or not isinstance(pid, int)):
            raise damaged(f"nodes.{node}.pid", "a process id", pid)
        state_dir = entry.get("state_dir")
        if state_dir is not None and not isinstance(state_dir, str):
            raise damaged(f"nodes.{node}.state_dir", "a folder", state_dir)
    return start


def _gather(out: Path, start: dict, account: Account, section: Any = None):
    """Every node's stored samples, over gRPC from a process on its state dir (local) or
    from the node where it runs (inventory)."""
    from starling.orchestrator.execution.access import access_from_section
    from starling.orchestrator.execution.backends.local import LocalBackend
    from starling.orchestrator.execution.client import NodeClient, NodeUnavailable
    from starling.orchestrator.execution.collector import Collector

    nodes: dict = start["nodes"]
    collector = Collector()
    access = access_from_section(section or {}, "backend")  # the run's tls / token_file
    local = start.get("backend") == "local"
    backend = LocalBackend(start.get("host") or "127.0.0.1", 0, out / "nodes") if local else None
    try:
        if backend is not None:
            addresses = backend.start(list(nodes))
            for node, process in backend.nodes.items():
                recorded = nodes[node].get("state_dir")
                if recorded and (out / recorded).resolve() != process.state_dir.resolve():
                    raise ConfigError(
                        f"collect: node {node}: its state dir {recorded} is not "
                        f"where the local backend keeps it"
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
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


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
