"""A measured prototype: a Starling node's round with everything on one ``grpc.aio`` loop.

Issue 32 asked whether a node whose links, inbox and round loop share one event loop would
beat the threaded node on two cores. The first prototype (docs/performance.md, "A node on
``grpc.aio``") kept the round loop on a thread of its own; this one does not. Each process
of the ring runs one asyncio loop, and on it the node's own pieces, unchanged:

* the round loop — :func:`~starling.node.engine.rounds.round_steps` on a
  :class:`~starling.node.runtime.run.Run` as the node opens one (its program built by the
  node's :func:`~starling.node.runtime.run.build` from the spec the orchestrator would give
  it, its inbox, books, sample store, resume slots and sending mark), driven phase by
  phase: the sends a step hands over are written to the streams after it, and the next
  step runs once the inbox can answer the gather the round yielded
  (:meth:`~starling.node.runtime.inbox.Inbox.ready`) or its deadline passed, so the
  inbox's ``wait`` inside it returns at once;
* every message out as a link prepares one: checked finite and encoded once for all
  receivers (:class:`~starling.node.runtime.feed.SharedIterate`), addressed, counted;
* every message in as the peer door files one: parts joined
  (:class:`~starling.node.protocol.wire.PartJoiner`), then
  :func:`~starling.node.runtime.receive.file_iterate` (checks, inbox, books);
* unless ``storage`` is False, what :meth:`Run.finish_round
  <starling.node.runtime.run.Run.finish_round>` and :meth:`Run.persist_finished
  <starling.node.runtime.run.Run.persist_finished>` keep each round, once the next round's
  first messages are on their way; and, as the ladder's threaded node keeps it with its
  storage out too, the durable checkpoint (fsync) at least once a second, written on the
  loop.

What it leaves out, being a benchmark and not a node: Control, faults, resends and
reconnection, the peer door's secrets and limits, and metrics. It awaits a phase as the
node does, but has run synchronous programs only. Its nodes store the simulator's samples
bit for bit (``tests/test_loop_node_prototype.py``).
:mod:`benchmarks.ladder` runs it as three rungs beside the threaded node's.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

from benchmarks.raw_ring import _METHOD, _OPTIONS, RoundMeter, node_report
from starling.node.engine.rounds import round_steps
from starling.node.engine.transport import Gather
from starling.node.faults import ScheduledFaults
from starling.node.messages import Message
from starling.node.protocol import MAX_MESSAGE_BYTES
from starling.node.protocol.wire import PartJoiner
from starling.node.runtime.checks import ROUND_WINDOW
from starling.node.runtime.feed import SharedIterate
from starling.node.runtime.inbox import Inbox
from starling.node.runtime.network import NetworkTransport
from starling.node.runtime.receive import file_iterate
from starling.node.runtime.resume import ResumeSlots, SendingMark
from starling.node.runtime.run import SAMPLES_FILE, Run, build, spec_fingerprint
from starling.node.runtime.stats import StatsBook
from starling.node.runtime.store import SampleStore

__all__ = ["loop_node"]


def loop_node(
    index: int,
    nodes: int,
    rounds: int,
    payload: int,
    pipe,
    storage: bool = True,
    experiment: dict | None = None,
    folder: str | None = None,
    threaded_receive: bool = False,
) -> None:
    """One process of the ring (:func:`benchmarks.raw_ring.ring_stats`'s ``node``, bound
    with :func:`functools.partial`): ``payload`` is unused, the program's own messages are
    sent. ``storage``: keep what a node keeps each round; ``experiment``: keyword arguments
    for :func:`benchmarks.starling_ring.ring_experiment` beyond the ring's size and length
    (default: the first row's one chain at dim 2, D-ADMMS); ``folder``: where node ``i``
    keeps its run, in ``folder/i`` (default: a temporary folder, removed at the end);
    ``threaded_receive``: serve the incoming streams with grpcio's threaded server instead,
    each message filed on its stream's thread and the loop woken (a port that kept the
    node's server as it is)."""
    settings = experiment if experiment is not None else {"chains": 1, "dim": 2}
    asyncio.run(
        _serve_and_run(index, nodes, rounds, pipe, storage, settings, folder, threaded_receive)
    )


class _LoopTransport:
    """The round engine's :class:`~starling.node.engine.transport.Transport` on the loop:
    ``send`` prepares each message as a link would and leaves its bytes for the driver to
    write; ``gather`` is the node's own (the inbox's), called once the phase is answered."""

    def __init__(self, spec, outbound: StatsBook, sending: SendingMark | None, inbox: Inbox):
        self.spec, self.outbound, self.sending, self.inbox = spec, outbound, sending, inbox
        self.outgoing: list[tuple[str, list[bytes]]] = []
        self._shared: SharedIterate | None = None
        self._network = NetworkTransport(None, inbox)  # its gather alone: no links

    def send(self, round_index: int, phase: int, receiver: str, message: Message) -> None:
        if self.sending is not None:
            self.sending.mark(round_index)
        shared = self._shared
        if shared is None or not shared.serves(message, round_index, phase):
            shared = self._shared = SharedIterate(
                message,
                experiment=self.spec.experiment,
                sender=self.spec.node_id,
                round=round_index,
                phase=phase,
            )
        if not shared.finite():
            raise ValueError("the prototype ring sends finite iterates only")
        parts, _size = shared.body().addressed(receiver)
        self.outbound.add(receiver, "sent", nbytes=message.nbytes)
        self.outgoing.append((receiver, parts))

    def withhold(self, round_index: int, phase: int, receiver: str) -> None:
        raise NotImplementedError("the prototype ring has no faults")

    def gather(
        self, round_index: int, phase: int, expected: Sequence[str], wait: Gather
    ) -> dict[str, Message]:
        return self._network.gather(round_index, phase, expected, wait)


def _opened_run(folder: Path, spec, storage: bool) -> Run:
    """A fresh run of ``spec`` in ``folder``, as :func:`~starling.node.runtime.run.open_run`
    opens one, less its links (this process writes its own streams)."""
    program, rng = build(spec)
    outbound, inbound = StatsBook(), StatsBook()
    senders = frozenset(spec.in_peers())
    for peer in sorted(senders):
        inbound.ensure(peer)
    sending = SendingMark(folder) if storage else None
    inbox = Inbox(inbound, 0, synchronous=program.synchronous)
    return Run(
        spec=spec,
        program=program,
        rng=rng,
        store=SampleStore(folder / SAMPLES_FILE),
        directory=folder,
        fingerprint=spec_fingerprint(spec),
        senders=senders,
        faults=ScheduledFaults.of(spec),
        outbound=outbound,
        inbound=inbound,
        transport=_LoopTransport(spec, outbound, sending, inbox),
        resumed=False,
        next_round=0,
        round=0,
        last_checkpoint=-1,
        slots=ResumeSlots(folder) if storage else None,
        sending=sending,
        durable_at=time.monotonic(),
    )


async def _serve_and_run(
    index: int,
    nodes: int,
    rounds: int,
    pipe,
    storage: bool,
    settings: dict,
    kept: str | None,
    threaded_receive: bool,
) -> None:
    from benchmarks.starling_ring import ring_experiment
    from starling.orchestrator.planning.node_specs import node_specs

    loop = asyncio.get_running_loop()
    specs = node_specs(ring_experiment(nodes, rounds, **settings))
    spec = specs[index]
    position = {other.node_id: other.node_index for other in specs}
    with _run_folder(kept, index) as folder:
        run = _opened_run(folder, spec, storage)
        arrived = asyncio.Event()

        def file(data: bytes, parts: PartJoiner) -> None:
            joined = parts.add_bytes(data, MAX_MESSAGE_BYTES)
            if joined is not None:
                file_iterate(run, joined.iterate, ROUND_WINDOW, None, 0.0, joined.payloads)
                if threaded_receive:
                    loop.call_soon_threadsafe(arrived.set)
                else:
                    arrived.set()

        server, port = await _started_server(file, threaded_receive)
        pipe.send(port)
        ports = await loop.run_in_executor(None, pipe.recv)
        calls, channels = {}, []
        for peer in spec.peers:
            address = f"127.0.0.1:{ports[position[peer]]}"
            channel = grpc.aio.insecure_channel(address, options=_OPTIONS)
            await asyncio.wait_for(channel.channel_ready(), 30)
            calls[peer] = channel.stream_unary(_METHOD)()
            channels.append(channel)
        pipe.send("ready")
        await loop.run_in_executor(None, pipe.recv)  # go
        meter = RoundMeter()
        await _rounds(run, calls, arrived, storage)
        measured = meter.stop()
        run.store.close()
        for closing in (run.slots, run.sending):
            if closing is not None:
                closing.close()
    for call in calls.values():
        await call.done_writing()
        await asyncio.wait_for(call, 30)
    for channel in channels:  # before any server stops: no peer's stream is cut
        await channel.close()
    pipe.send(node_report(measured))
    await loop.run_in_executor(None, pipe.recv)  # everyone finished: safe to stop serving
    stopped = server.stop(0)
    if not threaded_receive:
        await stopped


async def _started_server(file, threaded_receive: bool):
    """The ring's server, started on a free port: (server, port). Each stream's messages
    go to ``file(data, joiner)``, on the loop, or on grpcio's threads if
    ``threaded_receive``."""

    async def exchange(request_iterator, context):
        parts = PartJoiner()
        async for data in request_iterator:
            file(data, parts)
        return b""

    def exchange_on_a_thread(request_iterator, context):
        parts = PartJoiner()
        for data in request_iterator:
            file(data, parts)
        return b""

    method = exchange_on_a_thread if threaded_receive else exchange
    handler = grpc.method_handlers_generic_handler(
        "bench.Ring", {"Push": grpc.stream_unary_rpc_method_handler(method)}
    )
    if threaded_receive:
        server = grpc.server(ThreadPoolExecutor(max_workers=8), options=_OPTIONS)
    else:
        server = grpc.aio.server(options=_OPTIONS)
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    started = server.start()
    if not threaded_receive:
        await started
    return server, port


@contextlib.contextmanager
def _run_folder(kept: str | None, index: int) -> Iterator[Path]:
    """``kept/index`` (made if need be), or a temporary folder removed afterwards."""
    if kept is not None:
        folder = Path(kept) / str(index)
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="loop-node-") as temporary:
        yield Path(temporary)


async def _rounds(run: Run, calls: dict, arrived: asyncio.Event, storage: bool) -> None:
    """The node's round loop (:meth:`NodeRuntime._rounds
    <starling.node.runtime.runtime.NodeRuntime._rounds>`, less Control's hold and stop) as
    a coroutine."""
    loop = asyncio.get_running_loop()
    spec, program, transport = run.spec, run.program, run.transport
    for round_index in range(spec.rounds):
        run.round = round_index
        run.consistent = False
        started = time.perf_counter()
        # The gather's own deadline is now: the driver runs the step only once the phase
        # is answered or its deadline (below) passed, so the inbox's wait never blocks.
        steps = round_steps(program, round_index, transport, run.rng, run.faults, 0.0)
        gather = next(steps)
        await _write(transport, calls)
        if storage:
            run.persist_finished()
        while True:
            deadline = time.monotonic() + spec.round_deadline
            while not run.inbox.ready(round_index, gather.phase, gather.expected, gather.wait):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                arrived.clear()
                timer = loop.call_later(remaining, arrived.set)
                await arrived.wait()
                timer.cancel()
            try:
                gather = next(steps)
            except StopIteration:
                break
            await _write(transport, calls)
        run.consistent = True
        run.round_times.observe(time.perf_counter() - started)
        run.next_round = round_index + 1
        if storage:
            run.finish_round(round_index, program.sample())
        if run.durable_due():
            run.write_checkpoint()
    if storage:
        run.persist_finished()


async def _write(transport, calls) -> None:
    outgoing, transport.outgoing = transport.outgoing, []
    for receiver, parts in outgoing:
        for part in parts:
            await calls[receiver].write(part)
