"""Files are data, not orders: a run record (``run.json``) or a start record (``start.json``)
someone else planted in a results folder never makes a live command or ``collect`` send the
user's credentials to the address it names.

The attacker here is a listener of its own on loopback that records every byte it is sent;
the planted records name it as a node, with the victim's token file as the credential. The
commands refuse in one line naming the file, and the listener hears nothing. The control:
the same record sealed by the victim's own starling is dialled (the listener hears the
call), so the refusal is the seal's doing, not a broken record.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

pytestmark = pytest.mark.e2e


class Listener:
    """A TCP listener on loopback that keeps whatever any connection sends it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.heard = bytearray()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(2.0)
            try:
                while chunk := conn.recv(65536):
                    self.heard += chunk
            except OSError:
                pass
            finally:
                conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def listener():
    got = Listener()
    yield got
    got.close()


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "STARLING_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "starling.orchestrator.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _victim(tmp_path: Path) -> tuple[Path, Path]:
    """The victim's STARLING_HOME and master token file (what the orchestrator holds)."""
    home = tmp_path / "victim-home"
    home.mkdir()
    token = tmp_path / "victim.token"
    token.write_text("a-master-secret-the-attacker-wants\n")
    token.chmod(0o600)
    return home, token


def _run_record(folder: Path, address: str, token: Path) -> dict:
    return {
        "name": "planted",
        "out_dir": str(folder),
        "orchestrator_pid": os.getpid(),  # alive: the record looks current
        "addresses": {"a": address},
        "pids": {"a": None},
        "link_delay_ms": 0.0,
        "access": {"token_file": str(token)},
    }


@pytest.mark.parametrize("seal", [None, "0" * 64, "another user's key"])
def test_a_planted_run_record_is_refused_and_nothing_is_sent(tmp_path, listener, seal):
    home, token = _victim(tmp_path)
    folder = tmp_path / "results"
    folder.mkdir()
    record = _run_record(folder, listener.address, token)
    if seal == "another user's key":  # sealed by a starling of another home
        other = tmp_path / "other-home"
        other.mkdir()
        code = (
            "import json, sys; from starling.orchestrator.core.seals import sealed; "
            "print(json.dumps(sealed(json.loads(sys.argv[1]))))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, json.dumps(record)],
            env={**os.environ, "STARLING_HOME": str(other)},
            capture_output=True,
            text=True,
            check=True,
        )
        record = json.loads(done.stdout)
    elif seal is not None:
        record["seal"] = seal
    (folder / "run.json").write_text(json.dumps(record))
    for command in (("status", "--run", str(folder)), ("stop", "--run", str(folder))):
        done = _cli(home, *command)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert "run.json" in done.stderr and "seal" in done.stderr, done.stderr
    assert bytes(listener.heard) == b"", "the planted address was dialled"


def test_the_users_own_record_is_dialled(tmp_path, listener):
    """The control: sealed by the victim's own starling, the record is trusted, and the
    command reaches the address it names (the listener speaks no gRPC, so the command then
    fails as for any node that does not answer)."""
    home, token = _victim(tmp_path)
    folder = tmp_path / "results"
    folder.mkdir()
    code = (
        "import json, sys; from starling.orchestrator.execution import live; "
        "live.publish(live.RunRecord(**json.loads(sys.argv[1])))"
    )
    subprocess.run(
        [sys.executable, "-c", code, json.dumps(_run_record(folder, listener.address, token))],
        env={**os.environ, "STARLING_HOME": str(home)},
        check=True,
    )
    done = _cli(home, "status", "--run", str(folder))
    assert "seal" not in done.stderr, done.stderr
    assert listener.heard, "the user's own record was not dialled"


def test_a_planted_start_record_is_refused_by_collect(tmp_path, listener):
    """``collect`` of a folder with a planted ``start.json`` (an inventory node at the
    attacker's address, the victim's token file in its experiment) dials nothing."""
    home, token = _victim(tmp_path)
    folder = tmp_path / "crashed"
    folder.mkdir()
    experiment = {
        "name": "planted",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.01},
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "nodes": [{"id": "a"}],
        "topology": {"kind": "none"},
        "rounds": 10,
        "backend": {
            "kind": "inventory",
            "nodes": {"a": listener.address},
            "token_file": str(token),
        },
    }
    (folder / "experiment.yaml").write_text(yaml.safe_dump(experiment))
    (folder / "manifest.json").write_text(json.dumps({"status": "running", "files": []}))
    start = {
        "experiment": "planted",
        "backend": "inventory",
        "orchestrator_pid": 1,
        "nodes": {
            "a": {
                "address": listener.address,
                "pid": None,
                "state_dir": None,
                "stored_run": ["planted", "a"],
            }
        },
    }
    (folder / "start.json").write_text(json.dumps(start))
    done = _cli(home, "collect", str(folder))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "start.json" in done.stderr and "seal" in done.stderr, done.stderr
    assert bytes(listener.heard) == b"", "the planted address was dialled"
