"""An attacker's client of its own, for the door tests and the doors benchmark:
``python -m tests.door_attacker '<json plan>'``, a separate process with its own gRPC stack.

It opens ``count`` calls of each kind in ``kinds`` against ``target`` and holds them idle,
the way a hostile client starves a server whose handlers hold a thread per call:

* ``reflection``: a reflection stream that never sends its request;
* ``watch``: a health watch, its request sent, never read from;
* ``check``: a health check whose request never comes (a unary call held open);
* ``control``: a Control call (Status) whose request never comes, without a token;
* ``samples``: a follow stream of samples, without a token;
* ``peer``: a Peer stream claiming the in-neighbour ``sender``, never proving it;
* ``big``: Control.Configure with ``big_bytes`` of payload, without a token (each one
  whole: what the node would hold before knowing who sent it).

With ``tls`` (``{ca, cert, key, target_id}``) it speaks mutual TLS with that certificate
(one the node's CA signed, not the orchestrator's: a node's, say).

With ``persist``, a call that ends (refused, cancelled) is opened again a moment later, for
as long as the attack lasts: a flood that outlives a node's configuration, its restarts
and its watchdog. Every attempt's end is counted then.

Once every call is issued it prints ``opened`` on stdout, holds the calls until the file
``stop`` exists (or ``hold`` seconds pass), cancels what is still open, and prints as JSON
how the calls of each kind ended: ``{kind: {code: count}}``, ``held`` for a call still open
at the end (the node kept it), ``CANCELLED`` for one the node cancelled.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path

import grpc

CHANNELS = 8
"""Connections per kind: a flood comes over several, as a real attacker's would."""

METHODS = {
    "reflection": (
        "stream_stream",
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    ),
    "watch": ("unary_stream", "/grpc.health.v1.Health/Watch"),
    "check": ("stream_unary", "/grpc.health.v1.Health/Check"),
    "control": ("stream_unary", "/starling.v1.Control/Status"),
    "samples": ("unary_stream", "/starling.v1.Control/StreamSamples"),
    "peer": ("stream_unary", "/starling.v1.Peer/Exchange"),
    "big": ("unary_unary", "/starling.v1.Control/Configure"),
}


def _channel(plan: dict, k: int) -> grpc.aio.Channel:
    options: list[tuple[str, object]] = [
        ("grpc.use_local_subchannel_pool", 1),  # a connection of its own
        ("grpc.max_send_message_length", 1 << 30),
        ("attacker.channel", k),
    ]
    tls = plan.get("tls")
    if not tls:
        return grpc.aio.insecure_channel(plan["target"], options=options)
    credentials = grpc.ssl_channel_credentials(
        root_certificates=Path(tls["ca"]).read_bytes(),
        private_key=Path(tls["key"]).read_bytes(),
        certificate_chain=Path(tls["cert"]).read_bytes(),
    )
    options.append(("grpc.ssl_target_name_override", tls["target_id"]))
    return grpc.aio.secure_channel(plan["target"], credentials, options=options)


async def _idle(stop: asyncio.Event):
    await stop.wait()
    return
    yield  # pragma: no cover - makes this an async generator


async def _hold(kind: str, call, stop: asyncio.Event, seen: Counter) -> None:
    """Wait for ``call`` to end (or for the stop), and note how it ended."""
    how, _ = METHODS[kind]
    try:
        if how in ("unary_stream", "stream_stream"):
            waiting = asyncio.ensure_future(call.code())
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not waiting.done():
                seen["held"] += 1
                call.cancel()
                stopping.cancel()
                return
            seen[(await call.code()).name] += 1
            return
        waiting = asyncio.ensure_future(call)
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait({waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not waiting.done():
            seen["held"] += 1
            call.cancel()
            waiting.cancel()
            stopping.cancel()
            return
        stopping.cancel()
        try:
            waiting.result()
            seen["OK"] += 1
        except grpc.aio.AioRpcError as exc:
            seen[exc.code().name] += 1
    except asyncio.CancelledError:
        seen["held"] += 1
    except grpc.aio.AioRpcError as exc:
        seen[exc.code().name] += 1


def _open(kind: str, channel: grpc.aio.Channel, plan: dict, stop: asyncio.Event):
    how, path = METHODS[kind]
    method = getattr(channel, how)(path)
    if kind == "reflection":
        return method(_idle(stop))
    if kind == "watch":
        return method(b"")  # an empty HealthCheckRequest: the whole server
    if kind in ("check", "control"):
        return method(_idle(stop))
    if kind == "samples":
        return method(bytes([0x10, 0x01]))  # SamplesRequest(follow=True)
    if kind == "peer":
        return method(_idle(stop), metadata=(("starling-sender", plan["sender"]),))
    if kind == "big":
        size = int(plan.get("big_bytes", 64 << 20))
        # NodeConfig.experiment (field 1, length-delimited) holding `size` bytes.
        payload = bytes([0x0A]) + _varint(size) + b"x" * size
        return method(payload, timeout=60)
    raise ValueError(f"unknown kind {kind!r}")


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


async def _keep(
    kind: str, channel: grpc.aio.Channel, plan: dict, stop: asyncio.Event, seen: Counter
) -> None:
    """One call of ``kind`` held open; with ``persist``, opened again whenever it ends."""
    while True:
        await _hold(kind, _open(kind, channel, plan, stop), stop, seen)
        if not plan.get("persist") or stop.is_set():
            return
        await asyncio.sleep(0.2)


async def attack(plan: dict) -> dict:
    stop = asyncio.Event()
    channels = {kind: [_channel(plan, k) for k in range(CHANNELS)] for kind in plan["kinds"]}
    seen = {kind: Counter() for kind in plan["kinds"]}
    holders = []
    for kind in plan["kinds"]:
        count = plan.get(f"{kind}_count", plan["count"])
        for k in range(count):
            channel = channels[kind][k % CHANNELS]
            holders.append(asyncio.ensure_future(_keep(kind, channel, plan, stop, seen[kind])))
        await asyncio.sleep(0)
    await asyncio.sleep(1.0)  # let the calls reach the node
    print("opened", flush=True)
    deadline = time.monotonic() + float(plan.get("hold", 60))
    stop_file = Path(plan["stop"])
    while not stop_file.exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    stop.set()
    await asyncio.gather(*holders, return_exceptions=True)
    for kind_channels in channels.values():
        for channel in kind_channels:
            await channel.close()
    return {kind: dict(counts) for kind, counts in seen.items()}


def main(argv: list[str]) -> int:
    plan = json.loads(argv[1])
    print(json.dumps(asyncio.run(attack(plan))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
