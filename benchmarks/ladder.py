"""``python -m benchmarks.ladder``: where the 5-node ring's rounds go, rung by rung.

The ring of ``make bench``'s first row (5 nodes, dim 2, one chain, D-ADMMS), measured as a
ladder between the raw grpcio ring and a full Starling node, all alternated in one run:

* ``raw`` — :mod:`benchmarks.raw_ring`: bytes, generic handlers, nothing else;
* ``raw + Starling's wire`` — the same ring carrying Starling's own ``peer.Iterate``
  messages: each built from a :class:`~starling.node.messages.Message` with the node's
  :func:`~starling.node.protocol.convert.message_to_iterate` in gRPC's sending thread,
  serialised and parsed by protobuf, converted back with ``iterate_to_message`` in the
  handler thread — Starling's per-message encoding in the raw ring's structure;
* ``Starling, <parts> out`` — real node processes (:mod:`benchmarks.starling_ring`, as
  ``starling run`` starts them) with parts of their per-round work taken out, cumulatively
  (:mod:`benchmarks.ablation_site.sitecustomize`): storage, then the books, then the
  message checks, then the sampler's step. What is left at the top of the ladder is the
  node's structure alone: round loop, inbox, links, streams, protobuf, servicer;
* ``Starling`` — the node as it ships.

Each rung gives rounds per second (``rounds`` rounds, the loop alone) and the CPU all
threads of all nodes spent per node and round, which moves less with the machine's load
than a rate. Not part of ``make bench``: it measures where the cost lies, not a goal.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import sys
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path

import grpc

from benchmarks.raw_ring import (
    _HEADER,
    _METHOD,
    _OPTIONS,
    NO_WORK,
    _Arrivals,
    node_report,
    ring_stats,
    round_loop,
)

__all__ = ["LADDER", "rung_stats"]

SITE = Path(__file__).with_name("ablation_site")

LADDER: list[tuple[str, tuple[str, ...] | None]] = [
    ("raw", None),
    ("raw + Starling's wire", None),
    ("Starling, all four parts out", ("storage", "books", "checks", "sampler")),
    ("Starling, storage, books, checks out", ("storage", "books", "checks")),
    ("Starling, storage and books out", ("storage", "books")),
    ("Starling, storage out", ("storage",)),
    ("Starling", ()),
]
"""Each rung: its name and, for Starling's, the parts taken out (None: a raw ring)."""


def _wire_node(index: int, nodes: int, rounds: int, payload: int, pipe) -> None:
    """A raw ring node (:func:`benchmarks.raw_ring._node`'s structure) that sends and
    receives Starling's ``peer.Iterate`` messages, encoded and decoded as a node does."""
    import numpy as np

    from starling.node.messages import Message
    from starling.node.protocol import convert
    from starling.node.protocol.starling.v1 import peer_pb2

    arrivals = _Arrivals()
    iterate_x = np.zeros(max(payload // 8, 1))

    def push(request_iterator, context):
        for iterate in request_iterator:
            message = convert.iterate_to_message(iterate)
            arrivals.add(int(iterate.sender), message.round)
        return b""

    handler = grpc.method_handlers_generic_handler(
        "bench.Ring",
        {
            "Push": grpc.stream_unary_rpc_method_handler(
                push, request_deserializer=peer_pb2.Iterate.FromString
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

    def encoded(box: queue.Queue, receiver: int):
        for data in iter(box.get, None):
            round_index, _ = _HEADER.unpack_from(data)
            message = Message("x", {"x": iterate_x})
            yield convert.message_to_iterate(
                message, experiment="bench", sender=str(index), receiver=str(receiver),
                round=round_index, phase=0,
            )  # fmt: skip

    for peer in neighbours:
        channel = grpc.insecure_channel(f"127.0.0.1:{ports[peer]}", options=_OPTIONS)
        grpc.channel_ready_future(channel).result(timeout=30)
        box: queue.Queue = queue.Queue()
        outboxes[peer] = box
        stream = channel.stream_unary(
            _METHOD, request_serializer=peer_pb2.Iterate.SerializeToString
        )
        calls.append(stream.future(encoded(box, peer)))

    def send(message: bytes) -> None:
        for box in outboxes.values():
            box.put(message)

    measured = round_loop(
        index, rounds, payload, pipe, NO_WORK, send, lambda r: arrivals.wait(neighbours, r)
    )
    for box in outboxes.values():
        box.put(None)
    for call in calls:
        call.result(timeout=30)
    pipe.send(node_report(measured))
    pipe.recv()
    server.stop(0)


@contextmanager
def _ablated(parts: tuple[str, ...]):
    """Node processes started inside take ``parts`` out (the site folder on their path)."""
    saved = {name: os.environ.get(name) for name in ("PYTHONPATH", "STARLING_BENCH_ABLATE")}
    path = [str(SITE)] + ([saved["PYTHONPATH"]] if saved["PYTHONPATH"] else [])
    os.environ["PYTHONPATH"] = os.pathsep.join(path)
    os.environ["STARLING_BENCH_ABLATE"] = ",".join(parts)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def rung_stats(name: str, parts: tuple[str, ...] | None, rounds: int, nodes: int = 5) -> dict:
    """One rung of :data:`LADDER`: rounds per second and CPU ms per node and round."""
    from benchmarks.starling_ring import ring_experiment, starling_ring

    if parts is None:
        node = _wire_node if name != "raw" else None
        stats = ring_stats(nodes, rounds, 16, **({"node": node} if node else {}))
        seconds, cpu = stats["seconds"], stats["cpu_s"]
    else:
        with _ablated(parts):
            stats = starling_ring(ring_experiment(nodes, rounds, chains=1, dim=2))
        seconds, cpu = stats["loop_s"], stats["cpu_s"]
    return {"rung": name, "rounds_per_s": rounds / seconds, "cpu_ms": 1e3 * cpu / (nodes * rounds)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3, help="alternated passes")
    args = parser.parse_args(argv)
    rows: list[dict] = []
    for repeat in range(args.repeats):
        for name, parts in LADDER:
            row = rung_stats(name, parts, args.rounds)
            rows.append(row)
            print(f"  pass {repeat + 1}: {name}: {row['rounds_per_s']:.0f} r/s, "
                  f"{row['cpu_ms']:.3f} ms", file=sys.stderr, flush=True)  # fmt: skip
    print("| rung | rounds/s (each pass) | CPU ms per node and round: mean ± s.e. |")
    print("|---|---|---|")
    for name, _ in LADDER:
        mine = [row for row in rows if row["rung"] == name]
        cpu = [row["cpu_ms"] for row in mine]
        error = statistics.stdev(cpu) / len(cpu) ** 0.5 if len(cpu) > 1 else float("nan")
        rates = ", ".join(f"{row['rounds_per_s']:.0f}" for row in mine)
        print(f"| {name} | {rates} | {statistics.mean(cpu):.3f} ± {error:.3f} |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
