"""Thin gRPC servicers: protobuf in, a call on :class:`NodeRuntime`, protobuf out.

Domain errors become status codes here and nowhere else: ConfigError → INVALID_ARGUMENT,
PreconditionError → FAILED_PRECONDITION, MemoryError → RESOURCE_EXHAUSTED. Any other
exception is a bug and surfaces as INTERNAL with its message (the node keeps serving).
"""

from __future__ import annotations

import collections
import functools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import TypeVar

import grpc

from starling.node.params import ConfigError
from starling.node.protocol import convert
from starling.node.protocol.contract import NOT_CONFIGURED, configured_to_proto, status_to_proto
from starling.node.protocol.starling.v1 import (
    control_pb2,
    control_pb2_grpc,
    peer_pb2,
    peer_pb2_grpc,
)
from starling.node.runtime.archive import NoStoredRun, read_batches, run_directory
from starling.node.runtime.gate import Gate
from starling.node.runtime.peer_secrets import PeerSecrets
from starling.node.runtime.receive import Reconfigured
from starling.node.runtime.run import SAMPLES_FILE
from starling.node.runtime.runtime import NodeRuntime, PreconditionError
from starling.node.runtime.store import StoreError
from starling.node.runtime.streaming import Batch
from starling.node.runtime.transport import CONTROL_THREADS

__all__ = ["ControlServicer", "PeerServicer"]

log = logging.getLogger("starling.node")

STREAMS_PER_SENDER = 8
"""Peer streams one sender may hold open to a node at once. A sender keeps one per link;
a restarted one opens the next before the node has seen its old one die (keepalive takes
up to 15 s), so a few may overlap, never many."""

MAX_SAMPLE_STREAMS = CONTROL_THREADS // 2
"""Sample streams a node serves at once: half the threads kept for Control and Health."""

_Request = TypeVar("_Request")
_Reply = TypeVar("_Reply")
_Method = Callable[["ControlServicer", _Request, grpc.ServicerContext], _Reply]


def _mapped(method: _Method[_Request, _Reply]) -> _Method[_Request, _Reply]:
    """Turn the runtime's exceptions into status codes with their one-line message; every
    call passes the gate first."""

    @functools.wraps(method)
    def wrapper(self: ControlServicer, request: _Request, context: grpc.ServicerContext) -> _Reply:
        self.gate.control(context)
        try:
            return method(self, request, context)
        except ConfigError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except PreconditionError as exc:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except MemoryError:
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{method.__name__}: the node lacks the memory for it (chains × dim, or the data)",
            )
        except Exception as exc:  # noqa: BLE001 - reported to the caller, node keeps serving
            log.exception("%s failed", method.__name__)
            context.abort(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")
        raise AssertionError("context.abort raises")  # pragma: no cover

    return wrapper


class ControlServicer(control_pb2_grpc.ControlServicer):
    """Control calls. A ``StreamSamples`` call holds a server thread for as long as it
    streams (a follower: until the run ends), so at most ``max_sample_streams`` run at once;
    one more is refused with RESOURCE_EXHAUSTED, and the rest of the threads the server keeps
    beyond the peer streams' (:data:`~starling.node.runtime.transport.CONTROL_THREADS`)
    stay free for Status, Health and the other unary calls."""

    def __init__(
        self,
        runtime: NodeRuntime,
        gate: Gate | None = None,
        max_sample_streams: int = MAX_SAMPLE_STREAMS,
    ) -> None:
        self.runtime = runtime
        self.gate = gate or Gate(runtime)
        self.max_sample_streams = max_sample_streams
        self._sample_slots = threading.BoundedSemaphore(max_sample_streams)

    @_mapped
    def Configure(
        self, request: control_pb2.NodeConfig, context: grpc.ServicerContext
    ) -> control_pb2.ConfigureReply:
        secrets = PeerSecrets(
            request.peer_secret, dict(request.send_secrets), dict(request.accept_secrets)
        )
        configured = self.runtime.configure(
            convert.config_to_spec(request), fresh=request.fresh, peer_secret=secrets
        )
        return configured_to_proto(configured)

    @_mapped
    def Start(
        self, request: control_pb2.StartRequest, context: grpc.ServicerContext
    ) -> control_pb2.Ack:
        self.runtime.start()
        return control_pb2.Ack()

    @_mapped
    def Stop(
        self, request: control_pb2.StopRequest, context: grpc.ServicerContext
    ) -> control_pb2.Ack:
        self.runtime.stop()
        return control_pb2.Ack()

    @_mapped
    def Status(
        self, request: control_pb2.StatusRequest, context: grpc.ServicerContext
    ) -> control_pb2.NodeStatus:
        status = replace(
            self.runtime.status(),
            denied_peer_streams=self.gate.denied["peer"],
            denied_control_calls=self.gate.denied["control"],
        )
        return status_to_proto(status)

    def StreamSamples(
        self, request: control_pb2.SamplesRequest, context: grpc.ServicerContext
    ) -> Iterator[control_pb2.SampleBatch]:
        self.gate.control(context)
        if not self._sample_slots.acquire(blocking=False):
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"node serves its limit of {self.max_sample_streams} sample streams at once",
            )
        try:
            yield from self._stream_samples(request, context)
        finally:
            self._sample_slots.release()

    def _stream_samples(
        self, request: control_pb2.SamplesRequest, context: grpc.ServicerContext
    ) -> Iterator[control_pb2.SampleBatch]:
        batches = self.runtime.samples(request.offset, request.follow, context.is_active)
        if request.experiment or request.node_id:
            status = self.runtime.status()
            if (status.experiment, status.node_id) != (request.experiment, request.node_id):
                if request.follow:
                    context.abort(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        "follow: a stored run the node is not configured for cannot be followed",
                    )
                path = run_directory(self.runtime.state_dir, request.experiment, request.node_id)
                batches = read_batches(path / SAMPLES_FILE, request.offset, context.is_active)
        which = f"experiment {request.experiment!r} for node {request.node_id!r}"
        try:
            yield from self._sample_batches(batches)
        except NoStoredRun:
            context.abort(grpc.StatusCode.NOT_FOUND, f"node holds no stored samples of {which}")
        except (StoreError, OSError) as exc:
            # Said without the node's own paths: the caller needs what, not where.
            log.error("StreamSamples of %s: %s", which, exc)
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "damaged"
            context.abort(grpc.StatusCode.DATA_LOSS, f"stored samples of {which}: {reason}")

    @staticmethod
    def _sample_batches(batches: Iterable[Batch]) -> Iterator[control_pb2.SampleBatch]:
        for batch in batches:
            yield control_pb2.SampleBatch(
                samples=[
                    control_pb2.Sample(
                        index=index, round=round_index, value=convert.tensor_from_array(value)
                    )
                    for index, round_index, value in batch
                ]
            )

    @_mapped
    def Hold(
        self, request: control_pb2.HoldRequest, context: grpc.ServicerContext
    ) -> control_pb2.Ack:
        self.runtime.hold(request.round if request.round >= 0 else None)
        return control_pb2.Ack()

    @_mapped
    def SetLink(
        self, request: control_pb2.SetLinkRequest, context: grpc.ServicerContext
    ) -> control_pb2.Ack:
        self.runtime.set_link(
            request.receiver,
            up=request.up if request.HasField("up") else None,
            drop=request.drop if request.HasField("drop") else None,
            delay_ms=request.delay_ms if request.HasField("delay_ms") else None,
        )
        return control_pb2.Ack()

    @_mapped
    def SetPeerDown(
        self, request: control_pb2.PeerDownRequest, context: grpc.ServicerContext
    ) -> control_pb2.Ack:
        self.runtime.set_peer_down(request.peer, request.down)
        return control_pb2.Ack()

    @_mapped
    def Checkpoint(
        self, request: control_pb2.CheckpointRequest, context: grpc.ServicerContext
    ) -> control_pb2.CheckpointReply:
        return control_pb2.CheckpointReply(next_round=self.runtime.checkpoint())


class PeerServicer(peer_pb2_grpc.PeerServicer):
    """Inbound links. Each ``Exchange`` stream holds a server thread for its life, so at
    most ``max_streams`` run at once; one more is refused with RESOURCE_EXHAUSTED (and
    counted) instead of taking a thread that Control and Health need. The server's pool is
    larger than this limit (:func:`starling.node.runtime.transport.server_threads`). One
    sender may hold at most :data:`STREAMS_PER_SENDER` of them, so that no peer can take
    the slots of the others."""

    def __init__(self, runtime: NodeRuntime, max_streams: int, gate: Gate | None = None) -> None:
        self.runtime = runtime
        self.max_streams = max_streams
        self.gate = gate or Gate(runtime)
        self._slots = threading.BoundedSemaphore(max_streams)
        self._open_lock = threading.Lock()
        self._open = 0
        self._open_by: collections.Counter[str] = collections.Counter()

    def open_streams(self) -> int:
        """Inbound streams being served now (the metrics endpoint reads it)."""
        return self._open

    def Exchange(
        self, request_iterator: Iterator[peer_pb2.Iterate], context: grpc.ServicerContext
    ) -> peer_pb2.ExchangeSummary:
        generation = self.runtime.generation  # read first: a Configure after it is seen
        sender = self.gate.peer(context)
        if not self._slots.acquire(blocking=False):
            self.runtime.note_refused_stream()
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"node holds its limit of {self.max_streams} inbound peer streams",
            )
        with self._open_lock:
            crowded = self._open_by[sender] >= STREAMS_PER_SENDER
            if not crowded:
                self._open += 1
                self._open_by[sender] += 1
        if crowded:
            self._slots.release()
            self.runtime.note_refused_stream()
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"peer {sender!r} holds its limit of {STREAMS_PER_SENDER} streams to this node",
            )
        try:
            return self._exchange(request_iterator, context, sender, generation)
        finally:
            with self._open_lock:
                self._open -= 1
                self._open_by[sender] -= 1
                if not self._open_by[sender]:
                    del self._open_by[sender]
            self._slots.release()

    def _exchange(
        self,
        request_iterator: Iterator[peer_pb2.Iterate],
        context: grpc.ServicerContext,
        sender: str,
        generation: int,
    ) -> peer_pb2.ExchangeSummary:
        # A bad message is rejected and counted, never fatal to the stream: the sender's
        # well-formed messages keep flowing.
        received = rejected = 0
        try:
            for iterate in request_iterator:
                while True:
                    try:
                        outcome = self.runtime.receive(iterate, sender, generation)
                        break
                    except Reconfigured as change:
                        # Configured again since the stream was admitted: a new run, perhaps
                        # with another secret and other in-peers. The stream speaks on only
                        # if its metadata passes the gate under the new terms.
                        generation = change.generation
                        self.gate.peer(context)
                    except PreconditionError:
                        # Not configured (a restarted process serving before the orchestrator
                        # configured it, or being configured again): refuse the stream as
                        # retriable, so the sender keeps its messages and sends them again
                        # once this node can use them.
                        context.abort(grpc.StatusCode.UNAVAILABLE, NOT_CONFIGURED)
                if outcome == "rejected":
                    rejected += 1
                else:
                    received += 1
        except grpc.RpcError:
            # The sender went away (or sent more than the transport accepts): its stream
            # ends here and its link reconnects.
            pass
        return peer_pb2.ExchangeSummary(received=received, rejected=rejected)
