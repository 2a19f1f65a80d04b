"""One node's runtime: the lifecycle of its runs, their samples and their checkpoints.

The servicers (:mod:`starling.node.runtime.servicers`) translate protobuf to the plain calls here;
nothing in this module touches protobuf except the incoming iterates it validates.
``configure`` builds one :class:`~starling.node.runtime.run.Run` (program, store, links, inbox ...);
``start`` runs its rounds on the node's event loop (:mod:`starling.node.runtime.event_loop`),
beside its outbound links, each round by the round engine
(:func:`starling.node.engine.rounds.round_steps`) over the network transport
(:mod:`starling.node.runtime.network`) — the same round the simulator runs in memory. The
loop awaits each phase's answer from the inbox (:meth:`Inbox.ready
<starling.node.runtime.inbox.Inbox.ready>`, woken by the threads that file the messages
coming in) before the round gathers it, so it never blocks on the network.

After each round its sample and resume point (program and RNG states, next round) are
taken, and written while the next round's messages fly (:meth:`Run.finish_round
<starling.node.runtime.run.Run.finish_round>`; no ``fsync``). A node killed and configured
again with the same spec resumes from the last one written, at most two rounds back, with
no stored sample lost and the same numbers.
Against a power loss, samples are fsynced and a durable checkpoint written every
``checkpoint_every`` rounds and at least every second (:meth:`Run.write_checkpoint`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from starling.node.config import DEFAULT_SCREEN_BOUND, HomeData
from starling.node.engine.rounds import PhaseGather, round_steps
from starling.node.logs import set_context
from starling.node.params import ConfigError
from starling.node.protocol.contract import Configured, NodeState, NodeStatus
from starling.node.protocol.starling.v1 import peer_pb2
from starling.node.runtime.checks import ROUND_WINDOW, admit_spec, check_link_setting
from starling.node.runtime.event_loop import NodeLoop
from starling.node.runtime.inbox import Inbox
from starling.node.runtime.peer_secrets import PeerSecrets
from starling.node.runtime.profiling import run_loop
from starling.node.runtime.receive import count_rejected, receive_at
from starling.node.runtime.run import SAMPLES_FILE, Run, announce, build, open_run, spec_fingerprint
from starling.node.runtime.stats import FaultTally
from starling.node.runtime.status import PreconditionError, run_status
from starling.node.runtime.store import SampleStore
from starling.node.runtime.streaming import Batch, stream_samples
from starling.node.runtime.transport import ChannelSettings
from starling.node.spec import NodeSpec

__all__ = [
    "NodeRuntime",
    "PeerTerms",
    "PreconditionError",
    "SAMPLES_FILE",
    "spec_fingerprint",
]

log = logging.getLogger("starling.node")

INLINE_STEP_SECONDS = 0.05
"""A round's step (the sampler's computation up to a pause, :meth:`NodeRuntime._step`) runs
on the node's loop when the same step of the round before took less; a longer one, and
every step of the first round after a Start, runs on a thread of its own, so that a node
computing for seconds still answers Control, Health and its peers. Control and Health wait
at most about this long behind a step. Handing a step to the thread is not free: a 6 ms
step (D-SGLD, 250 chains × dim 1000, 5-node ring) cost 1.3 ms more CPU per node and round
on a thread than on the loop (two alternations, docs/performance.md)."""

RoundSteps = Generator[PhaseGather, None, bool]
"""A round being driven (:func:`~starling.node.engine.rounds.round_steps`)."""

STOPPED_LOOP_WAIT = 60.0
"""How long a Configure waits for the round loop of a stopped run to end (a round it was
computing when Stop came, which Stop waits for only 10 s) before refusing."""


class PeerTerms(NamedTuple):
    """What a Peer stream is admitted against: the configured run's in-peers, its secrets,
    its experiment and this node's id in it."""

    senders: frozenset[str]
    secrets: PeerSecrets
    experiment: str
    node_id: str


class NodeRuntime:
    """The node's state machine: idle → configured → running → done | failed | stopped."""

    def __init__(
        self,
        state_dir: str | Path,
        channel: ChannelSettings | None = None,
        *,
        node_id: str = "",
        data: HomeData | None = None,
        round_window: int = ROUND_WINDOW,
        data_dir: str | Path | None = None,
        screen_bound: float = DEFAULT_SCREEN_BOUND,
        loop: NodeLoop | None = None,
    ):
        """``loop``: the event loop to run on, its owner's to close (the node server's, which
        serves on it too); by default one of the runtime's own, closed at :meth:`shutdown`."""
        self.state_dir = Path(state_dir)
        self.round_window = round_window
        self.screen_bound = screen_bound
        """Iterates with a value beyond it are refused (:mod:`~starling.node.runtime.screening`)."""
        self._refused_streams = 0
        self._secrets = PeerSecrets()
        self.run_id = ""
        """The orchestrator's id of the configured run (``NodeConfig.run_id``); "" when none
        was given or the node is not configured."""
        self.data_dir = Path(data_dir).resolve() if data_dir else None  # files read only here
        self._own_id = node_id
        """The id this node was started as (``--id``); configuring another is refused."""
        self._own_data = data
        """The node's own data (``--shard``/``--data-file``), for ``data.source: node``."""
        self._channel = channel or ChannelSettings()
        self._lock = threading.RLock()
        self._configuring = threading.Lock()
        self.on_state: Callable[[NodeState], None] | None = None
        """Told each new state, under the lock (health follows it: runtime/standard.py)."""
        self._state = NodeState.IDLE
        self._error = ""
        self._run: Run | None = None
        self._owns_loop = loop is None
        self._loop = loop or NodeLoop()
        """Where the round loop and the outbound links run."""
        self._round_loop: concurrent.futures.Future[None] | None = None
        """The round loop of the last Start, as other threads see it (done once it ended)."""
        self._stop = threading.Event()
        self._looping = False
        """From Start until the round loop's last step (both under the lock)."""
        self._step_seconds: dict[int, float] = {}
        """How long each step of the round loop's last round took, by its position in the
        round (:meth:`_step`)."""
        self._wake = asyncio.Event()
        """The round loop's (an event of the node's loop): set when the phase it awaits may
        be answered, and when Control holds, releases or stops it."""
        self._checkpoint_wanted = threading.Event()
        self._checkpoint_done = threading.Condition(self._lock)
        self._hold_at: int | None = None
        self._holding = False
        self.faults_applied = FaultTally()
        self._door: tuple[Run | None, int] = (None, 0)
        """(run, generation), replaced whole under the lock, read without it (:meth:`receive`)."""

    @property
    def _state(self) -> NodeState:
        return self.state

    @_state.setter
    def _state(self, state: NodeState) -> None:
        previous, self.state = getattr(self, "state", None), state
        if state != previous and self.on_state is not None:
            self.on_state(state)

    @property
    def generation(self) -> int:
        """Configurations so far: a peer stream admitted under an earlier one is gated again."""
        return self._door[1]

    @property
    def current_run(self) -> Run | None:
        """The configured run (None before one): what the metrics endpoint reads."""
        return self._run

    # ------------------------------------------------------------------ control

    def configure(
        self,
        spec: NodeSpec,
        fresh: bool = False,
        peer_secret: str | PeerSecrets = "",
        run_id: str = "",
    ) -> Configured:
        """Build the spec's program; resume from this experiment's checkpoint when it
        matches, unless ``fresh`` (a new run on a node that outlives runs). Streams prove
        the run's secrets both ways (:mod:`~starling.node.runtime.peer_secrets`); later
        Control calls must name ``run_id`` (the orchestrator's id of the run)."""
        secrets = PeerSecrets.of(peer_secret)
        spec, own = admit_spec(
            spec,
            own_id=self._own_id,
            own_data=self._own_data,
            data_dir=self.data_dir,
            secret_needed=not secrets and not self._channel.secured,
        )
        with self._configuring:  # one at a time; Status answers meanwhile (not _lock)
            run = self._configure(spec, fresh, secrets, run_id)
        return Configured(run.next_round, run.resumed, len(run.store), own)

    def _configure(self, spec: NodeSpec, fresh: bool, secrets: PeerSecrets, run_id: str) -> Run:
        with self._lock:
            self._refuse_while_running()
            stopped = self._round_loop
        self._await_stopped_loop(stopped)
        program, rng = build(spec)  # loading a large shard takes seconds
        with self._lock:
            self._refuse_while_running()
            # Not configured until the new run is open: Start is refused, peers put off.
            old, self._run, self._state = self._run, None, NodeState.IDLE
            self._door = (None, self.generation)
            self.run_id = ""
        # Closing links, scanning the store, moving folders take time: never under the lock.
        if old is not None:
            old.close()
        channel = self._channel.speaking_as(spec.node_id, spec.experiment, secrets)
        try:
            run = open_run(spec, program, rng, self.state_dir, channel, fresh, self._loop)
        except Exception as exc:
            with self._lock:
                self._error = f"configure failed: {type(exc).__name__}: {exc}"
            raise
        run.inbox.on_answer = self._loop.waker(self._wake)
        with self._lock:
            self._run = run
            self._door = (run, self.generation + 1)
            self._secrets = secrets
            self.run_id = run_id
            self._hold_at, self._holding = None, False
            self._stop.clear()
            self._state, self._error = NodeState.CONFIGURED, ""
            secrets.redact()
            set_context(node=spec.node_id, experiment=spec.experiment)
            announce(run)
            return run

    def _await_stopped_loop(self, rounds: concurrent.futures.Future[None] | None) -> None:
        """Wait for a stopped run's round loop to end before its run is replaced. Stop waits
        for it a while, but a round's computation is not interrupted: a loop still computing
        went on after a Configure (which clears the stop) into its closed run and marked
        the new run failed. PreconditionError if it has not ended in
        :data:`STOPPED_LOOP_WAIT` seconds (nothing is changed then)."""
        if rounds is None or rounds.done():
            return
        concurrent.futures.wait([rounds], STOPPED_LOOP_WAIT)
        if not rounds.done():
            run = self._run
            where = f"round {run.round} of run {run.spec.experiment!r}" if run else "a round"
            raise PreconditionError(
                f"node is still computing {where}, which it was stopped in; configure it "
                "again once that round has ended"
            )

    def _refuse_while_running(self) -> None:
        if self._state == NodeState.RUNNING and self._run is not None:
            raise PreconditionError(
                f"node {self._run.spec.node_id!r} is running; stop it before configuring"
            )

    def start(self) -> None:
        with self._lock:
            run = self._run
            if self._state != NodeState.CONFIGURED or run is None:
                raise PreconditionError(
                    f"node cannot start while {self._state}"
                    + (" (configure it again)" if self._state.finished else "")
                )
            self._state = NodeState.RUNNING
            self._stop.clear()
            self._looping = True
            self._step_seconds = {}  # the first round computes off the loop
            self._round_loop = self._loop.submit(run_loop(self._rounds, run))

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the round loop at once; its last checkpoint stands. A round's computation is
        not interrupted: if the loop has not ended within ``timeout`` seconds, the node is
        ``stopping`` until it has (its store may still take that round's sample), then
        ``stopped`` (the loop's last step, :meth:`_rounds`)."""
        with self._lock:
            rounds, run = self._round_loop, self._run
            self._stop.set()
            if run is not None:
                run.inbox.interrupt()
        self._loop.call(self._wake.set)
        if rounds is not None:
            concurrent.futures.wait([rounds], timeout)
        with self._lock:
            if self._state in (NodeState.RUNNING, NodeState.CONFIGURED, NodeState.STOPPING):
                computing = self._looping
                self._state = NodeState.STOPPING if computing else NodeState.STOPPED
                if computing and run is not None:
                    log.info(
                        "stopping: round %d is still computing; stopped once it returns",
                        run.round,
                        extra={"event": "stopping", "round": run.round},
                    )
            if run is not None:
                run.store.sync()
                run.store.wake()

    def shutdown(self, stop_wait: float = 10.0) -> None:
        """Stop (waiting up to ``stop_wait`` seconds for the round loop, as :meth:`stop`),
        make the store durable, close links (the process is about to exit); close the loop
        if it is the runtime's own."""
        self.stop(stop_wait)
        with self._lock:
            run = self._run
        # Not under the lock: closing the links waits for their tasks on the loop, where
        # the Peer streams take the lock too.
        if run is not None:
            run.close()
        if self._owns_loop:
            self._loop.close()

    @property
    def loop(self) -> NodeLoop:
        """The node's event loop (:mod:`~starling.node.runtime.event_loop`)."""
        return self._loop

    @property
    def configured(self) -> bool:
        """Whether the node has a spec (and so can take its peers' iterates)."""
        return self._run is not None

    def status(self) -> NodeStatus:
        """The status of the node and its run; the gate's denials are the servicer's to add."""
        with self._lock:
            return run_status(
                self._run, self._state, self._error, self._holding, self._refused_streams
            )

    def note_refused_stream(self) -> None:
        """Count an inbound peer stream refused for want of capacity."""
        with self._lock:
            self._refused_streams += 1

    def peer_terms(self) -> PeerTerms | None:
        """What a Peer stream is admitted against now; None before a configuration."""
        with self._lock:
            run = self._run
            if run is None:
                return None
            return PeerTerms(run.senders, self._secrets, run.spec.experiment, run.spec.node_id)

    def set_peer_down(self, peer: str, down: bool) -> None:
        """Stop (``down``) or resume waiting for the in-peer ``peer``: the orchestrator
        declared it down, or it is back."""
        with self._lock:
            run = self._run
            if run is None:
                raise PreconditionError("node is not configured; it has no peers yet")
            if peer not in run.senders:
                raise ConfigError(f"peer: {peer!r} is not an in-peer of node {run.spec.node_id!r}")
        run.inbox.set_down(peer, down)
        self.faults_applied.add("peer_down" if down else "peer_up")
        log.info(
            "peer %s %s",
            peer,
            "declared down: not waited for" if down else "back up",
            extra={"event": "peer_down" if down else "peer_up", "peer": peer},
        )

    def set_link(
        self,
        receiver: str,
        up: bool | None = None,
        drop: float | None = None,
        delay_ms: float | None = None,
    ) -> None:
        check_link_setting(drop, delay_ms)
        with self._lock:
            run = self._run
            if run is None:
                raise PreconditionError("node is not configured; it has no links yet")
            if receiver != "*" and not run.links.knows(receiver):
                raise ConfigError(
                    f"receiver: {receiver!r} is not an out-peer of node {run.spec.node_id!r}"
                )
        run.links.set_state(receiver, up=up, drop=drop, delay_ms=delay_ms)
        self.faults_applied.link_change(up, drop, delay_ms)
        log.info(
            "link to %s set: up=%s drop=%s delay_ms=%s",
            receiver,
            up,
            drop,
            delay_ms,
            extra={"event": "link_set", "peer": receiver},
        )

    def hold(self, round_index: int | None) -> None:
        """Run the rounds before ``round_index``, then wait before it until released
        (``None``), stopped or killed. A scheduled crash uses it to land at its round."""
        with self._lock:
            if self._run is None:
                raise PreconditionError("node is not configured; there is no round to hold at")
            self._hold_at = round_index
        self._loop.call(self._wake.set)
        if round_index is not None:
            self.faults_applied.add("hold")
        log.info(
            "hold: %s",
            "released" if round_index is None else f"before round {round_index}",
            extra={"event": "hold", "round": round_index},
        )

    async def _wait_while_held(self, run: Run, round_index: int) -> None:
        """Before ``round_index``: wait while Control holds the run there (until released
        or stopped), every round before it stored."""
        while True:
            self._wake.clear()
            with self._lock:
                if self._hold_at is None or round_index < self._hold_at or self._stop.is_set():
                    self._holding = False
                    return
                if not self._holding:
                    run.persist_finished()  # a held node has stored every round before it
                self._holding = True
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.5)

    def checkpoint(self, timeout: float | None = None) -> int:
        """Write a checkpoint now (at the next round boundary if running); its next round."""
        with self._lock:
            run = self._run
            if run is None:
                raise PreconditionError("node is not configured; nothing to checkpoint")
            if self._state != NodeState.RUNNING or self._holding:  # at a boundary: now
                if run.consistent:
                    self._write_checkpoint(run)
                return max(run.last_checkpoint, 0)
            self._checkpoint_wanted.set()
            limit = timeout if timeout is not None else run.round_budget() + 5.0
            self._checkpoint_done.wait_for(
                lambda: not self._checkpoint_wanted.is_set() or self._state != NodeState.RUNNING,
                limit,
            )
            return max(run.last_checkpoint, 0)

    def _write_checkpoint(self, run: Run) -> None:
        """Called with the lock held, at a round boundary."""
        run.write_checkpoint()
        self._checkpoint_wanted.clear()
        self._checkpoint_done.notify_all()

    def _write_checkpoint_locked(self, run: Run) -> None:
        """:meth:`_write_checkpoint`, taking the lock (on the node loop's disk executor)."""
        with self._lock:
            self._write_checkpoint(run)

    # ------------------------------------------------------------------ peers

    def receive(
        self,
        iterate: peer_pb2.Iterate,
        stream_sender: str | None = None,
        generation: int = -1,
        payloads: Sequence[memoryview] | None = None,
    ) -> str:
        """File one iterate of a stream admitted under configuration ``generation``
        (:func:`~starling.node.runtime.receive.receive_at`: no lock is taken); ``payloads``:
        its tensors' bytes if read out by hand (:class:`~starling.node.protocol.wire.Arrived`)."""
        return receive_at(
            self._door,
            iterate,
            self.round_window,
            stream_sender,
            generation,
            self.screen_bound,
            payloads,
        )

    def reject(self, sender: str, reason: str) -> None:
        """Count a message of the admitted ``sender`` that could not even be read (its
        parts would not join) as rejected on its link."""
        run = self._door[0]
        if run is not None:
            count_rejected(run, sender, reason)

    # ------------------------------------------------------------------ samples

    def samples(
        self, offset: int, follow: bool, active: Callable[[], bool] = lambda: True
    ) -> Iterator[Batch]:
        """Batches of (index, round, array) from ``offset``; with ``follow``, until the end."""
        return stream_samples(self._current_store, offset, follow, active)

    def _current_store(self) -> tuple[SampleStore | None, NodeState]:
        with self._lock:
            return (self._run.store if self._run is not None else None), self._state

    # ------------------------------------------------------------------ round loop

    async def _round(self, run: Run, round_index: int) -> bool:
        """One round by the round engine (:func:`~starling.node.engine.rounds.round_steps`):
        after each phase's sends, await the inbox's answer for the gather the round yielded
        there, or the phase's deadline (``round_deadline`` seconds), then let the round
        gather; False if stopped half way. The round's own gathers are given a deadline of
        "now" (``round_deadline`` 0), so they take what is there and never block."""
        steps = round_steps(
            run.program, round_index, run.transport, run.rng, run.faults, 0.0, self._stop.is_set
        )
        first = True
        for position in itertools.count():
            gather, finished = await self._step(steps, position)
            if gather is None:
                return finished
            if first:  # the links write the first messages while the disk takes the last round
                first = False
                await asyncio.sleep(0)
                run.persist_finished()
            deadline = time.monotonic() + run.spec.round_deadline
            await self._answered(run.inbox, round_index, gather, deadline)
        raise AssertionError("unreachable: a round ends in its steps")  # pragma: no cover

    async def _step(self, steps: RoundSteps, position: int) -> tuple[PhaseGather | None, bool]:
        """The round's step at ``position`` (0: up to its first pause), to its next pause:
        ``(what the pause gathers, False)``, or ``(None, whether the round ended)`` once it
        is over. On the loop when the same step of the round before took under
        :data:`INLINE_STEP_SECONDS`; otherwise (so in the first round after each Start) on
        a thread of its own (:meth:`NodeLoop.computing`), so that the server, on this loop
        too, keeps answering Control, Health and the peers while a long step computes."""
        started = time.perf_counter()
        if self._step_seconds.get(position, math.inf) < INLINE_STEP_SECONDS:
            outcome = _advance(steps)
        else:
            outcome = await self._loop.computing(_advance, steps)
        self._step_seconds[position] = time.perf_counter() - started
        return outcome

    async def _answered(
        self, inbox: Inbox, round_index: int, gather: PhaseGather, deadline: float
    ) -> None:
        """Until the inbox can answer ``gather`` (:meth:`Inbox.ready
        <starling.node.runtime.inbox.Inbox.ready>`), ``deadline`` (a ``time.monotonic()``
        value) passes or Stop came."""
        loop = asyncio.get_running_loop()
        while True:
            self._wake.clear()  # before asking: an answer filed after it sets it again
            if self._stop.is_set() or inbox.ready(
                round_index, gather.phase, gather.expected, gather.wait
            ):
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            timer = loop.call_later(remaining, self._wake.set)
            try:
                await self._wake.wait()
            finally:
                timer.cancel()

    async def _rounds(self, run: Run) -> None:
        """The round loop, on the node's event loop, from Start until the run is done,
        stopped or failed."""
        spec, program, store = run.spec, run.program, run.store
        round_index = run.next_round
        try:
            while round_index < spec.rounds:
                run.round = round_index
                await self._wait_while_held(run, round_index)
                if self._stop.is_set():
                    break
                run.consistent = False
                started = time.perf_counter()
                if not await self._round(run, round_index):
                    break  # stopped half way through the round
                run.consistent = True
                run.round_times.observe(time.perf_counter() - started)
                with self._lock:
                    run.next_round = round_index + 1
                    run.finish_round(round_index, program.sample())
                    round_index += 1
                    due = round_index % spec.checkpoint_every == 0 or round_index == spec.rounds
                    durable = due or run.durable_due() or self._checkpoint_wanted.is_set()
                if durable:  # fsyncs off the loop: the links write meanwhile
                    await self._loop.on_disk(self._write_checkpoint_locked, run)
            with self._lock:
                run.persist_finished()
                run.round = round_index
                if round_index >= spec.rounds:
                    self._state = NodeState.DONE
                    log.info(
                        "run finished: %d rounds, %d samples",
                        spec.rounds,
                        len(store),
                        extra={"event": "run_finished", "round": round_index},
                    )
                elif run.consistent and run.last_checkpoint != round_index:
                    self._write_checkpoint(run)
        except Exception as exc:  # noqa: BLE001 - the node reports and keeps serving
            with self._lock:
                self._state = NodeState.FAILED
                self._error = f"round {round_index}: {type(exc).__name__}: {exc}"
            log.exception(
                "round loop failed at round %d",
                round_index,
                extra={"event": "round_loop_failed", "round": round_index},
            )
        finally:
            try:
                with self._lock:
                    try:
                        run.persist_finished()  # the last finished round, whatever came after
                    except Exception:  # noqa: BLE001 - reported, and the node keeps serving
                        log.exception("could not store the last finished round")
                    self._checkpoint_wanted.clear()
                    self._checkpoint_done.notify_all()
                store.sync()
                store.wake()
            finally:
                with self._lock:
                    if self._state == NodeState.STOPPING:
                        self._state = NodeState.STOPPED  # the round Stop found is over
                        log.info(
                            "stopped: the round a Stop found computing is over",
                            extra={"event": "stopped_after_round", "round": run.round},
                        )
                    self._looping = False


def _advance(steps: RoundSteps) -> tuple[PhaseGather | None, bool]:
    """One step of a round (:meth:`NodeRuntime._step`), its end given as a value: a
    ``StopIteration`` cannot cross a future."""
    try:
        return next(steps), False
    except StopIteration as done:
        return None, bool(done.value)
