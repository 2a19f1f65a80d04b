"""Nodes as local processes on loopback: the default backend and the one tests use.

Each node is ``python -m starling.node serve --listen HOST:PORT --state-dir DIR``. With port 0 the
node binds a free port itself and reports it on its first stdout line, so there is no race
for ports. A node keeps its state dir across a kill and restart, so it resumes from its
checkpoint. Every process this backend starts is stopped when the backend closes, and (on
Linux) dies with the orchestrator even if the orchestrator is killed outright.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from starling.node.params import ConfigError, existing_file
from starling.node.protocol.contract import READY_PREFIX
from starling.orchestrator.config.backends import BackendSettings, LocalSettings
from starling.orchestrator.execution.backends.base import Backend
from starling.orchestrator.planning.plan import RunPlan

__all__ = ["LocalBackend", "NodeProcess", "state_dir"]


def state_dir(workdir: Path, node_id: str) -> Path:
    """Where the local backend keeps ``node_id``'s state dir (store, checkpoints)."""
    return Path(workdir) / "state" / node_id.replace("/", "_")


_BOOT = """\
import ctypes, os, runpy, signal, sys
parent = int(sys.argv.pop(1))
if sys.platform.startswith("linux"):
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        sys.exit("the orchestrator that started this node is gone")
sys.argv[0] = "node"
runpy.run_module("starling.node", run_name="__main__", alter_sys=True)
"""
"""How a node process starts: it asks (on Linux) for SIGTERM when the orchestrator dies,
then runs ``python -m starling.node``. This happens in the child after ``exec``, not in a
``preexec_fn``: a ``preexec_fn`` makes Python ``fork()`` the orchestrator, whose gRPC threads'
fork handlers can then kill the child before it ever execs (seen as a restart that fails with
no output). Without one, the child is spawned with ``vfork``, which runs no fork handlers."""


@dataclass
class NodeProcess:
    node_id: str
    listen: str
    state_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    address: str = ""

    @property
    def running(self) -> subprocess.Popen[bytes]:
        """The process, once launched."""
        if self.process is None:
            raise RuntimeError(f"node {self.node_id!r} was never launched")
        return self.process

    @property
    def stdout(self) -> IO[bytes]:
        """The read end of the process's stdout pipe."""
        stdout = self.running.stdout
        if stdout is None:
            raise RuntimeError(f"node {self.node_id!r} has no stdout pipe")
        return stdout

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


class LocalBackend(Backend):
    """:class:`~starling.orchestrator.execution.backends.base.Backend` on local processes (``kind:
    local``)."""

    kind = "local"
    settings_model = LocalSettings

    def __init__(
        self,
        host: str,
        base_port: int,
        workdir: Path,
        ready_timeout: float = 30.0,
        data_dir: str | None = None,
    ):
        self.host = host
        self.data_dir = data_dir
        """Where the nodes may read the experiment's data file (its folder): local nodes
        run as the orchestrator's own user, which reads that file itself to score."""
        self.base_port = base_port
        self.workdir = Path(workdir)
        self.ready_timeout = ready_timeout
        self.nodes: dict[str, NodeProcess] = {}

    @classmethod
    def for_run(cls, settings: BackendSettings, workdir: Path, plan: RunPlan) -> LocalBackend:
        """``backend.host`` and ``backend.base_port``; the nodes may read the folder of
        every data file the plan deals out."""
        assert isinstance(settings, LocalSettings)
        files = {
            node: d.path
            for node, d in plan.evaluation.data_specs.items()
            if d.source == "file" and not d.path.startswith("builtin:")
        }  # the shared file, and nodes' own files (nodes[k].data.path)
        for node, path in files.items():  # said as simulate says it, before any node starts
            existing_file(path, f"node {node!r}: data.path")
        folders = {str(Path(path).resolve().parent) for path in files.values()}
        data_dir = os.path.commonpath(sorted(folders)) if folders else None
        return cls(settings.host, settings.base_port, workdir, data_dir=data_dir)

    @classmethod
    def for_collect(cls, settings: BackendSettings, workdir: Path) -> LocalBackend:
        """Any free port: the dead run's may be taken."""
        assert isinstance(settings, LocalSettings)
        return cls(settings.host, 0, workdir)

    def start(
        self, node_ids: Sequence[str], fixed: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """Start one process per node; returns id -> address. ``fixed`` pins addresses.

        Every process is launched first and the ready lines are read after: the nodes'
        imports run side by side, so start-up costs about one node's, not N of them."""
        fixed = fixed or {}
        launched: list[tuple[NodeProcess, _ReadyLine]] = []
        for index, node_id in enumerate(node_ids):
            if node_id in fixed and fixed[node_id]:
                listen = fixed[node_id]
            else:
                port = self.base_port + index if self.base_port else 0
                listen = f"{self.host}:{port}"
            safe = node_id.replace("/", "_")
            self.nodes[node_id] = NodeProcess(
                node_id=node_id,
                listen=listen,
                state_dir=state_dir(self.workdir, node_id),
                log_path=self.workdir / "logs" / f"node-{safe}.log",
            )
            launched.append((self.nodes[node_id], self._spawn(self.nodes[node_id])))
        deadline = time.monotonic() + self.ready_timeout
        failure: ConfigError | None = None
        for proc, ready in launched:
            try:
                self._await_ready(proc, ready, deadline)
            except ConfigError as exc:
                failure = failure or exc
        if failure is not None:
            self.stop()  # a run that cannot start all of its nodes starts none
            raise failure
        return {node_id: proc.address for node_id, proc in self.nodes.items()}

    def _launch(self, proc: NodeProcess) -> None:
        self._await_ready(proc, self._spawn(proc), time.monotonic() + self.ready_timeout)

    def _spawn(self, proc: NodeProcess) -> _ReadyLine:
        """Start the process; its first stdout line is read in the background."""
        proc.state_dir.mkdir(parents=True, exist_ok=True)
        proc.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(proc.log_path, "ab")  # noqa: SIM115 - owned by the child from here on
        command = [
            sys.executable,
            "-c",
            _BOOT,
            str(os.getpid()),
            "serve",
            "--listen",
            proc.listen,
            "--state-dir",
            str(proc.state_dir),
        ]
        if self.data_dir:
            command += ["--data-dir", self.data_dir]
        from starling.orchestrator.core.output import current_format  # `run --log-format`

        command += ["--log-format", current_format()]
        proc.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C reaches the orchestrator, which stops nodes itself
        )
        log.close()
        return _ReadyLine(proc.stdout)

    def _await_ready(self, proc: NodeProcess, ready: _ReadyLine, deadline: float) -> None:
        line = ready.wait(max(deadline - time.monotonic(), 0.0))
        if not line.startswith(READY_PREFIX):
            reason = _last_line(proc.log_path) or "no output"
            if proc.alive():
                proc.running.kill()
            proc.running.wait(timeout=10)
            proc.stdout.close()
            raise ConfigError(f"node {proc.node_id!r}: could not start on {proc.listen}: {reason}")
        proc.address = line[len(READY_PREFIX) :].strip()
        # A restart must come back on the same port so that peers' links reconnect.
        proc.listen = proc.address
        # Keep draining stdout so the child never blocks on a full pipe.
        threading.Thread(target=_drain, args=(proc.stdout,), daemon=True).start()

    def kill(self, node_id: str) -> None:
        """SIGKILL: a crash, not a shutdown. The state dir stays for the restart."""
        proc = self.nodes[node_id]
        if proc.alive():
            proc.running.send_signal(signal.SIGKILL)
            proc.running.wait(timeout=10)

    def restart(self, node_id: str) -> str:
        proc = self.nodes[node_id]
        if proc.alive():
            self.kill(node_id)
        self._launch(proc)
        return proc.address

    def addresses(self) -> dict[str, str]:
        return {node_id: proc.address for node_id, proc in self.nodes.items()}

    def alive(self, node_id: str) -> bool:
        proc = self.nodes.get(node_id)
        return proc is not None and proc.alive()

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM every process this backend started, SIGKILL what outlives ``grace``."""
        for proc in self.nodes.values():
            if proc.alive():
                proc.running.send_signal(signal.SIGTERM)
        for proc in self.nodes.values():
            if proc.process is None:
                continue
            try:
                proc.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                proc.process.kill()
                try:
                    proc.process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    # SIGKILLed and still not gone (a machine under heavy load): the kernel
                    # will reap it; a stop must never end in a traceback, least of all the
                    # stop of an interrupted run, which still has its results to write.
                    print(
                        f"starling: warning: node {proc.node_id}'s process {proc.pid} did not "
                        "end within 35 s of SIGKILL",
                        file=sys.stderr,
                    )

    def state_dirs(self) -> dict[str, Path]:
        return {node: process.state_dir for node, process in self.nodes.items()}

    def pids(self) -> dict[str, int | None]:
        return {node_id: proc.pid for node_id, proc in self.nodes.items()}


class _ReadyLine:
    """A child's first stdout line, read by a daemon thread from the moment it starts."""

    def __init__(self, stream):
        self._line: list[str] = []
        self._thread = threading.Thread(
            target=lambda: self._line.append(stream.readline().decode(errors="replace")),
            daemon=True,
        )
        self._thread.start()

    def wait(self, timeout: float) -> str:
        """The line, or "" if none came within ``timeout`` seconds."""
        self._thread.join(timeout)
        return self._line[0] if self._line else ""


def _drain(stream) -> None:
    """Read a child's stdout to its end (the child's exit), then close our end of the pipe."""
    try:
        with stream:
            for _ in iter(stream.readline, b""):
                pass
    except (OSError, ValueError):
        pass


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""
