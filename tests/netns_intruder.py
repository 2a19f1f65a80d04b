"""An intruder for the netns tests (:mod:`tests.test_netns_e2e`), run as its own process in
its own network namespace: ``python -m tests.netns_intruder '<json>'``.

It attacks one node over the testbed's bridge, again and again, until the file ``stop``
exists, and prints as JSON the set of gRPC status codes each attack got. Attacks, by mode:

* ``tls``: a Peer stream with a certificate of another CA (``other-ca``); a Peer stream
  with a genuine node certificate claiming another node's id (``impostor``); Control with a
  node's certificate instead of the orchestrator's (``node-control``); Control with no
  certificate at all (``no-cert``);
* ``token``: Control with no token (``no-token``), with a wrong one (``wrong-token``) and
  with another node's own token (``other-node-token``: one node's token file opens no other
  node); a Peer stream that proves no link secret (``no-secret``); idle reflection streams
  (``idle-reflection``: refused past the node's limit for one caller, or for want of the
  token, never taking the threads of Control).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc

from starling.node.protocol.starling.v1 import control_pb2, control_pb2_grpc, peer_pb2_grpc
from starling.node.security import TlsFiles, channel_credentials


def _code(call: Callable[[], object]) -> str:
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code().name
    return "OK"


def _files(folder: str, who: str) -> TlsFiles:
    return TlsFiles(f"{folder}/ca.pem", f"{folder}/{who}.pem", f"{folder}/{who}.key")


def _stop(channel: grpc.Channel, metadata=()) -> str:
    stub = control_pb2_grpc.ControlStub(channel)
    return _code(lambda: stub.Stop(control_pb2.StopRequest(), timeout=3, metadata=metadata))


def _peer(channel: grpc.Channel, sender: str) -> str:
    stub = peer_pb2_grpc.PeerStub(channel)
    return _code(
        lambda: stub.Exchange(iter(()), timeout=3, metadata=(("starling-sender", sender),))
    )


def tls_round(plan: dict) -> dict[str, str]:
    target, name = plan["target"], plan["target_id"]
    options = [("grpc.ssl_target_name_override", name)]
    got = {}
    foreign = channel_credentials(_files(plan["stranger"], plan["neighbour"]))
    with grpc.secure_channel(target, foreign, options=options) as channel:
        got["other-ca"] = _peer(channel, plan["neighbour"])
    genuine = channel_credentials(_files(plan["certs"], plan["impostor"]))
    with grpc.secure_channel(target, genuine, options=options) as channel:
        got["impostor"] = _peer(channel, plan["neighbour"])  # its own cert, another's id
        got["node-control"] = _stop(channel)
    with grpc.insecure_channel(target) as channel:
        got["no-cert"] = _stop(channel)
    return got


def _idle_reflection(channel: grpc.Channel) -> str:
    """A reflection stream that never sends its request (it would hold a thread)."""
    method = channel.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
    release = threading.Event()

    def nothing():
        release.wait(3)
        return
        yield  # pragma: no cover - a generator

    call = method(nothing(), timeout=2)
    try:
        return _code(lambda: list(call))
    finally:
        release.set()


def token_round(plan: dict) -> dict[str, str]:
    with grpc.insecure_channel(plan["target"]) as channel:
        return {
            "no-token": _stop(channel),
            "wrong-token": _stop(channel, (("authorization", "Bearer " + plan["wrong"]),)),
            "other-node-token": _stop(
                channel, (("authorization", "Bearer " + plan["other_token"]),)
            ),
            "no-secret": _peer(channel, plan["neighbour"]),
            "idle-reflection": _idle_reflection(channel),
        }


def main(argv: list[str]) -> int:
    plan = json.loads(argv[1])
    attack = tls_round if plan["mode"] == "tls" else token_round
    seen: dict[str, set[str]] = {}
    rounds = 0
    while True:
        stopping = Path(plan["stop"]).exists()  # one more round after the stop is asked
        for kind, code in attack(plan).items():
            seen.setdefault(kind, set()).add(code)
        rounds += 1
        if stopping:
            break
        time.sleep(0.2)
    print(json.dumps({"rounds": rounds, "seen": {k: sorted(v) for k, v in seen.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
