"""Careless input that needs a real process: a reader that goes away (``| head``), Ctrl-C at
any moment of start-up, a node given a store it cannot write.

Every command is the real ``starling`` in a fresh interpreter. A reader that goes away is
a pipe whose read end is closed before the command writes: the command must carry on to its
own end and exit code (a run's results all written), with nothing on stderr about the pipe.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time

import pytest
import yaml

from tests.conftest import ROOT, run_cli, start_cli
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

QUICKSTART = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())


def _experiment(tmp_path, rounds: int = 40, **extra) -> str:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({**QUICKSTART, "rounds": rounds, "chains": 8, **extra}))
    return str(path)


def _closed_reader(*args: str, home, timeout: float = 300) -> tuple[int, str]:
    """``starling ARGS`` with stdout a pipe nobody reads any more: (exit code, stderr)."""
    read, write = os.pipe()
    os.close(read)
    try:
        process = start_cli(*args, env_home=home, stdout=write)
    finally:
        os.close(write)
    _, err = process.communicate(timeout=timeout)
    return process.returncode, err


@pytest.mark.parametrize("command", ["simulate", "run"])
def test_a_run_whose_reader_went_away_finishes_and_writes_everything(
    tmp_path, starling_home, command
):
    """``starling run exp.yaml | head -1`` ended the run at its second line, status failed,
    "[Errno 32] Broken pipe", exit 0."""
    out = tmp_path / "out"
    code, err = _closed_reader(
        command, _experiment(tmp_path), "--out", str(out), home=starling_home
    )
    assert code == 0, err
    assert "Broken pipe" not in err and "Traceback" not in err and "Exception" not in err, err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "complete"
    assert (out / "report.html").is_file() and len(list((out / "samples").glob("*.npz"))) == 5


@pytest.mark.parametrize(
    "args",
    [
        ["examples"],
        ["algorithms", "--format", "json"],
        ["--help"],
        ["status", "--format", "xml"],
        ["node", "health", "127.0.0.1:1"],
        ["simulate", "quickstart", "--log-format", "json", "--out", "{tmp}/json"],
        ["status", "--watch", "--wait", "1"],
    ],
    ids=["examples", "algorithms", "help", "usage-error", "health", "json-logs", "watch"],
)
def test_any_command_whose_reader_went_away_keeps_its_exit_code(tmp_path, starling_home, args):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    expected = run_cli(*[a.format(tmp=tmp_path / "a") for a in args], env_home=starling_home)
    code, err = _closed_reader(*[a.format(tmp=tmp_path / "b") for a in args], home=starling_home)
    assert code == expected.returncode, err
    assert "Traceback" not in err and "Broken pipe" not in err and "Exception" not in err, err


def test_a_node_whose_reader_went_away_serves_on(tmp_path, starling_home):
    """``starling node serve | head -1``: the address is read, and the node must go on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    read, write = os.pipe()
    os.close(read)
    node = start_cli(
        "node", "serve", "--listen", f"127.0.0.1:{port}", env_home=starling_home, stdout=write
    )
    os.close(write)
    try:
        wait_until(
            lambda: run_cli("node", "health", f"127.0.0.1:{port}").returncode == 0,
            60,
            "the node serving after its stdout closed",
        )
    finally:
        node.send_signal(signal.SIGTERM)
        _, err = node.communicate(timeout=60)
    assert node.returncode == 0, err
    assert "Traceback" not in err and "Broken pipe" not in err


def test_node_serve_refuses_a_store_it_cannot_write(tmp_path, starling_home):
    (tmp_path / "afile").write_text("mine")
    for store, why in [
        ("/proc/starling-store", "cannot write there"),
        (tmp_path / "afile" / "s", "cannot write there"),
    ]:
        done = run_cli("node", "serve", "--store", str(store), env_home=starling_home, timeout=60)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert f"--store {store}: {why}" in lines[0], lines[0]
        assert "listening" not in done.stdout


@pytest.mark.parametrize("command", ["run", "simulate", "collect", "status --watch"])
@pytest.mark.parametrize("delay", [0.6, 1.2, 2.0, 3.5])
def test_ctrl_c_at_any_moment_of_start_up_is_one_line(tmp_path, starling_home, command, delay):
    """A Ctrl-C while the command is still importing, loading its file or starting nodes:
    a traceback of the import it hit, or ``starling:`` and nothing after it. (Before 0.6 s
    the interpreter may still be starting itself, a moment no program of it can reach.)"""
    args = {
        "run": ["run", _experiment(tmp_path, rounds=400), "--out", str(tmp_path / "o")],
        "simulate": ["simulate", _experiment(tmp_path, rounds=400), "--out", str(tmp_path / "o")],
        "collect": ["collect", str(tmp_path / "nothing")],
        "status --watch": ["status", "--watch", "--wait", "30"],
    }[command]
    process = start_cli(*args, env_home=starling_home, stdout=subprocess.DEVNULL)
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    lines = [line for line in err.splitlines() if line.strip()]
    if process.returncode in (0, 2):  # it ended by itself first (collect of no folder)
        return
    if "init_import_site" in err or "<frozen site>" in err:
        pytest.skip("the interrupt came while the interpreter itself was still starting")
    assert "Traceback" not in err, err
    assert process.returncode == 130, (process.returncode, err)
    assert len(lines) == 1 and lines[0].startswith("starling: ") and len(lines[0]) > 20, err
