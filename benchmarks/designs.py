"""``python -m benchmarks.designs``: what a node's own Python costs in three grpcio designs.

The raw ring of :mod:`benchmarks.raw_ring` with a given amount of pure Python work
(:class:`~benchmarks.raw_ring.Work`: per round in the round loop, per message sent and per
message received) in each of three designs a node could take:

* ``threads`` — grpcio's threaded API, as a Starling node runs today: the round loop, a
  sending thread per outbound stream, a handler thread per inbound stream
  (:mod:`benchmarks.raw_ring`);
* ``hybrid`` — one ``grpc.aio`` event loop on its own thread for every stream in and out,
  beside a round-loop thread that hands it each message (``call_soon_threadsafe``) and
  waits on a condition: what a node keeping its round engine synchronous would be (a
  Starling node built this way was measured too: docs/performance.md);
* ``asyncio`` — everything, the round loop included, on one event loop
  (:mod:`benchmarks.raw_aio_ring`).

It answers whether a redesign would let a node's Python work cost less: the CPU per node
and round, beside the rate, for each design and amount of work, measured in one run.
Not part of ``make bench``: it takes a few minutes and measures designs, not Starling.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import threading
from concurrent import futures

import grpc

from benchmarks.raw_aio_ring import _node as _asyncio_node
from benchmarks.raw_ring import (
    _HEADER,
    _METHOD,
    _OPTIONS,
    NO_WORK,
    Work,
    _Arrivals,
    node_report,
    ring_stats,
    round_loop,
)
from benchmarks.raw_ring import _node as _threads_node

__all__ = ["design_stats"]


def _hybrid_node(
    index: int, nodes: int, rounds: int, payload: int, pipe, work: Work = NO_WORK
) -> None:
    """A ring node whose streams run on an event loop thread, its round loop on this one."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="grpc-loop", daemon=True).start()
    arrivals = _Arrivals()

    def on_loop(coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(30)

    async def push(request_iterator, context):
        async for data in request_iterator:
            if work.message_us:
                work.message()
            round_index, sender = _HEADER.unpack_from(data)
            arrivals.add(sender, round_index)
        return b""

    async def serve():
        server = grpc.aio.server(
            options=_OPTIONS, migration_thread_pool=futures.ThreadPoolExecutor(max_workers=2)
        )
        handler = grpc.method_handlers_generic_handler(
            "bench.Ring", {"Push": grpc.stream_unary_rpc_method_handler(push)}
        )
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    async def link(address: str, outbox: asyncio.Queue) -> None:
        channel = grpc.aio.insecure_channel(address, options=_OPTIONS)
        await asyncio.wait_for(channel.channel_ready(), 30)
        call = channel.stream_unary(_METHOD)()
        while (message := await outbox.get()) is not None:
            if work.message_us:
                work.message()
            await call.write(message)
        await call.done_writing()
        await call

    async def outboxes(count: int) -> list[asyncio.Queue]:
        return [asyncio.Queue() for _ in range(count)]

    server, port = on_loop(serve())
    pipe.send(port)
    ports = pipe.recv()
    neighbours = sorted({(index - 1) % nodes, (index + 1) % nodes} - {index})
    boxes = on_loop(outboxes(len(neighbours)))
    links = [
        asyncio.run_coroutine_threadsafe(link(f"127.0.0.1:{ports[peer]}", box), loop)
        for peer, box in zip(neighbours, boxes, strict=True)
    ]

    def send(message: bytes) -> None:
        for box in boxes:
            loop.call_soon_threadsafe(box.put_nowait, message)

    measured = round_loop(
        index, rounds, payload, pipe, work, send, lambda r: arrivals.wait(neighbours, r)
    )
    for box in boxes:
        loop.call_soon_threadsafe(box.put_nowait, None)
    for done in links:
        done.result(30)
    pipe.send(node_report(measured))
    pipe.recv()  # everyone finished: safe to stop serving
    on_loop(server.stop(0))


DESIGNS = {"threads": _threads_node, "hybrid": _hybrid_node, "asyncio": _asyncio_node}


def design_stats(design: str, work: Work, nodes: int = 5, rounds: int = 2000) -> dict:
    """One ring of ``nodes`` in ``design`` with ``work``: rounds per second, CPU (ms) and
    context switches (voluntary, involuntary) per node and round."""
    node = functools.partial(DESIGNS[design], work=work)
    stats = ring_stats(nodes, rounds, 16, node=node)
    node_rounds = nodes * rounds
    return {
        "design": design,
        "round_us": work.round_us,
        "message_us": work.message_us,
        "rounds_per_s": rounds / stats["seconds"],
        "cpu_ms": 1e3 * stats["cpu_s"] / node_rounds,
        "switches": [count / node_rounds for count in stats["switches"]],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=2, help="alternated runs of each")
    parser.add_argument(
        "--work", nargs="+", default=["0:0", "150:40", "300:0"], metavar="ROUND_US:MESSAGE_US"
    )
    args = parser.parse_args(argv)
    works = [Work(*(float(part) for part in text.split(":"))) for text in args.work]
    rows = []
    print("| design | Python per round + per message | rounds/s | CPU per node-round | switches |")
    print("|---|---|---|---|---|")
    for work in works:
        for _ in range(args.repeats):
            for design in DESIGNS:
                row = design_stats(design, work, rounds=args.rounds)
                rows.append(row)
                voluntary, involuntary = row["switches"]
                print(
                    f"| {design} | {work.round_us:.0f} + 4 × {work.message_us:.0f} µs "
                    f"| {row['rounds_per_s']:.0f} | {row['cpu_ms']:.3f} ms "
                    f"| {voluntary:.1f} + {involuntary:.1f} |",
                    flush=True,
                )
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
