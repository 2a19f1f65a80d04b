"""The live CLI against a real running experiment, the way a user drives it.

``starling run`` runs in the background on real node processes; every command below is
the real ``starling`` executable in a fresh interpreter, finding the run by itself through
``$STARLING_HOME``. Each live command must change what ``starling status --format json``
shows, and a node killed and restarted from the CLI must lose no sample.

Robust on a loaded 2-core machine: every wait is a wait-until loop on what ``status``
shows, with a generous timeout; no sleep is ever an assertion.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from starling.node.engine import simulate
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.planning.node_specs import node_specs
from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.e2e

MODEL = {"name": "linear_regression", "params": {"dim": 2, "noise_std": 4.0, "prior_var": 10.0}}
WAIT = 120.0
"""Seconds any one condition may take to show up in ``status`` on a busy machine."""


def _ring(name: str, **fields) -> dict:
    return {
        "name": name,
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.009},
        "model": MODEL,
        "data": {"source": "synthetic", "size": 50, "seed": 3},
        "topology": {"kind": "ring", "nodes": 4},
        "seed": 5,
        **fields,
    }


def inventory_ring(cluster, name: str, **fields) -> tuple[dict, dict[str, str], dict]:
    """Nodes a, b, c started by ``cluster`` as ``starling node serve`` would run them, and a
    ring experiment over them as an inventory: (processes, addresses, the experiment)."""
    nodes = ("a", "b", "c")
    procs = {n: cluster.launch(n, extra=["--id", n]) for n in nodes}
    inventory = {n: cluster.ready(p).address for n, p in procs.items()}
    raw = _ring(
        name,
        topology={"kind": "ring"},
        nodes=[{"id": n} for n in nodes],
        backend={"kind": "inventory", "nodes": inventory},
        **fields,
    )
    return procs, inventory, raw


class LiveRun:
    """``starling run`` in the background, and the live CLI pointed at it."""

    def __init__(self, tmp_path: Path, home: Path, raw: dict):
        self.home, self.raw = home, raw
        self.out = tmp_path / "out"
        path = tmp_path / f"{raw['name']}.yaml"
        path.write_text(yaml.safe_dump(raw, sort_keys=False))
        self.stdout = open(tmp_path / "run.stdout", "w+")  # noqa: SIM115 - closed in close()
        self.stderr = open(tmp_path / "run.stderr", "w+")  # noqa: SIM115
        env = {**os.environ, "STARLING_HOME": str(home)}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "starling.orchestrator.cli",
                "run",
                str(path),
                "--out",
                str(self.out),
            ],
            cwd=ROOT,
            env=env,
            stdout=self.stdout,
            stderr=self.stderr,
            text=True,
        )

    def __enter__(self) -> LiveRun:
        return self

    def __exit__(self, *exc) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.stdout.close()
        self.stderr.close()

    def output(self) -> str:
        self.stdout.seek(0)
        self.stderr.seek(0)
        return self.stdout.read()[-4000:] + self.stderr.read()[-4000:]

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        done = run_cli(*args, env_home=self.home, timeout=WAIT)
        assert done.returncode == 0, f"starling {' '.join(args)}: {done.stderr}"
        assert "Traceback" not in done.stderr
        return done

    def status(self) -> dict:
        return json.loads(self.cli("status", "--format", "json").stdout)

    def wait_for(self, condition, what: str, timeout: float = WAIT) -> dict:
        """The first status for which ``condition(status)`` holds."""
        deadline = time.monotonic() + timeout
        while True:
            assert self.process.poll() is None, f"the run ended early:\n{self.output()}"
            status = self.status()
            if condition(status):
                return status
            assert time.monotonic() < deadline, f"never saw {what}; last status: {status}"
            time.sleep(0.3)  # a polling interval, not an assertion

    def wait_started(self, min_round: int) -> dict:
        deadline = time.monotonic() + WAIT
        while not (self.out / "run.json").exists():
            assert self.process.poll() is None, f"the run ended early:\n{self.output()}"
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.2)
        return self.wait_for(
            lambda s: all(
                n.get("state") == "running" and n["round"] >= min_round for n in s["nodes"].values()
            ),
            f"every node running past round {min_round}",
        )

    def finish(self, timeout: float = 300) -> int:
        return self.process.wait(timeout=timeout)

    def interrupt(self) -> int:
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=60)

    def metrics(self) -> dict:
        return json.loads((self.out / "metrics.json").read_text())


def _link(status: dict, key: str) -> dict:
    return status["links"][key]


def _seconds_per_round(run: LiveRun, node: str, at_least: float) -> float:
    """Measured pace of ``node`` over at least ``at_least`` seconds (and 3 rounds)."""
    first, t0 = run.status()["nodes"][node]["round"], time.monotonic()
    while True:
        time.sleep(0.3)
        now = run.status()["nodes"][node]["round"]
        elapsed = time.monotonic() - t0
        if elapsed >= at_least and now - first >= 3:
            return elapsed / (now - first)
        assert elapsed < WAIT, f"node {node} stopped advancing (round {now})"


def test_each_live_command_changes_what_status_shows(tmp_path, starling_home):
    raw = _ring("live-commands", rounds=1_000_000, chains=4, round_deadline=1.0, link_delay="10ms")
    with LiveRun(tmp_path, starling_home, raw) as run:
        run.wait_started(min_round=5)

        # Mistakes get one line naming what is wrong, and change nothing.
        for args, needles in [
            (("links", "cut", "0", "2"), ["'2' is not an out-peer of node '0'"]),
            (("links", "set", "0", "1", "--delay", "soon"), ["--delay", "'soon'"]),
            (("nodes", "kill", "9"), ["'9'", "not part of experiment 'live-commands'"]),
        ]:
            refused = run_cli(*args, env_home=starling_home, timeout=WAIT)
            lines = [line for line in refused.stderr.splitlines() if line.strip()]
            assert refused.returncode == 2 and len(lines) == 1, refused.stderr
            assert all(needle in lines[0] for needle in needles), lines[0]

        # links cut: the sender withholds every message on that link, sends none.
        cut = json.loads(run.cli("links", "cut", "0", "1", "--format", "json").stdout)
        assert cut["ok"] and cut["action"] == "cut" and cut["round"] >= 5
        before = _link(run.status(), "0->1")
        after = _link(
            run.wait_for(
                lambda s: _link(s, "0->1")["withheld"] >= before["withheld"] + 15,
                "withheld rising on the cut link 0->1",
            ),
            "0->1",
        )
        assert after["sent"] <= before["sent"] + 1, (before, after)  # one may be in flight
        assert after["live"]["up"] is False
        assert _link(run.status(), "1->0")["withheld"] == 0  # one-way: the reverse is up

        # links restore: messages flow again and withheld stops rising.
        run.cli("links", "restore", "0", "1")
        before = _link(run.status(), "0->1")
        after = _link(
            run.wait_for(
                lambda s: _link(s, "0->1")["sent"] >= before["sent"] + 15,
                "messages sent again on 0->1",
            ),
            "0->1",
        )
        assert after["withheld"] <= before["withheld"] + 1, (before, after)
        assert after["live"]["up"] is True

        # links set --drop: about that share of the messages is withheld.
        run.cli("links", "set", "1", "2", "--drop", "0.5")
        before = _link(run.status(), "1->2")
        total = lambda c: c["sent"] + c["withheld"]  # noqa: E731
        after = _link(
            run.wait_for(
                lambda s: total(_link(s, "1->2")) >= total(before) + 200,
                "200 messages on 1->2 at drop 0.5",
            ),
            "1->2",
        )
        share = (after["withheld"] - before["withheld"]) / (total(after) - total(before))
        # Binomial, n >= 200, p = 0.5: SD <= 0.036; +-0.15 is over 4 SD.
        assert 0.35 < share < 0.65, share
        assert after["live"]["drop"] == 0.5
        run.cli("links", "set", "1", "2", "--drop", "0")
        before = _link(run.status(), "1->2")
        after = _link(
            run.wait_for(
                lambda s: _link(s, "1->2")["sent"] >= before["sent"] + 30,
                "1->2 sending after drop 0",
            ),
            "1->2",
        )
        assert after["withheld"] <= before["withheld"] + 1

        # links set --delay: every round now waits for the delayed message.
        fast = _seconds_per_round(run, "0", at_least=3.0)
        run.cli("links", "set", "2", "3", "--delay", "400ms")
        slow = _seconds_per_round(run, "0", at_least=4.0)
        # Node 3 needs 2's message of each round, 400 ms after 2 sent it; 2 may run one
        # round ahead of 3 (it needs 3's message of the previous round only), so the ring
        # settles at two rounds per delay: about 0.2 s a round, never much less.
        assert slow >= 0.15, (fast, slow)
        assert slow > 3 * fast, (fast, slow)
        assert _link(run.status(), "2->3")["live"]["delay_ms"] == 400.0
        run.cli("links", "restore", "2", "3")
        assert _seconds_per_round(run, "0", at_least=3.0) < slow / 2

        # nodes kill: the node is unreachable, its peers go on (one deadline per round)
        # and their messages to it are dropped.
        run.cli("nodes", "kill", "3")
        down = run.wait_for(lambda s: s["nodes"]["3"]["state"] == "unreachable", "3 down")
        dropped = _link(down, "0->3")["dropped"]
        moving = run.wait_for(
            lambda s: (
                s["nodes"]["0"]["round"] >= down["nodes"]["0"]["round"] + 2
                and _link(s, "0->3")["dropped"] > dropped
            ),
            "node 0 advancing without 3, its messages to 3 dropped",
        )
        assert moving["nodes"]["3"]["state"] == "unreachable"

        # nodes restart: back from its checkpoint (not from round 0), and running on.
        run.cli("nodes", "restart", "3")
        back = run.wait_for(lambda s: s["nodes"]["3"].get("state") == "running", "3 running")
        resumed_at = back["nodes"]["3"]["round"]
        assert resumed_at >= 5, "the restarted node started over instead of resuming"
        run.wait_for(lambda s: s["nodes"]["3"]["round"] >= resumed_at + 5, "3 advancing")

        assert run.interrupt() == 130, run.output()
    metrics = run.metrics()
    live_links = metrics["faults"]["live_links"]
    assert [(e["action"], e["sender"], e["receiver"]) for e in live_links] == [
        ("cut", "0", "1"),
        ("restore", "0", "1"),
        ("set", "1", "2"),
        ("set", "1", "2"),
        ("set", "2", "3"),
        ("restore", "2", "3"),
    ]
    assert all(e["who"] and e["sender_round"] is not None for e in live_links)
    kinds = [(e["node"], e["event"]) for e in metrics["faults"]["nodes"]]
    assert kinds == [("3", "killed"), ("3", "restarted"), ("3", "resumed")], kinds
    assert any("live: link 0→1 cut" in line for line in metrics["account"])
    assert metrics["links"]["0->1"]["withheld"] >= 15
    assert metrics["links"]["0->3"]["dropped"] >= 1


def test_a_node_killed_and_restarted_from_the_cli_loses_no_sample(tmp_path, starling_home):
    rounds = 300
    raw = _ring("live-kill", rounds=rounds, chains=8, round_deadline=2.0, link_delay="50ms")
    with LiveRun(tmp_path, starling_home, raw) as run:
        run.wait_started(min_round=20)
        run.cli("nodes", "kill", "2")
        down = run.wait_for(lambda s: s["nodes"]["2"]["state"] == "unreachable", "2 down")
        assert down["nodes"]["1"]["state"] == "running"
        run.cli("nodes", "restart", "2")
        assert run.finish() == 0, run.output()
        stdout = run.output()
    assert "node 2: killed at round" in stdout and "resumed from its checkpoint" in stdout

    metrics = run.metrics()
    events = {e["event"]: e for e in metrics["faults"]["nodes"] if e["node"] == "2"}
    assert set(events) == {"killed", "restarted", "resumed"}, events
    killed_at = events["killed"]["round"]
    assert 20 <= killed_at < rounds
    assert events["resumed"]["resumed"] is True
    assert "on request by" in events["killed"]["why"]

    expected = simulate(node_specs(parse_experiment(raw)))
    for file in sorted((run.out / "samples").glob("node-*.npz")):
        node = file.stem[len("node-") :]
        with np.load(file) as data:
            assert list(data["rounds"]) == list(range(rounds)), node  # each round once
            values = data["samples"]
        assert np.isfinite(values).all()
        # What was produced before the kill is exactly what it was: the same as the
        # in-process engine, byte for byte (after it, real timing decides who heard what).
        stable = killed_at - 1
        assert values[:stable].tobytes() == expected[node][:stable].tobytes(), node
    assert metrics["samples_per_node"] == {n: rounds for n in ("0", "1", "2", "3")}


def test_status_counts_a_restarted_nodes_links_over_the_whole_run(tmp_path, starling_home):
    """A node's status counts only its current process; ``starling status`` adds what its
    dead processes counted (the run's orchestrator journals it when it carries them over),
    so a restarted node's links are not shown as having delivered a fraction of what was
    sent to them."""
    raw = _ring("live-books", rounds=1_000_000, chains=4, round_deadline=2.0, link_delay="20ms")
    with LiveRun(tmp_path, starling_home, raw) as run:
        before = run.wait_started(min_round=40)["nodes"]["2"]["round"]
        run.cli("nodes", "kill", "2")
        run.wait_for(lambda s: s["nodes"]["2"]["state"] == "unreachable", "2 down")
        run.cli("nodes", "restart", "2")
        back = run.wait_for(
            lambda s: s["nodes"]["2"].get("state") == "running" and s["nodes"]["2"]["round"] > 0,
            "2 running again",
        )
        resumed_at = back["nodes"]["2"]["round"]
        status = run.wait_for(lambda s: s["nodes"]["2"]["round"] >= resumed_at + 5, "2 on")
    for key in ("1->2", "3->2", "2->1", "2->3"):
        link = _link(status, key)
        # Whole-run counts: the dead process delivered (or sent) every round before the
        # kill; its successor alone has counted a few rounds. Slack: the rounds read apart
        # (nodes are asked one after another) and a message in flight at the kill.
        assert link["delivered"] >= before - 3, (key, before, link)
        assert link["delivered"] <= link["sent"] + 5, (key, link)
