"""The baseline every communication figure is compared with: a ring in raw grpcio.

N processes; each serves one generic client-streaming method (bytes in, no protobuf), opens
one client stream to each ring neighbour, and per round sends one payload to both and waits
until both neighbours' payloads of that round arrived. No sampler, no bookkeeping: the floor
that gRPC itself sets on this machine for the communication pattern of a synchronous
decentralised sampler. ``python -m benchmarks.raw_ring --nodes 5 --rounds 500 --bytes 16``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import queue
import resource
import struct
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass

import grpc

__all__ = [
    "BYTES",
    "NO_WORK",
    "Codec",
    "Work",
    "ring_stats",
    "ring_time",
    "round_loop",
    "start_time",
]

_METHOD = "/bench.Ring/Push"
_HEADER = struct.Struct("<qI")  # round, sender index
_OPTIONS = [
    ("grpc.max_send_message_length", 512 * 1024 * 1024),
    ("grpc.max_receive_message_length", 512 * 1024 * 1024),
]


@dataclass(frozen=True)
class Work:
    """Pure Python CPU a ring node spends besides gRPC's own, for :mod:`benchmarks.designs`:
    ``round_us`` in its round loop before each round's sends, ``message_us`` on each message
    it sends and on each it receives, in the thread that handles the message. The baseline
    rings run with :data:`NO_WORK`."""

    round_us: float = 0.0
    message_us: float = 0.0

    def round(self) -> None:
        _spin(self.round_us)

    def message(self) -> None:
        _spin(self.message_us)


NO_WORK = Work()


def _spin(microseconds: float) -> None:
    """Run Python for ``microseconds`` of this thread's CPU time (not wall time: a thread
    waiting for the interpreter lock is not working)."""
    if microseconds <= 0:
        return
    end = time.thread_time() + microseconds / 1e6
    while time.thread_time() < end:
        pass


def _encoded(requests: Iterator[bytes], encode, sender: int, receiver: int) -> Iterator:
    for data in requests:
        yield encode(data, sender, receiver)


def _worked(requests: Iterator[bytes], work: Work) -> Iterator[bytes]:
    for request in requests:
        work.message()
        yield request


class _Arrivals:
    """Which (sender, round) payloads have arrived; the round loop waits on it."""

    def __init__(self) -> None:
        self._seen: set[tuple[int, int]] = set()
        self._cond = threading.Condition()

    def add(self, sender: int, round_index: int) -> None:
        with self._cond:
            self._seen.add((sender, round_index))
            self._cond.notify_all()

    def wait(self, senders: list[int], round_index: int) -> None:
        with self._cond:
            self._cond.wait_for(lambda: all((s, round_index) in self._seen for s in senders))
            for s in senders:
                self._seen.discard((s, round_index))


def _arrival(data: bytes) -> tuple[int, int]:
    round_index, sender = _HEADER.unpack_from(data)
    return sender, round_index


@dataclass(frozen=True)
class Codec:
    """How a ring node's messages travel: :data:`BYTES` (the baseline: the round loop's
    bytes as they are, no serialiser), or another form (:mod:`benchmarks.ladder` sends
    Starling's own messages). Module-level functions only: nodes are spawned."""

    encode: Callable[[bytes, int, int], object] | None = None
    """(the round loop's bytes, sender, receiver) -> the request sent; None: the bytes."""
    arrival: Callable[[object], tuple[int, int]] = _arrival
    """A received request -> (sender, round)."""
    request_serializer: Callable | None = None
    request_deserializer: Callable | None = None


BYTES = Codec()


def _node(
    index: int,
    nodes: int,
    rounds: int,
    payload: int,
    pipe,
    work: Work = NO_WORK,
    codec: Codec = BYTES,
) -> None:
    arrivals = _Arrivals()

    def push(request_iterator, context):
        for data in request_iterator:
            if work.message_us:
                work.message()
            arrivals.add(*codec.arrival(data))
        return b""

    handler = grpc.method_handlers_generic_handler(
        "bench.Ring",
        {
            "Push": grpc.stream_unary_rpc_method_handler(
                push, request_deserializer=codec.request_deserializer
            )
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=_OPTIONS)
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    pipe.send(port)
    ports = pipe.recv()
    neighbours = sorted({(index - 1) % nodes, (index + 1) % nodes} - {index})
    outboxes: dict[int, queue.Queue] = {}
    calls = []
    for peer in neighbours:
        channel = grpc.insecure_channel(f"127.0.0.1:{ports[peer]}", options=_OPTIONS)
        grpc.channel_ready_future(channel).result(timeout=30)
        box: queue.Queue = queue.Queue()
        outboxes[peer] = box
        stream = channel.stream_unary(_METHOD, request_serializer=codec.request_serializer)
        requests = iter(box.get, None)
        if codec.encode is not None:
            requests = _encoded(requests, codec.encode, index, peer)
        calls.append(stream.future(_worked(requests, work) if work.message_us else requests))

    def send(message: bytes) -> None:
        for box in outboxes.values():
            box.put(message)

    measured = round_loop(
        index, rounds, payload, pipe, work, send, lambda r: arrivals.wait(neighbours, r)
    )
    for box in outboxes.values():
        box.put(None)
    for call in calls:
        call.result(timeout=30)
    pipe.send(node_report(measured))
    pipe.recv()  # everyone finished: safe to stop serving
    server.stop(0)


def round_loop(
    index: int,
    rounds: int,
    payload: int,
    pipe,
    work: Work,
    send: Callable[[bytes], None],
    wait: Callable[[int], None],
) -> tuple[float, float, tuple[int, int]]:
    """A threaded ring node's rounds, once its streams are open: says ready, waits for go,
    then each round spends ``work``, hands the round's payload to ``send`` and waits for
    the neighbours' (``wait(round)``); :meth:`RoundMeter.stop`'s figures."""
    body = bytes(payload)
    pipe.send("ready")
    pipe.recv()  # go
    meter = RoundMeter()
    for round_index in range(rounds):
        if work.round_us:
            work.round()
        send(_HEADER.pack(round_index, index) + body)
        wait(round_index)
    return meter.stop()


class RoundMeter:
    """Times a node process's rounds, from its construction to :meth:`stop`."""

    def __init__(self) -> None:
        self._started, self._cpu = time.perf_counter(), time.process_time()
        self._usage = resource.getrusage(resource.RUSAGE_SELF)  # all threads of the process

    def stop(self) -> tuple[float, float, tuple[int, int]]:
        """Seconds, CPU seconds and context switches (voluntary, involuntary) so far."""
        end = resource.getrusage(resource.RUSAGE_SELF)
        return (
            time.perf_counter() - self._started,
            time.process_time() - self._cpu,
            (end.ru_nvcsw - self._usage.ru_nvcsw, end.ru_nivcsw - self._usage.ru_nivcsw),
        )


def node_report(measured: tuple[float, float, tuple[int, int]]) -> tuple:
    """What a node process sends :func:`ring_stats`: :meth:`RoundMeter.stop`'s figures
    and its memory (peak and private), read now."""
    elapsed, cpu, switches = measured
    return elapsed, (status_kb("VmHWM"), status_kb("RssAnon")), cpu, switches


def status_kb(field: str, pid: int | str = "self") -> int:
    """A memory field of ``/proc/PID/status`` in kB; 0 if it cannot be read. ``VmHWM``: the
    peak RSS (not ``ru_maxrss``: Linux carries that across the ``exec`` of a spawned child,
    so it would report the large parent's); ``RssAnon``: the private resident memory (heap,
    stacks, arrays), without the file-backed pages of shared libraries, whose resident share
    depends on how the page cache holds the library files (docs/performance.md)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def ring_time(nodes: int, rounds: int, payload: int) -> float:
    """Seconds for ``rounds`` ring rounds (the slowest node's time, start-up excluded)."""
    return ring_stats(nodes, rounds, payload)["seconds"]


def ring_stats(nodes: int, rounds: int, payload: int, node: Callable = _node) -> dict:
    """:func:`ring_time` with the start-up: ``seconds`` of rounds (slowest node),
    ``startup_s`` from spawning the processes to every one serving, ``peak_rss_mb`` of
    the largest node process (``anon_rss_mb``: its private part), ``cpu_s``, the CPU time
    all nodes spent in their rounds, and ``switches``, their context switches meanwhile
    (voluntary, involuntary). ``node``: the function each process runs (a module-level
    one, for ``spawn``), :func:`benchmarks.raw_aio_ring.aio_ring_stats`'s for the other."""
    context = mp.get_context("spawn")
    pipes, processes = [], []
    spawned = time.perf_counter()
    for index in range(nodes):
        parent, child = context.Pipe()
        process = context.Process(target=node, args=(index, nodes, rounds, payload, child))
        process.start()
        pipes.append(parent)
        processes.append(process)
    try:
        ports = [pipe.recv() for pipe in pipes]
        startup = time.perf_counter() - spawned
        for pipe in pipes:
            pipe.send(ports)
        for pipe in pipes:
            assert pipe.recv() == "ready"
        for pipe in pipes:
            pipe.send("go")
        reports = [pipe.recv() for pipe in pipes]
        for pipe in pipes:
            pipe.send("stop")
    finally:
        for process in processes:
            process.join(30)
            if process.is_alive():
                process.kill()
    return {
        "seconds": max(r[0] for r in reports),
        "startup_s": startup,
        "peak_rss_mb": max(r[1][0] for r in reports) / 1024.0,
        "anon_rss_mb": max(r[1][1] for r in reports) / 1024.0,
        "cpu_s": sum(r[2] for r in reports),
        "switches": [sum(r[3][k] for r in reports) for k in (0, 1)],
    }


def start_time(nodes: int) -> float:
    """Seconds from spawning ``nodes`` raw grpcio servers to every one serving."""
    return ring_stats(nodes, 1, 16)["startup_s"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--bytes", type=int, default=16, help="payload bytes per message")
    args = parser.parse_args(argv)
    seconds = ring_time(args.nodes, args.rounds, args.bytes)
    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "rounds": args.rounds,
                "bytes": args.bytes,
                "seconds": seconds,
                "rounds_per_s": args.rounds / seconds,
            }
        )
    )


if __name__ == "__main__":
    main()
