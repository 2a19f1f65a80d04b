"""One node's runtime: configure a program from its spec, run its rounds, keep its samples.

The servicers (:mod:`node.runtime.servicers`) translate protobuf to the plain calls here;
nothing in this module touches protobuf except the incoming iterates it validates.

Round ``r`` ([DESIGN] principle 2), for each phase of the program:

1. ``program.outgoing(r, phase)``; each message goes to its receiver's outbound link
   (a withheld notice instead if a scheduled or live fault takes it out);
2. synchronous programs: wait for the expected senders' (r, phase) messages until all
   answered or ``round_deadline`` seconds passed since the wait began; asynchronous ones:
   take the latest message of each expected sender, whatever its round — after waiting,
   up to the same deadline, until none is staler than the program's
   ``max_staleness(r, phase)`` if it declares one (bounded staleness; the semantics of
   both engines are in :mod:`orchestrator.simulator`);
3. ``program.incoming(r, phase, ordered_inbox(received), rng)``.

After the last phase the sample (if any) is appended to the store, and every
``checkpoint_every`` rounds the program state, the RNG state and the next round are
checkpointed (after the samples are made durable), so a restarted node that is configured
again with the same spec resumes exactly there, and loses no stored sample.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from node.config import NODE_SOURCE, HomeData, home_data
from node.faults import scheduled_silent
from node.params import ConfigError
from node.protocol.starling.v1 import peer_pb2
from node.runtime.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from node.runtime.checks import Rejected, check_iterate, check_spec
from node.runtime.inbox import WITHHELD, Inbox
from node.runtime.links import Links, in_peers
from node.runtime.stats import LinkCounters, StatsBook
from node.runtime.store import SampleStore
from node.runtime.transport import ChannelSettings
from node.assemble import build_program, node_rng
from node.samplers.base import NodeProgram, ordered_inbox
from node.spec import DataSpec, NodeSpec

__all__ = [
    "ConfigureResult",
    "NodeRuntime",
    "PreconditionError",
    "RuntimeStatus",
    "spec_fingerprint",
]

log = logging.getLogger("starling.node")

IDLE, CONFIGURED, RUNNING, DONE, FAILED, STOPPED = (
    "idle", "configured", "running", "done", "failed", "stopped",
)  # fmt: skip
FINISHED = (DONE, FAILED, STOPPED)

SAMPLES_FILE = "samples.bin"
CHECKPOINT_FILE = "checkpoint.npz"
SAMPLE_BATCH_BYTES = 4 * 1024 * 1024
"""Samples are streamed in batches of about this size (well under the message limit)."""


class PreconditionError(RuntimeError):
    """The call does not fit the node's current state (e.g. Configure while running)."""


@dataclass(frozen=True)
class ConfigureResult:
    next_round: int
    resumed: bool
    samples_stored: int
    data: DataSpec | None = None
    """The node's own data when the experiment left it to the node (``source: node``)."""


@dataclass(frozen=True)
class RuntimeStatus:
    node_id: str
    experiment: str
    state: str
    round: int
    error: str
    samples_stored: int
    outbound: dict[str, LinkCounters]
    inbound: dict[str, LinkCounters]
    program_metrics: dict[str, float]
    holding: bool = False


def spec_fingerprint(spec: NodeSpec) -> str:
    """What a checkpoint must match to be resumed: everything that shapes the numbers.

    Peer addresses, the deadline, fault schedules, the number of rounds and the checkpoint
    period are left out — a restarted node may come back at another address, and a run
    may be extended.
    """
    fields = asdict(spec)
    for name in (
        "peers", "round_deadline", "link_faults", "inbound_faults", "rounds", "checkpoint_every",
    ):  # fmt: skip
        fields.pop(name)
    text = json.dumps(fields, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def _safe_name(name: str) -> str:
    quoted = urllib.parse.quote(name, safe="")
    return quoted if quoted not in (".", "..") else quoted.replace(".", "%2E")


class NodeRuntime:
    """The node's state machine: idle → configured → running → done | failed | stopped."""

    def __init__(
        self,
        state_dir: str | Path,
        channel: ChannelSettings | None = None,
        *,
        node_id: str = "",
        data: HomeData | None = None,
    ):
        self.state_dir = Path(state_dir)
        self._own_id = node_id
        """The id this node was started as (``--id``); configuring another is refused."""
        self._own_data = data
        """The node's own data (``--shard``/``--data-file``), for ``data.source: node``."""
        self._channel = channel or ChannelSettings()
        self._lock = threading.RLock()
        self._state = IDLE
        self._error = ""
        self._spec: NodeSpec | None = None
        self._program: NodeProgram | None = None
        self._rng = None
        self._senders: frozenset[str] = frozenset()
        self._store: SampleStore | None = None
        self._links: Links | None = None
        self._inbox: Inbox | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._next_round = 0
        self._round = 0
        self._last_checkpoint = -1
        self._consistent = True  # False once a round was abandoned half way
        self._checkpoint_wanted = threading.Event()
        self._checkpoint_done = threading.Condition(self._lock)
        self._hold_at: int | None = None
        self._holding = False
        self._hold_changed = threading.Condition(self._lock)
        self.outbound = StatsBook()
        self.inbound = StatsBook()

    # ------------------------------------------------------------------ control

    def configure(self, spec: NodeSpec, fresh: bool = False) -> ConfigureResult:
        """Build the spec's program; resume from this experiment's checkpoint when it
        matches, unless ``fresh`` (a new run on a node that outlives runs)."""
        if self._own_id and spec.node_id != self._own_id:
            raise ConfigError(
                f"node {self._own_id!r}: asked to run as node {spec.node_id!r}; check the "
                "inventory's addresses"
            )
        own = None
        if spec.data is not None and spec.data.source == NODE_SOURCE:
            spec = replace(spec, data=home_data(spec.data, self._own_data, spec.node_id))
            own = spec.data
        check_spec(spec)
        with self._lock:
            if self._state == RUNNING:
                raise PreconditionError(
                    f"node {self._spec.node_id!r} is running; stop it before configuring"
                )
            rng = node_rng(spec)
            try:
                program = build_program(spec, rng)
            except ConfigError:
                raise
            except (ValueError, TypeError, KeyError) as exc:
                raise ConfigError(
                    f"node {spec.node_id!r}: cannot build its program: {exc}"
                ) from None
            self._release()
            directory = self.state_dir / _safe_name(spec.experiment) / _safe_name(spec.node_id)
            fingerprint = spec_fingerprint(spec)
            checkpoint = load_checkpoint(directory / CHECKPOINT_FILE)
            if fresh and directory.exists():
                # A new run of an experiment this node served before: its collected
                # samples went to that run's results; nothing of it is resumed.
                log.info("starting %s afresh: an earlier run's state is removed", directory)
                shutil.rmtree(directory)
                checkpoint = None
            if checkpoint is not None and checkpoint.fingerprint != fingerprint:
                aside = directory.with_name(
                    f"{directory.name}.replaced-{time.strftime('%Y%m%d-%H%M%S')}"
                )
                log.warning(
                    "state in %s belongs to a different spec; moved to %s", directory, aside
                )
                shutil.move(str(directory), str(aside))
                checkpoint = None
            directory.mkdir(parents=True, exist_ok=True)
            store = SampleStore(directory / SAMPLES_FILE)
            next_round = 0
            if checkpoint is not None:
                program.restore(checkpoint.program_state)
                rng.bit_generator.state = checkpoint.rng_state
                next_round = checkpoint.next_round
                store.truncate(checkpoint.samples)
            else:
                store.truncate(0)  # samples without a checkpoint cannot be continued
            self._spec, self._program, self._rng, self._store = spec, program, rng, store
            self._directory = directory
            self._fingerprint = fingerprint
            self._senders = in_peers(spec)
            self._next_round = self._round = next_round
            self._last_checkpoint = next_round if checkpoint is not None else -1
            self._consistent = True
            self._hold_at, self._holding = None, False
            self._stop.clear()
            self.outbound.reset()
            self.inbound.reset()
            for peer in sorted(self._senders):
                self.inbound.ensure(peer)  # listed from the start, even if never heard
            self._inbox = Inbox(self.inbound, next_round, synchronous=program.synchronous)
            self._links = Links(spec, self.outbound, self._channel)
            self._state, self._error = CONFIGURED, ""
            log.info(
                "configured %s/%s (%s, role %s): %s at round %d, %d samples stored",
                spec.experiment, spec.node_id, spec.algorithm, spec.role,
                "resuming" if checkpoint is not None else "starting", next_round, len(store),
            )  # fmt: skip
            return ConfigureResult(next_round, checkpoint is not None, len(store), own)

    def start(self) -> None:
        with self._lock:
            if self._state != CONFIGURED:
                raise PreconditionError(
                    f"node cannot start while {self._state}"
                    + (" (configure it again)" if self._state in FINISHED else "")
                )
            self._state = RUNNING
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="round-loop", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the round loop at once; its last checkpoint stands."""
        with self._lock:
            thread = self._thread
            self._stop.set()
            self._hold_changed.notify_all()
            if self._inbox is not None:
                self._inbox.interrupt()
        if thread is not None:
            thread.join(timeout)
        with self._lock:
            if self._state in (RUNNING, CONFIGURED):
                self._state = STOPPED
            if self._store is not None:
                self._store.sync()
                self._store.wake()

    def shutdown(self) -> None:
        """Stop, make the store durable, close links (the process is about to exit)."""
        self.stop()
        with self._lock:
            self._release()

    def _release(self) -> None:
        if self._links is not None:
            self._links.close()
            self._links = None
        if self._store is not None:
            self._store.close()

    @property
    def configured(self) -> bool:
        """Whether the node has a spec (and so can take its peers' iterates)."""
        return self._spec is not None

    def status(self) -> RuntimeStatus:
        with self._lock:
            spec = self._spec
            return RuntimeStatus(
                node_id=spec.node_id if spec else "",
                experiment=spec.experiment if spec else "",
                state=self._state,
                round=self._round,
                error=self._error,
                samples_stored=len(self._store) if self._store is not None else 0,
                outbound=self.outbound.snapshot(),
                inbound=self.inbound.snapshot(),
                program_metrics=(
                    {k: float(v) for k, v in self._program.metrics().items()}
                    if self._program is not None
                    else {}
                ),
                holding=self._holding,
            )

    def set_link(
        self,
        receiver: str,
        up: bool | None = None,
        drop: float | None = None,
        delay_ms: float | None = None,
    ) -> None:
        if drop is not None and not 0.0 <= drop <= 1.0:
            raise ConfigError(f"drop: must be a probability in [0, 1], got {drop!r}")
        if delay_ms is not None and not delay_ms >= 0.0:
            raise ConfigError(f"delay_ms: must be >= 0, got {delay_ms!r}")
        with self._lock:
            links = self._links
            if links is None:
                raise PreconditionError("node is not configured; it has no links yet")
            if receiver != "*" and not links.knows(receiver):
                raise ConfigError(
                    f"receiver: {receiver!r} is not an out-peer of node {self._spec.node_id!r}"
                )
        links.set_state(receiver, up=up, drop=drop, delay_ms=delay_ms)
        log.info("link to %s set: up=%s drop=%s delay_ms=%s", receiver, up, drop, delay_ms)

    def hold(self, round_index: int | None) -> None:
        """Run the rounds before ``round_index``, then wait before it until released
        (``None``), stopped or killed. A scheduled crash uses it to land at its round."""
        with self._lock:
            if self._program is None:
                raise PreconditionError("node is not configured; there is no round to hold at")
            self._hold_at = round_index
            self._hold_changed.notify_all()
        log.info("hold: %s", "released" if round_index is None else f"before round {round_index}")

    def _wait_while_held(self, round_index: int) -> None:
        with self._lock:
            while (
                self._hold_at is not None
                and round_index >= self._hold_at
                and not self._stop.is_set()
            ):
                self._holding = True
                self._hold_changed.wait(0.5)
            self._holding = False

    def checkpoint(self, timeout: float | None = None) -> int:
        """Write a checkpoint now (at the next round boundary if running); its next round."""
        with self._lock:
            if self._program is None:
                raise PreconditionError("node is not configured; nothing to checkpoint")
            if self._state != RUNNING:
                if self._consistent:
                    self._write_checkpoint()
                return max(self._last_checkpoint, 0)
            self._checkpoint_wanted.set()
            limit = timeout if timeout is not None else self._round_budget() + 5.0
            self._checkpoint_done.wait_for(
                lambda: not self._checkpoint_wanted.is_set() or self._state != RUNNING, limit
            )
            return max(self._last_checkpoint, 0)

    def _round_budget(self) -> float:
        spec, program = self._spec, self._program
        return spec.round_deadline * (program.phases if program else 1)

    # ------------------------------------------------------------------ peers

    def receive(self, iterate: peer_pb2.Iterate) -> str:
        """File one incoming iterate; returns the outcome (``received``, ``late`` ...)."""
        with self._lock:
            spec, program, inbox = self._spec, self._program, self._inbox
        sender = iterate.sender or "<anonymous>"
        try:
            message = check_iterate(iterate, spec, program, self._senders)
        except Rejected as exc:
            count = self.inbound.add(sender, "rejected", error=str(exc))
            if count <= 10 or count % 1000 == 0:  # a flood of bad messages must not flood logs
                log.warning("rejected (%d from %r so far): %s", count, sender, exc)
            return "rejected"
        outcome = inbox.deliver(
            sender,
            int(iterate.round),
            int(iterate.phase),
            WITHHELD if message is None else message,
            resent=iterate.resent,
        )
        if outcome == "stale resend":
            return outcome
        if outcome == "duplicate":
            self.inbound.add(
                sender, "rejected",
                error=f"peer {sender!r}: second message for round {iterate.round} "
                f"phase {iterate.phase}",
            )  # fmt: skip
            return "rejected"
        self.inbound.add(sender, outcome)
        return outcome

    # ------------------------------------------------------------------ samples

    def samples(
        self, offset: int, follow: bool, active: Callable[[], bool] = lambda: True
    ) -> Iterator[list[tuple[int, int, np.ndarray]]]:
        """Batches of (index, round, array) from ``offset``; with ``follow``, until the end."""
        index = max(offset, 0)
        while active():
            with self._lock:
                store, state = self._store, self._state
            if store is None:
                if not follow:
                    return
                time.sleep(0.2)
                continue
            batch = self._read_batch(store, index)
            if batch:
                index += len(batch)
                yield batch
                continue
            if not follow:
                return
            # The state is read before the length: a run marked done has appended its last
            # sample already, so nothing can be missed.
            if state in FINISHED and index >= len(store):
                return
            store.wait_beyond(index, 0.5)

    def _read_batch(self, store: SampleStore, index: int) -> list:
        first = store.read(index, 1)
        if not first:
            return []
        per_sample = max(first[0][2].nbytes, 1)
        count = max(SAMPLE_BATCH_BYTES // per_sample, 1)
        return first + (store.read(index + 1, count - 1) if count > 1 else [])

    # ------------------------------------------------------------------ round loop

    def _run(self) -> None:
        spec, program, rng = self._spec, self._program, self._rng
        store, links, inbox = self._store, self._links, self._inbox
        round_index = self._next_round
        try:
            while round_index < spec.rounds:
                self._round = round_index
                self._wait_while_held(round_index)
                if self._stop.is_set():
                    break
                if not self._run_round(round_index, spec, program, rng, links, inbox):
                    break  # stopped half way through the round
                value = program.sample()
                if value is not None:
                    store.append(round_index, value)
                round_index += 1
                with self._lock:
                    self._next_round = round_index
                    due = round_index % spec.checkpoint_every == 0 or round_index == spec.rounds
                    if due or self._checkpoint_wanted.is_set():
                        self._write_checkpoint()
            with self._lock:
                self._round = round_index
                if round_index >= spec.rounds:
                    self._state = DONE
                    log.info("run finished: %d rounds, %d samples", spec.rounds, len(store))
                elif self._consistent and self._last_checkpoint != round_index:
                    self._write_checkpoint()
        except Exception as exc:  # noqa: BLE001 - the node reports and keeps serving
            with self._lock:
                self._state = FAILED
                self._error = f"round {round_index}: {type(exc).__name__}: {exc}"
            log.exception("round loop failed at round %d", round_index)
        finally:
            with self._lock:
                self._checkpoint_wanted.clear()
                self._checkpoint_done.notify_all()
            store.sync()
            store.wake()

    def _run_round(self, round_index, spec, program, rng, links, inbox) -> bool:
        """One round, every phase; False if a stop interrupted it."""
        self._consistent = False
        for phase in range(program.phases):
            for receiver, message in program.outgoing(round_index, phase).items():
                links.send(round_index, phase, receiver, message)
            expected = program.expected_senders(round_index, phase)
            if program.synchronous:
                expected = [s for s in expected if not scheduled_silent(spec, s, round_index)]
                deadline = time.monotonic() + spec.round_deadline
                received = inbox.wait(round_index, phase, expected, deadline)
            else:
                bound = program.max_staleness(round_index, phase)
                if bound is None:
                    received = inbox.latest(expected, round_index)
                else:
                    deadline = time.monotonic() + spec.round_deadline
                    received = inbox.wait_latest(expected, round_index, bound, deadline)
            if self._stop.is_set():
                return False
            program.incoming(round_index, phase, ordered_inbox(received), rng)
        self._consistent = True
        return True

    def _write_checkpoint(self) -> None:
        """Called with the lock held, at a round boundary."""
        self._store.sync()  # samples first: a checkpoint never counts a sample not on disk
        save_checkpoint(
            self._directory / CHECKPOINT_FILE,
            Checkpoint(
                next_round=self._next_round,
                samples=len(self._store),
                rng_state=self._rng.bit_generator.state,
                program_state=self._program.state(),
                fingerprint=self._fingerprint,
            ),
        )
        self._last_checkpoint = self._next_round
        self._checkpoint_wanted.clear()
        self._checkpoint_done.notify_all()
