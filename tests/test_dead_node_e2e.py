"""Dead is dead: a node that is gone for good costs its neighbours one grace period, not a
round deadline in every round that is left.

A 4-node D-SGLD ring through the real ``starling run``: one node is killed with SIGKILL
from outside (nobody restarts it), or stopped from outside with ``Control.Stop``. The
orchestrator declares it down (after ``limits.down_grace`` for the unreachable one, at once
for the stopped one), tells its neighbours through ``Control.SetPeerDown``, and they stop
waiting for it; the account and ``metrics.json`` say so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from starling.orchestrator.cli.run import EXIT_NODE_DOWN
from starling.orchestrator.execution.access import Access
from starling.orchestrator.execution.client import NodeClient, NodeUnavailable
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e

ROUNDS = 600
DEADLINE = 0.5
GRACE = 2.0
SLACK = 10.0
"""Seconds on top of the grace: a deadline or two waited before the mark lands (the
orchestrator polls every 0.2 s; the round in flight at that moment finishes its wait) and
scheduling noise on two shared cores. Generous, since what it guards against costs minutes
(a deadline in each of the rounds left, below); the grace itself is checked to the instant
on a fake clock in tests/orchestrator/execution/test_supervisor_patience.py."""


def _experiment(tmp_path: Path, name: str) -> Path:
    raw = {
        "name": name,
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.01},
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "data": {"source": "synthetic", "size": 20, "seed": 5},
        "topology": {"kind": "ring", "nodes": 4},
        "rounds": ROUNDS,
        "chains": 2,
        "seed": 11,
        "round_deadline": DEADLINE,
        "checkpoint_every": 50,
        "limits": {"down_grace": GRACE},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


class _Run:
    """``starling run`` in the background, with the test's view of its nodes."""

    def __init__(self, path: Path, out: Path, home: Path):
        self.out = out
        env = {**os.environ, "STARLING_HOME": str(home)}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "starling.orchestrator.cli",
                "run",
                str(path),
                "--out",
                str(out),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 90
        while not (out / "run.json").exists():
            assert self.process.poll() is None, self.process.communicate()
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.05)
        self.record = json.loads((out / "run.json").read_text())
        # Someone else's clients, naming the run (a node refuses a Stop for no run or another).
        access = Access(run_id=self.record["access"]["run_id"])
        self.clients = {
            n: NodeClient(a, timeout=5, access=access) for n, a in self.record["addresses"].items()
        }
        self.started = time.monotonic()

    def rounds_done(self, nodes: list[str], limit: float) -> float:
        """Seconds from the start until every one of ``nodes`` is done; fails past ``limit``."""
        pending = set(nodes)
        while pending:
            elapsed = time.monotonic() - self.started
            if self.process.poll() is not None:
                # The run is over, so its nodes were done (it stops them at the end, and
                # a poll of a loaded host can miss the moment they said "done"): the time
                # until now bounds the time until they were.
                return elapsed
            if elapsed > limit:
                rounds = {n: self._round(n) for n in sorted(pending)}
                raise AssertionError(f"nodes {rounds} not done after {elapsed:.1f} s")
            for node in sorted(pending):
                try:
                    if self.clients[node].status(attempts=1).state == "done":
                        pending.discard(node)
                except NodeUnavailable:
                    pass
            time.sleep(0.05)
        return time.monotonic() - self.started

    def _round(self, node: str) -> int | None:
        try:
            return self.clients[node].status(attempts=1).round
        except NodeUnavailable:
            return None

    def wait_round(self, node: str, round_index: int) -> None:
        deadline = time.monotonic() + 60
        while (self._round(node) or 0) < round_index:
            assert time.monotonic() < deadline, f"node {node} never reached {round_index}"
            time.sleep(0.02)

    def finish(self) -> tuple[int, str, dict]:
        stdout, stderr = self.process.communicate(timeout=120)
        for client in self.clients.values():
            client.close()
        assert "Traceback" not in stderr, stderr
        return self.process.returncode, stdout, json.loads((self.out / "metrics.json").read_text())

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


def _events(metrics: dict, node: str) -> list[dict]:
    return [e for e in metrics["faults"]["nodes"] if e["node"] == node]


def test_a_node_killed_for_good_costs_one_grace_period_not_a_deadline_per_round(
    tmp_path, starling_home
):
    path = _experiment(tmp_path, "dead-ring")
    survivors = ["0", "1", "3"]

    clean = _Run(path, tmp_path / "clean", starling_home)
    try:
        fault_free = clean.rounds_done(["0", "1", "2", "3"], limit=600)
        code, _, _ = clean.finish()
    finally:
        clean.close()
    assert code == 0
    # Tolerance: 1.2× the fault-free time, plus the grace period, plus SLACK (see above).
    # Without the marks the survivors wait DEADLINE per round for the rest of the run
    # (about ROUNDS × 0.5 s), far beyond the bound; the wait is cut off there.
    bound = 1.2 * fault_free + GRACE + SLACK

    killed = _Run(path, tmp_path / "killed", starling_home)
    try:
        killed.wait_round("2", ROUNDS // 10)
        os.kill(killed.record["pids"]["2"], signal.SIGKILL)
        took = killed.rounds_done(survivors, limit=bound)
        code, stdout, metrics = killed.finish()
    finally:
        killed.close()
    assert took <= bound, (took, fault_free)
    # Down at the end, and not by the schedule: its own exit code, never 0.
    assert code == EXIT_NODE_DOWN, stdout[-2000:]
    assert metrics["down_at_end"]["nodes"] == ["2"], metrics.get("down_at_end")
    assert "node 2 down at the end, not by the experiment's schedule" in stdout

    events = _events(metrics, "2")
    kinds = [e["event"] for e in events]
    assert "given_up" in kinds and "declared_down" in kinds, events
    down = next(e for e in events if e["event"] == "declared_down")
    # Its out-peers on the ring are its two neighbours; both were told.
    assert sorted(down["told"]) == ["1", "3"], down
    assert down["elapsed"] >= GRACE
    assert "node 2: declared down (unreachable for 2 s); 1, 3 no longer wait for it" in stdout
    assert any("declared down" in line for line in metrics["account"])
    # The survivors ran every round; the dead node's stored samples were collected.
    for node in survivors:
        assert metrics["samples_per_node"][node] == ROUNDS
    assert ROUNDS // 10 <= metrics["samples_per_node"]["2"] < ROUNDS


def test_an_outside_stop_is_noticed_accounted_and_not_waited_for(tmp_path, starling_home):
    path = _experiment(tmp_path, "stopped-ring")
    run = _Run(path, tmp_path / "stopped", starling_home)
    try:
        run.wait_round("2", 100)
        run.clients["2"].stop()  # someone else's Control.Stop
        stopped_at = time.monotonic() - run.started
        # Without the marks: ~1400 rounds × 0.5 s. With them: the rest of the rounds at full
        # speed after a round or two of waiting.
        run.rounds_done(["0", "1", "3"], limit=stopped_at + 60)
        code, stdout, metrics = run.finish()
    finally:
        run.close()
    assert code == 0, stdout[-2000:]
    events = _events(metrics, "2")
    stopped = next(e for e in events if e["event"] == "stopped")
    assert stopped["round"] >= 100
    down = next(e for e in events if e["event"] == "declared_down")
    assert sorted(down["told"]) == ["1", "3"]
    assert "stopped at round" in stdout and "from outside (Control.Stop)" in stdout
    assert metrics["samples_per_node"]["2"] == stopped["round"]
