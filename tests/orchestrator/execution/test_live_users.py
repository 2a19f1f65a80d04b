"""Live requests between users: root's requests are taken and removed by the run's own user,
and a third user is refused in one line before anything is written.

In the compose testbed ``docker compose exec orchestrator starling nodes kill c`` runs as
root, while the run drops to the owner of ./results. Before, root's command made the
requests folder, the run could not remove root's request from it, and the run died. Here
the run's side is a real process of another user (a fork that gave up root, as the
container's entrypoint does), on real files; the parent plays root's CLI.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from starling.node.params import ConfigError
from starling.orchestrator.execution import live

RUN_USER = 65534  # nobody
STRANGER = 23456  # a uid with no passwd entry, as a host user inside a container

pytestmark = [
    pytest.mark.e2e,  # forks a process of another user
    pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as other users"),
]


@pytest.fixture
def shared(monkeypatch):
    """A folder other users can reach (pytest's own tmp_path is root's alone), and the
    run's user's own STARLING_HOME in it, as the image makes it on the results volume (a
    shared one, open to all, would let another user plant the key that seals records:
    core/seals.py refuses it)."""
    where = Path(tempfile.mkdtemp(prefix="starling-users-"))
    where.chmod(0o755)
    home = where / "home"
    home.mkdir()
    home.chmod(0o700)
    os.chown(home, RUN_USER, RUN_USER)
    monkeypatch.setenv("STARLING_HOME", str(home))
    yield where
    shutil.rmtree(where, ignore_errors=True)


def _as_user(uid: int, work) -> int:
    """Run ``work()`` in a child process as ``uid``; its exit status (0: it returned)."""
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            work()
            code = 0
        except BaseException:  # noqa: BLE001 - the parent reads the status
            import traceback

            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _record(out: Path) -> live.RunRecord:
    return live.RunRecord(
        name="users",
        out_dir=str(out),
        orchestrator_pid=os.getpid(),
        addresses={"a": "127.0.0.1:1", "b": "127.0.0.1:2"},
        pids={"a": None, "b": None},
    )


def test_roots_request_is_taken_and_removed_by_the_runs_own_user(shared):
    os.umask(0o077)  # as the starling command sets it, for root's CLI and the run alike
    out = shared / "run"
    out.mkdir()
    os.chown(out, RUN_USER, RUN_USER)
    record = _record(out)
    assert _as_user(RUN_USER, lambda: live.publish(record)) == 0
    assert record.requests_dir.stat().st_uid == RUN_USER

    live.check_can_ask(record)  # root may
    answers: list[dict] = []
    asking = threading.Thread(
        target=lambda: answers.append(live.post_request(record, "kill", "a", timeout=20))
    )
    asking.start()

    def serve() -> None:  # the run's loop, as its own user: take, remove, answer
        for _ in range(200):
            taken = live.take_requests(out)
            if taken:
                ((answer_path, body),) = taken
                assert body["action"] == "kill" and body["node"] == "a", body
                live.answer(answer_path, {"ok": True, "address": "127.0.0.1:1"})
                return
            threading.Event().wait(0.05)
        raise AssertionError("no request came")

    assert _as_user(RUN_USER, serve) == 0
    asking.join(30)
    assert answers == [{"ok": True, "address": "127.0.0.1:1"}]
    assert list(record.requests_dir.iterdir()) == []  # root's request is gone, and the answer


@pytest.mark.parametrize("umask", [0o022, 0o077], ids=["folder-open-to-read", "folder-private"])
def test_another_users_request_is_refused_in_one_line_naming_the_user_to_be(shared, umask):
    """Whether the results folder lets others look in (umask 022) or not even that (077,
    the starling command's own): the stranger is refused in one line, not a traceback."""
    os.umask(umask)
    out = shared / "run"
    out.mkdir()
    os.chown(out, RUN_USER, RUN_USER)
    record = _record(out)
    assert _as_user(RUN_USER, lambda: live.publish(record)) == 0
    said = shared / "said.txt"
    said.touch()
    said.chmod(0o666)

    def ask() -> None:
        try:
            live.check_can_ask(record)
        except ConfigError as exc:
            said.write_text(str(exc))
            return
        raise AssertionError("a stranger was let in")

    assert _as_user(STRANGER, ask) == 0
    line = said.read_text()
    assert "\n" not in line
    assert "runs as user nobody and 23456 cannot leave requests" in line, line
    assert "docker compose exec -u nobody orchestrator starling" in line, line
    assert list(record.requests_dir.iterdir()) == []  # nothing was written
