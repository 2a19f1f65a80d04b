"""The local backend against the :class:`Backend` protocol, with real node processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from starling.orchestrator.execution.backends.base import Backend
from starling.orchestrator.execution.backends.local import LocalBackend
from starling.orchestrator.execution.client import NodeClient
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie still answers kill(0); its parent (init, here) reaps it.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(")")[-1].split()[0] == "Z"


def test_start_kill_restart_stop(tmp_path):
    with LocalBackend("127.0.0.1", 0, tmp_path) as backend:
        assert isinstance(backend, Backend)
        addresses = backend.start(["a", "b"])
        assert addresses == backend.addresses() and set(addresses) == {"a", "b"}
        assert backend.alive("a") and backend.alive("b")
        backend.kill("a")
        assert backend.alive("a") is False and backend.alive("b")
        again = backend.restart("a")
        assert again == addresses["a"]  # same port: peers' links reconnect by themselves
        with NodeClient(again) as client:
            client.wait_ready()
            assert client.status().state == "idle"
        pids = backend.pids()
    assert not backend.alive("a") and not backend.alive("b")
    assert all(_gone(pid) for pid in pids.values() if pid is not None)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_nodes_die_with_an_orchestrator_killed_outright(tmp_path):
    script = (
        "import sys, time\n"
        "from starling.orchestrator.execution.backends.local import LocalBackend\n"
        f"backend = LocalBackend('127.0.0.1', 0, {str(tmp_path)!r})\n"
        "backend.start(['a', 'b'])\n"
        "print(*backend.pids().values(), flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        wait_until(lambda: all(_gone(pid) for pid in pids), 20, f"processes {pids} to end")
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.stdout.close()
