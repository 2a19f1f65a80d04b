"""``python -m benchmarks.ladder``: where the 5-node ring's rounds go, rung by rung.

The ring of ``make bench``'s first row (5 nodes, dim 2, one chain, D-ADMMS), measured as a
ladder between the raw grpcio ring and a full Starling node, all alternated in one run:

* ``raw`` — :mod:`benchmarks.raw_ring`: bytes, generic handlers, nothing else;
* ``raw grpc.aio`` — the same ring with every process on one ``grpc.aio`` event loop
  (:mod:`benchmarks.raw_aio_ring`), and ``raw, event-loop thread beside a round loop`` —
  its streams on an event-loop thread, its round loop on another (the ``hybrid`` design of
  :mod:`benchmarks.designs`, the shape the ``grpc.aio`` node prototype took): the
  event-loop designs' floors;
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
* ``Starling`` — the node as it ships: its round loop, outbound links and server (doors,
  the Peer streams; Control's synchronous calls on their doors' threads) on one
  ``grpc.aio`` event loop;
* ``Starling's round on one grpc.aio loop`` — :mod:`benchmarks.loop_node`, the prototype of
  a node whose round loop, streams and message handling share one event loop: the node's
  own round engine, program, encoding and checks, first without and then with what a node
  stores each round; then with its incoming streams served by grpcio's threaded server, as
  the node has them. It is not the node (no Control, doors, faults or resends), so it
  measures what that design would save, not what the node reaches (docs/performance.md,
  "The port's first half, in the node").

Each rung gives rounds per second (``rounds`` rounds, the loop alone), its ratio to the
raw grpcio ring's and to the raw ``grpc.aio`` ring's rate of the same pass, and the CPU
all threads of all nodes spent per node and round, which moves less with the machine's
load than a rate; the load average is printed at the start and the end. Not part of
``make bench``: it measures where the cost lies, not a goal.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import starling.node  # noqa: F401 - one BLAS thread per process, before numpy (node/__init__.py)
from benchmarks.designs import _hybrid_node
from benchmarks.loop_node import loop_node
from benchmarks.raw_aio_ring import _node as _aio_node
from benchmarks.raw_ring import _HEADER, BYTES, Codec, _node, ring_stats
from starling.node.messages import Message
from starling.node.protocol import convert
from starling.node.protocol.starling.v1 import peer_pb2

__all__ = ["LADDER", "rung_stats"]

SITE = Path(__file__).with_name("ablation_site")

RAW = "raw"
RAW_AIO = "raw grpc.aio"

LADDER: list[tuple[str, tuple[str, ...] | None]] = [
    (RAW, None),
    (RAW_AIO, None),
    ("raw, event-loop thread beside a round loop", None),
    ("raw + Starling's wire", None),
    ("Starling, all four parts out", ("storage", "books", "checks", "sampler")),
    ("Starling, storage, books, checks out", ("storage", "books", "checks")),
    ("Starling, storage and books out", ("storage", "books")),
    ("Starling, storage out", ("storage",)),
    ("Starling", ()),
    ("Starling's round on one grpc.aio loop, storage out", None),
    ("Starling's round on one grpc.aio loop", None),
    ("Starling's round on one grpc.aio loop, receiving on grpcio's threads", None),
]
"""Each rung: its name and, for the Starling node's, the parts taken out (None:
a ring run by :func:`benchmarks.raw_ring.ring_stats`)."""


@functools.cache
def _payload(size: int):
    """One iterate's tensor of ``size`` bytes, made once (numpy imported after
    ``starling.node``, which sets one BLAS thread)."""
    import numpy as np

    return np.zeros(max(size // 8, 1))


def _encode_iterate(data: bytes, sender: int, receiver: int) -> peer_pb2.Iterate:
    """The round loop's bytes as Starling's ``peer.Iterate`` of the same size, built as a
    node builds one (``message_to_iterate``; protobuf serialises it in gRPC's thread)."""
    round_index, _ = _HEADER.unpack_from(data)
    message = Message("x", {"x": _payload(len(data) - _HEADER.size)})
    return convert.message_to_iterate(
        message,
        experiment="bench",
        sender=str(sender),
        receiver=str(receiver),
        round=round_index,
        phase=0,
    )


def _iterate_arrival(iterate: peer_pb2.Iterate) -> tuple[int, int]:
    """A received ``peer.Iterate`` decoded as a node decodes one: (sender, round)."""
    return int(iterate.sender), convert.iterate_to_message(iterate).round


def _serialise(iterate: peer_pb2.Iterate) -> bytes:
    return iterate.SerializeToString()


def _parse(data: bytes) -> peer_pb2.Iterate:
    return peer_pb2.Iterate.FromString(data)


STARLING_WIRE = Codec(_encode_iterate, _iterate_arrival, _serialise, _parse)
"""Starling's wire format in the raw ring's structure."""


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
        raw_nodes = {
            RAW: functools.partial(_node, codec=BYTES),
            RAW_AIO: _aio_node,
            "raw, event-loop thread beside a round loop": _hybrid_node,
            "raw + Starling's wire": functools.partial(_node, codec=STARLING_WIRE),
            "Starling's round on one grpc.aio loop, storage out": functools.partial(
                loop_node, storage=False
            ),
            "Starling's round on one grpc.aio loop": loop_node,
            "Starling's round on one grpc.aio loop, receiving on grpcio's threads": (
                functools.partial(loop_node, threaded_receive=True)
            ),
        }
        stats = ring_stats(nodes, rounds, 16, node=raw_nodes[name])
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
    load = os.getloadavg()[0]
    rows: list[dict] = []
    for repeat in range(args.repeats):
        passed = []
        for name, parts in LADDER:
            row = rung_stats(name, parts, args.rounds)
            row["pass"] = repeat
            passed.append(row)
            print(
                f"  pass {repeat + 1}: {name}: {row['rounds_per_s']:.0f} r/s, "
                f"{row['cpu_ms']:.3f} ms",
                file=sys.stderr,
                flush=True,
            )
        # Ratios within the pass: each rung against the two raw rings run beside it.
        rates = {row["rung"]: row["rounds_per_s"] for row in passed}
        for row in passed:
            row["vs_raw"] = row["rounds_per_s"] / rates[RAW]
            row["vs_raw_aio"] = row["rounds_per_s"] / rates[RAW_AIO]
        rows += passed
    print(
        f"{args.repeats} passes of {args.rounds} rounds, 5 nodes, {os.cpu_count()} CPUs; "
        f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, "
        f"{time.strftime('%Y-%m-%d %H:%M')}"
    )
    print(
        "| rung | rounds/s (each pass) | against raw grpcio | against raw grpc.aio "
        "| CPU ms per node and round: mean ± s.e. |"
    )
    print("|---|---|---|---|---|")
    for name, _ in LADDER:
        mine = [row for row in rows if row["rung"] == name]
        cpu = [row["cpu_ms"] for row in mine]
        error = statistics.stdev(cpu) / len(cpu) ** 0.5 if len(cpu) > 1 else float("nan")
        rates = ", ".join(f"{row['rounds_per_s']:.0f}" for row in mine)
        vs_raw = ", ".join(f"{row['vs_raw']:.2f}x" for row in mine)
        vs_aio = ", ".join(f"{row['vs_raw_aio']:.2f}x" for row in mine)
        print(
            f"| {name} | {rates} | {vs_raw} | {vs_aio} | {statistics.mean(cpu):.3f} ± {error:.3f} |"
        )
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
