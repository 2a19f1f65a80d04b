"""One configured run of a node: everything ``configure`` builds, in one object.

A :class:`Run` holds the spec, the program and its generator, the sample store, the durable
checkpoint and the per-round resume slots (:mod:`starling.node.runtime.resume`), the network
transport (links, inbox, their counters) and where the round loop stands. ``NodeRuntime.configure``
builds a new one with :func:`open_run` — resuming from the newest resume point whose spec
fingerprint matches — and drops the old one; the runtime itself keeps only the lifecycle.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from starling.node.assemble import build_program, node_rng
from starling.node.faults import ScheduledFaults
from starling.node.params import ConfigError
from starling.node.runtime.archive import run_directory
from starling.node.runtime.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from starling.node.runtime.event_loop import NodeLoop
from starling.node.runtime.inbox import Inbox
from starling.node.runtime.network import Links, NetworkTransport
from starling.node.runtime.resume import (
    SLOT_FILES,
    ResumeSlots,
    SendingMark,
    read_sending,
    read_slot,
)
from starling.node.runtime.stats import StatsBook
from starling.node.runtime.store import SampleStore
from starling.node.runtime.timing import CHECKPOINT_BUCKETS, ROUND_BUCKETS, Tally
from starling.node.runtime.transport import ChannelSettings
from starling.node.samplers.base import NodeProgram
from starling.node.spec import NodeSpec

__all__ = [
    "CHECKPOINT_FILE",
    "DURABLE_SECONDS",
    "EARLIER_SUFFIX",
    "SAMPLES_FILE",
    "Run",
    "announce",
    "build",
    "open_run",
    "spec_fingerprint",
]

log = logging.getLogger("starling.node")

SAMPLES_FILE = "samples.bin"
CHECKPOINT_FILE = "checkpoint.npz"
DURABLE_SECONDS = 1.0
"""Group commit: a durable (fsynced) checkpoint at least this often while rounds run, however
large ``checkpoint_every`` is — what a power loss can cost, in seconds of rounds."""


def spec_fingerprint(spec: NodeSpec) -> str:
    """What a checkpoint must match to be resumed: everything that shapes the numbers.

    Peer addresses, the deadline, fault schedules, the number of rounds and the checkpoint
    period are left out — a restarted node may come back at another address, and a run
    may be extended.
    """
    fields = asdict(spec)
    for name in (
        "peers",
        "round_deadline",
        "link_faults",
        "inbound_faults",
        "rounds",
        "checkpoint_every",
    ):
        fields.pop(name)
    text = json.dumps(fields, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def build(spec: NodeSpec) -> tuple[NodeProgram, np.random.Generator]:
    """The spec's program and its generator; a spec it cannot be built from is a
    :class:`ConfigError` naming the node."""
    rng = node_rng(spec)
    try:
        program = build_program(spec, rng)
    except ConfigError:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        raise ConfigError(f"node {spec.node_id!r}: cannot build its program: {exc}") from None
    return program, rng


@dataclass
class Run:
    """A configured run. The round loop owns ``program``/``rng`` while it runs; the other
    fields that change (``next_round``, ``round``, ``consistent``, ``last_checkpoint``) are
    read and written under the runtime's lock."""

    spec: NodeSpec
    program: NodeProgram
    rng: np.random.Generator
    store: SampleStore
    directory: Path
    fingerprint: str
    senders: frozenset[str]
    faults: ScheduledFaults
    outbound: StatsBook
    inbound: StatsBook
    transport: NetworkTransport
    resumed: bool
    next_round: int
    """The first round not yet run (what a checkpoint written now would resume at)."""
    round: int
    """The round the loop is in (or stopped before)."""
    last_checkpoint: int
    """``next_round`` of the last checkpoint written, −1 if none."""
    slots: ResumeSlots | None = None
    """The per-round resume point (written after every round, never fsynced)."""
    sending: SendingMark | None = None
    """The latest round whose messages this process began to send (for its successor)."""
    durable_at: float = 0.0
    """``time.monotonic()`` of the last durable checkpoint (or of the run's opening)."""
    consistent: bool = True
    """False while a round is half done (a checkpoint then would not be a round boundary)."""
    round_times: Tally = field(default_factory=lambda: Tally(ROUND_BUCKETS))
    """Seconds of each round this process ran (the metrics endpoint reads it)."""
    checkpoint_times: Tally = field(default_factory=lambda: Tally(CHECKPOINT_BUCKETS))
    """Seconds of each checkpoint written, store sync included."""
    finished: tuple[int, np.ndarray | None, Checkpoint] | None = None
    """The last finished round's sample and resume point, until written
    (:meth:`finish_round`, :meth:`persist_finished`)."""

    @property
    def links(self) -> Links:
        return self.transport.links

    @property
    def inbox(self) -> Inbox:
        return self.transport.inbox

    def round_budget(self) -> float:
        """The longest one round may wait on the network: a deadline per phase."""
        return self.spec.round_deadline * self.program.phases

    def _here(self) -> Checkpoint:
        return Checkpoint(
            next_round=self.next_round,
            samples=len(self.store),
            rng_state=dict(self.rng.bit_generator.state),
            program_state=self.program.state(),
            fingerprint=self.fingerprint,
        )

    def finish_round(self, round_index: int, sample: np.ndarray | None) -> None:
        """Round ``round_index`` is complete (``next_round`` already past it): take its
        sample and resume point (copies) now, and leave writing them to
        :meth:`persist_finished`, which the round loop calls once the next round's messages
        are on their way, so the disk works while the network does."""
        self.persist_finished()  # normally done already, during this round
        here = self._here()
        if sample is not None:
            here = dataclasses.replace(here, samples=here.samples + 1)
            sample = np.array(sample, dtype=np.float64, copy=True)
        self.finished = (round_index, sample, here)

    def persist_finished(self) -> None:
        """Write the finished round's sample (flushed to the OS), then its resume point (no
        ``fsync``): after a process crash the run resumes from that round, or from the
        one before it if the crash came first; never past a sample that is not stored."""
        if self.finished is None:
            return
        round_index, sample, here = self.finished
        self.finished = None
        if sample is not None:
            self.store.append(round_index, sample)
        if self.slots is not None:
            self.slots.write(here)

    def durable_due(self) -> bool:
        """Whether the group-commit budget (:data:`DURABLE_SECONDS`) has run out."""
        return time.monotonic() - self.durable_at >= DURABLE_SECONDS

    def write_checkpoint(self) -> None:
        """At a round boundary, durably: samples first (fsync), so a checkpoint never counts
        a sample that is not on disk; then the checkpoint file, atomically (fsync, rename,
        fsync of the folder)."""
        started = time.perf_counter()
        self.persist_finished()
        self.store.sync()
        save_checkpoint(self.directory / CHECKPOINT_FILE, self._here())
        self.last_checkpoint = self.next_round
        self.durable_at = time.monotonic()
        self.checkpoint_times.observe(time.perf_counter() - started)

    def close(self) -> None:
        """Close the links (delivering what is queued), the store and the resume slots."""
        self.persist_finished()
        self.links.close()
        self.store.close()
        if self.slots is not None:
            self.slots.close()
        if self.sending is not None:
            self.sending.close()


EARLIER_SUFFIX = ".earlier"
"""What a fresh run's folder keeps the previous run's state under, one run back."""


def open_run(
    spec: NodeSpec,
    program: NodeProgram,
    rng: np.random.Generator,
    state_dir: Path,
    channel: ChannelSettings,
    fresh: bool = False,
    loop: NodeLoop | None = None,
) -> Run:
    """The run of ``spec`` under ``state_dir``, resumed from its checkpoint if that was
    written for the same spec (one for another spec is moved aside, never deleted) —
    unless ``fresh``: then the run starts at 0, and an earlier run's state is set aside
    as ``<folder>.earlier`` (replacing an older one there), so a repeated start never
    deletes samples of the run before it that were perhaps not collected. ``loop``: the
    node's event loop, where its links run (None: a loop of their own)."""
    directory = run_directory(state_dir, spec.experiment, spec.node_id)
    fingerprint = spec_fingerprint(spec)
    found = resume_points(directory)
    if fresh and directory.exists():
        earlier = directory.with_name(directory.name + EARLIER_SUFFIX)
        log.info("starting %s afresh: the earlier run's state is kept in %s", directory, earlier)
        if earlier.exists():
            shutil.rmtree(earlier)
        directory.rename(earlier)
        found = []
    if any(point.fingerprint != fingerprint for point in found):
        aside = _move_aside(directory)
        log.warning("state in %s belongs to a different spec; moved to %s", directory, aside)
        found = []
    directory.mkdir(parents=True, exist_ok=True)
    store = SampleStore(directory / SAMPLES_FILE)
    # The newest point whose samples the store still holds: after a process crash that is
    # the last round's resume slot; after a power loss (slots and samples not fsynced) it
    # may be an older slot or the durable checkpoint.
    held = [point for point in found if point.samples <= len(store)]
    if len(held) < len(found):
        log.warning(
            "%s: a resume point counts samples the store lost; an older one is used", directory
        )
    checkpoint = held[0] if held else None
    next_round = 0
    if checkpoint is not None:
        program.restore(checkpoint.program_state)
        rng.bit_generator.state = checkpoint.rng_state
        next_round = checkpoint.next_round
        store.truncate(checkpoint.samples)
    else:
        store.truncate(0)  # samples without a checkpoint cannot be continued
    senders = frozenset(spec.in_peers())
    outbound, inbound = StatsBook(), StatsBook()
    for peer in sorted(senders):
        inbound.ensure(peer)  # listed from the start, even if never heard
    inbox = Inbox(inbound, next_round, synchronous=program.synchronous)
    # Rounds the process before this one began to send, which this one sends again.
    began = read_sending(directory) if checkpoint is not None else None
    replay_before = began + 1 if began is not None else 0
    sending = SendingMark(directory)
    links = Links(
        spec, outbound, channel, replay_before=replay_before, mark_sending=sending.mark, loop=loop
    )
    slots = ResumeSlots(directory)
    return Run(
        spec=spec,
        program=program,
        rng=rng,
        store=store,
        directory=directory,
        fingerprint=fingerprint,
        senders=senders,
        faults=ScheduledFaults.of(spec),
        outbound=outbound,
        inbound=inbound,
        transport=NetworkTransport(links, inbox),
        resumed=checkpoint is not None,
        next_round=next_round,
        round=next_round,
        last_checkpoint=next_round if checkpoint is not None else -1,
        slots=slots,
        sending=sending,
        durable_at=time.monotonic(),
    )


REPLACED_INFIX = ".replaced-"
"""A run's folder whose state belongs to another spec is kept beside it as
``<folder>.replaced-<YYYYmmdd-HHMMSS>``, with ``-2``, ``-3`` ... when that name is taken."""


def _move_aside(directory: Path) -> Path:
    """Rename ``directory`` to a name of its own beside it; returns that name.

    Two Configures in one second each moving another spec's state aside once shared a
    name: the second folder was moved *into* the first (nested), a third failed the
    Configure. A name that is taken (by anything, even an empty folder) is never reused,
    so no earlier state is lost or nested."""
    base = f"{directory.name}{REPLACED_INFIX}{time.strftime('%Y%m%d-%H%M%S')}"
    count = 1
    while True:
        aside = directory.with_name(base if count == 1 else f"{base}-{count}")
        count += 1
        if aside.exists() or aside.is_symlink():
            continue
        try:
            directory.rename(aside)  # a sibling: the same file system, one step
        except OSError:
            if aside.exists() or aside.is_symlink():
                continue  # taken meanwhile
            raise
        return aside


def announce(run: Run) -> None:
    """Log that the node is configured for ``run``, and where it starts."""
    spec = run.spec
    log.info(
        "configured %s/%s (%s, role %s): %s at round %d, %d samples stored",
        spec.experiment,
        spec.node_id,
        spec.algorithm,
        spec.role,
        "resuming" if run.resumed else "starting",
        run.next_round,
        len(run.store),
        extra={"event": "configured", "round": run.next_round},
    )


def resume_points(directory: Path) -> list[Checkpoint]:
    """Every whole resume point of the run in ``directory`` — the durable checkpoint and the
    two resume slots — newest first (by next round; the durable one first on a tie)."""
    points = [load_checkpoint(directory / CHECKPOINT_FILE)]
    points += [read_slot(directory / name) for name in SLOT_FILES]
    found = [point for point in points if point is not None]
    return sorted(found, key=lambda point: -point.next_round)  # stable: durable first
