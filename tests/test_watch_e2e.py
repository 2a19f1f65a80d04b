"""``starling status --watch`` through a whole run: started before it, through a cut and a
drop, to its end, as plain blocks (stdout not a terminal) parsed here.

Every block must agree with itself: no link shows more messages delivered (or late) than
sent, whatever the network did between two nodes' answers (the view reads a link's
receiver before its sender). The cut link shows ``cut``; the link given ``--drop 0.3``
shows ``lossy 0.3`` and its *dropped (fault)* column rising, not *receiver down*; at the
end the watch says ``finished: complete`` with the run's final counters, and leaves by
itself with exit 0.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT, run_cli
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

WAIT = 120.0
"""Seconds any one thing may take to show on a busy machine."""

COLUMNS = ("sent", "delivered", "late", "dropped", "down")


def _blocks(text: str) -> list[list[str]]:
    """The printed views, each a list of lines (a view ends with an empty line)."""
    return [
        b.splitlines()
        for b in text.split("\n\n")
        if b.strip().startswith("experiment") and "  node  " in b
    ]


def _links(block: list[str]) -> dict[str, dict]:
    """Link -> {state, sent, delivered, late, dropped, down, as_of} of one block."""
    rows = {}
    for line in block:
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) == 8 and " -> " in cells[0] and cells[2].isdigit():
            rows[cells[0]] = {
                "state": cells[1],
                **{name: int(v) for name, v in zip(COLUMNS, cells[2:7], strict=True)},
                "as_of": cells[7],
            }
    return rows


def test_watch_follows_a_run_from_before_its_start_to_its_end(tmp_path, starling_home):
    raw = {
        "name": "watched-through",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.009},
        "model": {
            "name": "linear_regression",
            "params": {"dim": 2, "noise_std": 4.0, "prior_var": 10.0},
        },
        "data": {"source": "synthetic", "size": 50, "seed": 3},
        "topology": {"kind": "ring", "nodes": 4},
        "rounds": 700,
        "chains": 4,
        "seed": 5,
        "link_delay": "20ms",
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(raw))
    env = {**os.environ, "STARLING_HOME": str(starling_home)}
    watched = tmp_path / "watch.out"
    errors = tmp_path / "stderr.txt"
    with open(watched, "w") as sink, open(errors, "w") as said:
        # Started first: the run has not registered yet, and the watch must wait for it.
        watch = subprocess.Popen(
            [sys.executable, "-m", "starling.orchestrator.cli", "status", "--watch"]
            + ["--wait", str(WAIT)],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=said,
        )
        run = subprocess.Popen(
            [sys.executable, "-m", "starling.orchestrator.cli", "run", str(path)]
            + ["--out", str(tmp_path / "out"), "--no-report", "--quiet"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=said,
        )
        try:
            wait_until(
                lambda: any(_links(b) for b in _blocks(watched.read_text())),
                WAIT,
                "the watch drawing the run's links",
            )
            assert "waiting up to" in watched.read_text().splitlines()[0]

            def cli(*args: str) -> None:
                done = run_cli(*args, env_home=starling_home, timeout=WAIT)
                assert done.returncode == 0, done.stderr

            cli("links", "cut", "0", "1")
            wait_until(
                lambda: any(
                    _links(b).get("0 -> 1", {}).get("state") == "cut"
                    for b in _blocks(watched.read_text())
                ),
                WAIT,
                "link 0 -> 1 shown cut",
            )
            cli("links", "restore", "0", "1")
            cli("links", "set", "1", "2", "--drop", "0.3")

            def dropped_shown() -> bool:
                rows = [_links(b).get("1 -> 2") for b in _blocks(watched.read_text())]
                lossy = [r for r in rows if r and r["state"].startswith("lossy 0.3")]
                return len(lossy) >= 2 and lossy[-1]["dropped"] > lossy[0]["dropped"]

            wait_until(dropped_shown, WAIT, "1 -> 2 lossy 0.3, its drops rising")
            assert run.wait(timeout=600) == 0, errors.read_text()
            assert watch.wait(timeout=WAIT) == 0, errors.read_text()
        finally:
            for process in (run, watch):
                if process.poll() is None:
                    process.kill()
                    process.wait()
    assert "Traceback" not in errors.read_text()
    text = watched.read_text()
    blocks = _blocks(text)
    assert len(blocks) >= 3, text[-3000:]
    for block in blocks:
        for link, row in _links(block).items():
            # One consistent look: what arrived was sent.
            assert row["delivered"] + row["late"] <= row["sent"], (link, row, block)
    lossy = [_links(b)["1 -> 2"] for b in blocks if "1 -> 2" in _links(b)]
    assert all(r["down"] == 0 for r in lossy)  # a fault's drops are drops, not "receiver down"
    final = blocks[-1]
    assert "finished: complete" in final[0], final
    rows = _links(final)
    assert set(rows) == {f"{a} -> {b}" for a, b in ("01", "10", "12", "21", "23", "32", "30", "03")}
    assert all(r["state"] == "finished" for r in rows.values())
    assert rows["1 -> 2"]["dropped"] > 0 and rows["0 -> 1"]["dropped"] > 0
    assert "experiment watched-through has ended: finished: complete" in text
