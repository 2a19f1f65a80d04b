"""Where a running experiment can be found by the live CLI (``starling links|nodes|status``).

``starling run`` writes ``<out>/run.json`` (node ids, addresses, pids, orchestrator pid)
and a pointer to it under ``$STARLING_HOME/active/`` (default ``~/.starling``). The live
commands read the pointer of the one running experiment, or of the one named with
``--run``, so users never retype addresses. Requests that need the orchestrator's own
processes (kill, restart) are dropped as files into ``<out>/requests/`` for its loop.

The run's own user makes ``requests/`` and the journal when the run is published, so it can
always remove what another user's command leaves in its folder: root's (``docker compose
exec orchestrator ...`` runs as root) works as if it were the run's. A user who can write
neither is refused before anything is done, in one line naming the user to be
(:func:`check_can_ask`), instead of leaving files the run cannot clean up.
Link changes go straight to the sending node, and are also appended, one JSON line each
(who, when, what, the sender's round), to ``<out>/live-events.jsonl``: the orchestrator
reads that journal into the run's account, and ``starling status`` replays it to show the
live state of every link it touched.

Every file here is read back as input, never trusted: ``run.json`` (:func:`read_record`)
may be hand-edited, another program's, or another version's, and is checked field by field
with one line naming the file and the field; a journal line or an answer that is not what
this module writes is left out.
"""

from __future__ import annotations

import getpass
import json
import math
import os
import pwd
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starling.node.params import ConfigError, host_port, plain_name
from starling.node.shown import shown
from starling.orchestrator.core.home import starling_home
from starling.orchestrator.core.processes import process_alive
from starling.orchestrator.core.seals import check_seal, sealed

__all__ = [
    "RunRecord",
    "read_record",
    "registry_dir",
    "publish",
    "withdraw",
    "find_run",
    "check_can_ask",
    "post_request",
    "take_requests",
    "who",
    "log_event",
    "carried_books",
    "CARRIED",
    "read_events",
    "link_states",
]

JOURNAL = "live-events.jsonl"


def registry_dir() -> Path:
    return starling_home() / "active"


@dataclass(frozen=True)
class RunRecord:
    name: str
    out_dir: str
    orchestrator_pid: int
    addresses: dict[str, str]
    pids: dict[str, int | None]
    link_delay_ms: float = 0.0
    """The experiment's own ``link_delay``: what ``links restore`` goes back to."""
    access: dict[str, Any] = field(default_factory=dict)
    """The backend's ``tls`` and ``token_file`` (paths, never a key or a token), so that
    ``starling status|links|nodes`` reach nodes that need them."""

    @property
    def requests_dir(self) -> Path:
        return Path(self.out_dir) / "requests"


def read_record(path: Path) -> RunRecord:
    """The :class:`RunRecord` in ``path`` (a ``run.json``), checked field by field and by
    its seal (:mod:`starling.orchestrator.core.seals`): a record that is not one, or one this
    user's starling did not write as it is, is a ConfigError naming the file."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: unreadable ({exc.strerror or exc})") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ConfigError(f"{path}: not a run record (not valid JSON: {exc})") from None
    record = record_from(raw, str(path))
    # Only the user's own records are trusted to say where their credentials go.
    check_seal(raw, Path(path), "dial the nodes it names with your credentials")
    return record


def _record_access(access: Any, wrong: Callable[[str, str, Any], ConfigError]) -> dict:
    """A run record's ``access`` (how its nodes are reached), its shape checked."""
    if not isinstance(access, dict):
        raise wrong("access", "a mapping (tls, token_file)", access)
    if access.get("tls") is not None and not isinstance(access["tls"], dict):
        raise wrong("access.tls", "a mapping (ca, cert, key)", access["tls"])
    if not isinstance(access.get("token_file") or "", str):
        raise wrong("access.token_file", "a file name", access["token_file"])
    return access


def record_from(raw: Any, where: str) -> RunRecord:
    """A run record's JSON value as a :class:`RunRecord`; fields this version does not know
    are left alone (a newer one's), the ones it reads are checked."""

    def wrong(field_name: str, expected: str, got: Any) -> ConfigError:
        return ConfigError(
            f"{where}: {field_name}: expected {expected}, got {shown(got)}; "
            "not a run record starling wrote"
        )

    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a JSON object (a run record), got {shown(raw)}")
    for name in ("name", "out_dir", "orchestrator_pid", "addresses"):
        if name not in raw:
            raise ConfigError(f"{where}: {name}: missing; not a run record starling wrote")
    name, out_dir, pid = raw["name"], raw["out_dir"], raw["orchestrator_pid"]
    if not plain_name(name):
        raise wrong("name", "an experiment name", name)
    if not isinstance(out_dir, str) or not out_dir.strip():
        raise wrong("out_dir", "a folder", out_dir)
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < 2**31:
        raise wrong("orchestrator_pid", "a process id", pid)
    addresses = raw["addresses"]
    if not isinstance(addresses, dict):
        raise wrong("addresses", "a mapping of node ids to host:port", addresses)
    for node, address in addresses.items():
        if not plain_name(node):
            raise wrong("addresses", "node ids as keys", node)
        host_port(address, f"{where}: addresses.{node}")
    pids = raw.get("pids") or {}
    if not isinstance(pids, dict) or not all(
        v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in pids.values()
    ):
        raise wrong("pids", "a mapping of node ids to process ids", pids)
    delay = raw.get("link_delay_ms", 0.0)
    if (
        isinstance(delay, bool)
        or not isinstance(delay, (int, float))
        or not math.isfinite(delay)
        or delay < 0
    ):
        raise wrong("link_delay_ms", "a number of milliseconds", delay)
    access = _record_access(raw.get("access") or {}, wrong)
    return RunRecord(
        name=name,
        out_dir=out_dir,
        orchestrator_pid=pid,
        addresses={str(k): str(v) for k, v in addresses.items()},
        pids=dict(pids),
        link_delay_ms=float(delay),
        access=dict(access),
    )


def publish(record: RunRecord) -> None:
    """Write the record where the live commands find it, sealed with this user's key
    (:mod:`starling.orchestrator.core.seals`): they dial only what a record of their own
    user says."""
    Path(record.out_dir).mkdir(parents=True, exist_ok=True)
    # Made by the run's user: it can remove what any other user's request leaves there.
    record.requests_dir.mkdir(exist_ok=True)
    # Its mode, as every file's of the run, is the umask's (owner-only unless STARLING_UMASK).
    os.close(os.open(Path(record.out_dir) / JOURNAL, os.O_WRONLY | os.O_CREAT, 0o666))
    text = json.dumps(sealed(record.__dict__), indent=2)
    _atomic_write(Path(record.out_dir) / "run.json", text)
    registry_dir().mkdir(parents=True, exist_ok=True)
    _atomic_write(registry_dir() / f"{record.orchestrator_pid}.json", text)


def withdraw(record: RunRecord) -> None:
    (registry_dir() / f"{record.orchestrator_pid}.json").unlink(missing_ok=True)


def _atomic_write(path: Path, text: str, mode: int | None = None) -> None:
    """``text`` into ``path`` at once (a reader sees the old file or the new one); ``mode``:
    the new file's, whatever the umask (None: the umask's)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    if mode is not None:
        tmp.chmod(mode)
    os.replace(tmp, path)


def active_runs() -> list[RunRecord]:
    runs: list[RunRecord] = []
    folder = registry_dir()
    if not folder.is_dir():
        return runs
    for entry in sorted(folder.glob("*.json")):
        try:
            record = read_record(entry)
        except ConfigError:  # not a pointer this program wrote: not a run to list
            continue
        if process_alive(record.orchestrator_pid):
            runs.append(record)
        else:
            entry.unlink(missing_ok=True)  # its orchestrator is gone
    return runs


def find_run(selector: str | None = None) -> RunRecord:
    """The running experiment named (by name or results folder) or the only one running."""
    if selector and Path(selector, "run.json").is_file():
        return read_record(Path(selector, "run.json"))
    runs = active_runs()
    if selector:
        runs = [r for r in runs if r.name == selector or Path(r.out_dir) == Path(selector)]
    if not runs:
        what = f" named {selector!r}" if selector else ""
        raise ConfigError(f"no running experiment{what} found (start one with 'starling run')")
    if len(runs) > 1:
        names = ", ".join(f"{r.name} ({r.out_dir})" for r in runs)
        raise ConfigError(f"several experiments are running: {names}; choose one with --run")
    return runs[0]


def _user_named(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # a uid with no passwd entry (a host user inside a container)
        return str(uid)


def _present(path: Path) -> bool:
    """Whether ``path`` exists; one this user may not even look at (a folder on its way it
    cannot search) counts as there, so the write check below refuses it."""
    try:
        return path.exists()
    except PermissionError:
        return True


def _owner_of(*paths: Path) -> str:
    """The name of the user owning the first of ``paths`` this user can look at."""
    for path in paths:
        try:
            return _user_named(path.stat().st_uid)
        except OSError:
            continue
    return "the run's own user"


def check_can_ask(record: RunRecord) -> None:
    """A ConfigError, in one line, if this user cannot leave requests and journal lines the
    run's user can remove; nothing is written before it. Root can (the run's user owns the
    folder and removes root's files from it)."""
    folder = record.requests_dir
    journal = Path(record.out_dir) / JOURNAL
    places = [p for p in (folder, journal) if _present(p)] or [Path(record.out_dir)]
    if all(os.access(p, os.W_OK) for p in places):
        return
    owner = _owner_of(places[0], Path(record.out_dir))
    me = _user_named(os.getuid())
    raise ConfigError(
        f"experiment {record.name!r} runs as user {owner} and {me} cannot leave requests in "
        f"{places[0]}: run the command as {owner} (in the compose testbed: docker compose "
        f"exec -u {owner} orchestrator starling ...)"
    )


def who() -> str:
    """``user@host (pid N)``: who made a live change, for the run's account."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()} (pid {os.getpid()})"


def log_event(out_dir: str | Path, event: dict) -> None:
    """Append one event to the run's journal; a single small ``write`` on an O_APPEND file,
    so concurrent CLI invocations never interleave inside a line."""
    line = json.dumps({"time": time.time(), "who": who(), **event}, sort_keys=True) + "\n"
    fd = os.open(Path(out_dir) / JOURNAL, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def read_events(out_dir: str | Path, offset: int = 0) -> tuple[list[dict], int]:
    """Journal events from byte ``offset``; returns them and the offset to read on from.

    A line still being written (no newline yet) is left for the next read.
    """
    path = Path(out_dir) / JOURNAL
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except FileNotFoundError:
        return [], offset
    events = []
    end = data.rfind(b"\n") + 1
    for raw in data[:end].splitlines():
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events, offset + end


CARRIED = "carried"
"""A journal event's kind: a node's process died, and the run carries its link counters
over to the next (``books``: what all its dead processes counted, so far)."""


def carried_books(events: list[dict]) -> dict[str, dict]:
    """node -> the link counters of its earlier processes, as the run's orchestrator last
    carried them over (:mod:`starling.orchestrator.results.link_books`); a node whose process never
    died is absent. A node's status counts only its current process, so adding these gives
    the whole run's counts."""
    carried: dict[str, dict] = {}
    for event in events:
        if event.get("kind") == CARRIED and _books(event.get("books")):
            carried[str(event.get("node"))] = event["books"]
    return carried


def _books(value: Any) -> bool:
    """Whether ``value`` is link books as the orchestrator journals them: {outbound,
    inbound}: peer -> counter -> a count (or the last error, a string)."""
    if not isinstance(value, dict) or not set(value) <= {"outbound", "inbound"}:
        return False
    for book in value.values():
        if not isinstance(book, dict):
            return False
        for counters in book.values():
            if not isinstance(counters, dict):
                return False
            for key, count in counters.items():
                text = key == "last_error" and isinstance(count, str)
                if not text and (isinstance(count, bool) or not isinstance(count, int)):
                    return False
    return True


def link_states(events: list[dict]) -> dict[str, dict]:
    """``"A->B"`` -> the live state the journal's link changes leave it in.

    Replays ``cut`` / ``restore`` / ``set`` in order; a change on ``A -> *`` applies to
    every link of A named so far and to later ones (as the node does).
    """
    states: dict[str, dict] = {}
    defaults: dict[str, dict] = {}
    fresh = {"up": True, "drop": 0.0, "delay_ms": 0.0}
    for event in events:
        if event.get("kind") != "link":
            continue
        sender, receiver = str(event.get("sender")), str(event.get("receiver"))
        change = {k: event[k] for k in ("up", "drop", "delay_ms") if event.get(k) is not None}
        if not _link_change(change):
            continue  # a hand-written line this module would not write
        if receiver == "*":
            defaults[sender] = {**defaults.get(sender, fresh), **change}
            for key in [k for k in states if k.startswith(f"{sender}->")]:
                states[key] = {**states[key], **change}
        else:
            key = f"{sender}->{receiver}"
            states[key] = {**states.get(key, defaults.get(sender, fresh)), **change}
    return states


def _link_change(change: dict) -> bool:
    up_ok = isinstance(change.get("up", True), bool)
    numbers = [change[k] for k in ("drop", "delay_ms") if k in change]
    return up_ok and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
        for v in numbers
    )


def post_request(
    record: RunRecord, action: str, node_id: str, timeout: float = 30.0, extra: dict | None = None
) -> dict:
    """Ask the orchestrator to act on one of its nodes (``extra``: the action's own fields);
    wait for its answer."""
    if node_id not in record.addresses:
        raise ConfigError(f"node {node_id!r} is not part of experiment {record.name!r}")
    record.requests_dir.mkdir(parents=True, exist_ok=True)
    stamp = f"{time.time_ns()}-{os.getpid()}"
    request = record.requests_dir / f"{stamp}.request.json"
    answer = record.requests_dir / f"{stamp}.answer.json"
    body = {**(extra or {}), "action": action, "node": node_id, "who": who()}
    # Readable by the run's own user whatever this command's umask (root's live commands in
    # the container write here for a run of another user); it holds no secret.
    _atomic_write(request, json.dumps(body), mode=0o644)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if answer.is_file():
            try:
                result = json.loads(answer.read_text())
            except (OSError, ValueError):
                result = None
            answer.unlink(missing_ok=True)
            if not isinstance(result, dict):
                raise ConfigError(f"{answer}: the orchestrator's answer is not a JSON object")
            return result
        time.sleep(0.1)
    request.unlink(missing_ok=True)
    raise ConfigError(f"the orchestrator of {record.name!r} did not answer within {timeout:.0f} s")


def take_requests(out_dir: Path) -> list[tuple[Path, dict]]:
    """Pending requests for the orchestrator loop, oldest first; each is removed when taken."""
    folder = Path(out_dir) / "requests"
    if not folder.is_dir():
        return []
    taken = []
    for path in sorted(folder.glob("*.request.json")):
        if path in _UNTAKEABLE:
            continue
        try:
            body = json.loads(path.read_text())
            path.unlink(missing_ok=True)
        except ValueError:
            continue  # still being written: taken at the next look
        except OSError as exc:  # not this run's to remove: refused once, never fatal to it
            _UNTAKEABLE.add(path)
            body = {"action": "refused", "error": f"the run cannot remove {path.name}: {exc}"}
        taken.append((path.with_name(path.name.replace(".request.", ".answer.")), body))
    return taken


_UNTAKEABLE: set[Path] = set()
"""Request files this process could not remove: answered once with the reason, then left
alone (taking them again at every look would repeat the action)."""


def answer(path: Path, body: dict) -> None:
    _atomic_write(path, json.dumps(body))
