"""A reference beside the baseline: the raw ring of :mod:`benchmarks.raw_ring` on ``grpc.aio``.

The same communication — each process streams one payload per round to both ring
neighbours over a client stream with generic byte handlers and waits for both neighbours'
payloads of that round — but each process runs one asyncio event loop: its round loop, its
two outgoing streams and its server's handlers share that one thread, where the baseline
gives gRPC's sending, polling and handler threads one each. It tells what the event loop
saves gRPC itself; :mod:`benchmarks.designs` runs it with a node's Python work added
(docs/performance.md: a node on ``grpc.aio``). The goals stay measured against
:mod:`benchmarks.raw_ring`.
"""

from __future__ import annotations

import asyncio

import grpc

from benchmarks.raw_ring import (
    _HEADER,
    _METHOD,
    _OPTIONS,
    NO_WORK,
    RoundMeter,
    Work,
    node_report,
    ring_stats,
)

__all__ = ["aio_ring_stats"]


def aio_ring_stats(nodes: int, rounds: int, payload: int) -> dict:
    """:func:`benchmarks.raw_ring.ring_stats` (the same fields) with event-loop nodes."""
    return ring_stats(nodes, rounds, payload, node=_node)


def _node(index: int, nodes: int, rounds: int, payload: int, pipe, work: Work = NO_WORK) -> None:
    asyncio.run(_serve_and_ring(index, nodes, rounds, payload, pipe, work))


async def _serve_and_ring(
    index: int, nodes: int, rounds: int, payload: int, pipe, work: Work
) -> None:
    loop = asyncio.get_running_loop()
    neighbours: list[int] = []
    arrived: dict[int, int] = {}  # round -> how many neighbours' payloads are here
    complete: dict[int, asyncio.Event] = {}

    def event(round_index: int) -> asyncio.Event:
        return complete.setdefault(round_index, asyncio.Event())

    async def push(request_iterator, context):
        async for data in request_iterator:
            if work.message_us:
                work.message()
            round_index, _sender = _HEADER.unpack_from(data)
            arrived[round_index] = arrived.get(round_index, 0) + 1
            if arrived[round_index] == len(neighbours):
                event(round_index).set()
        return b""

    handler = grpc.method_handlers_generic_handler(
        "bench.Ring", {"Push": grpc.stream_unary_rpc_method_handler(push)}
    )
    server = grpc.aio.server(options=_OPTIONS)
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    pipe.send(port)
    ports = await loop.run_in_executor(None, pipe.recv)
    neighbours += sorted({(index - 1) % nodes, (index + 1) % nodes} - {index})
    calls = []
    for peer in neighbours:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{ports[peer]}", options=_OPTIONS)
        await asyncio.wait_for(channel.channel_ready(), 30)
        calls.append(channel.stream_unary(_METHOD)())
    body = bytes(payload)
    pipe.send("ready")
    await loop.run_in_executor(None, pipe.recv)  # go
    meter = RoundMeter()
    for round_index in range(rounds):
        if work.round_us:
            work.round()
        message = _HEADER.pack(round_index, index) + body
        for call in calls:
            if work.message_us:
                work.message()
            await call.write(message)
        await event(round_index).wait()
        del complete[round_index], arrived[round_index]
    measured = meter.stop()
    for call in calls:
        await call.done_writing()
        await asyncio.wait_for(call, 30)
    pipe.send(node_report(measured))
    await loop.run_in_executor(None, pipe.recv)  # everyone finished: safe to stop serving
    await server.stop(0)
