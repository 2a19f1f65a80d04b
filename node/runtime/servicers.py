"""Thin gRPC servicers: protobuf in, a call on :class:`NodeRuntime`, protobuf out.

Domain errors become status codes here and nowhere else: ConfigError → INVALID_ARGUMENT,
PreconditionError → FAILED_PRECONDITION, MemoryError → RESOURCE_EXHAUSTED. Any other
exception is a bug and surfaces as INTERNAL with its message (the node keeps serving).
"""

from __future__ import annotations

import collections
import functools
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import replace
from typing import TypeVar

import grpc

from starling.node.params import ConfigError
from starling.node.protocol import MAX_MESSAGE_BYTES, convert
from starling.node.protocol.contract import NOT_CONFIGURED, configured_to_proto, status_to_proto
from starling.node.protocol.starling.v1 import (
    control_pb2,
    control_pb2_grpc,
    peer_pb2,
    peer_pb2_grpc,
)
from starling.node.protocol.wire import PartJoiner, PartsRefused
from starling.node.runtime.archive import NoStoredRun, read_batches, run_directory
from starling.node.runtime.checks import iterate_bound
from starling.node.runtime.doors import AbortCall, caller_of
from starling.node.runtime.gate import Gate, PeerAdmission
from starling.node.runtime.peer_secrets import PeerSecrets
from starling.node.runtime.receive import Reconfigured
from starling.node.runtime.run import SAMPLES_FILE
from starling.node.runtime.runtime import NodeRuntime, PreconditionError
from starling.node.runtime.store import StoreError
from starling.node.runtime.streaming import Batch
from starling.node.shown import shorten, shown

__all__ = ["ControlServicer", "PeerServicer"]

log = logging.getLogger("starling.node")

STREAMS_PER_SENDER = 8
"""Peer streams one caller may hold open to a node as one sender at once. A sender keeps
one per link; a restarted one opens the next before the node has seen its old one die
(keepalive takes up to 15 s), so a few may overlap, never many."""

MAX_SAMPLE_STREAMS = 32
"""Sample streams a node serves at once (the samples door's limit, each holding a thread of
its pool for as long as it streams: a follower until the run ends)."""

READ_ONLY = frozenset({"Status", "StreamSamples"})
"""Control calls that may leave ``run_id`` empty (any run): they change nothing."""

_Request = TypeVar("_Request")
_Reply = TypeVar("_Reply")
_Method = Callable[["ControlServicer", _Request, grpc.ServicerContext], _Reply]


def _mapped(method: _Method[_Request, _Reply]) -> _Method[_Request, _Reply]:
    """Turn the runtime's exceptions into status codes with their one-line message; every
    call passes the gate first, and every call but Configure must be for the node's run."""

    @functools.wraps(method)
    def wrapper(self: ControlServicer, request: _Request, context: grpc.ServicerContext) -> _Reply:
        self.gate.control(context)
        try:
            if method.__name__ != "Configure":
                self.same_run(method.__name__, getattr(request, "run_id", ""))
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
            context.abort(grpc.StatusCode.INTERNAL, shorten(f"{type(exc).__name__}: {exc}"))
        raise AssertionError("context.abort raises")  # pragma: no cover

    return wrapper


class ControlServicer(control_pb2_grpc.ControlServicer):
    """Control calls, synchronous: each runs on its door's threads with a
    :class:`~starling.node.runtime.doors.ThreadContext` (Configure loads data, Checkpoint
    writes files: not on the node's loop). How many run at once is their doors' business
    (:mod:`starling.node.runtime.doors`: the unary calls on one, ``StreamSamples`` on another,
    :data:`MAX_SAMPLE_STREAMS` at most). Every call names the run it is meant for; one for
    another run is refused naming both (:meth:`same_run`)."""

    def __init__(
        self,
        runtime: NodeRuntime,
        gate: Gate | None = None,
        refusals: Callable[[], dict[str, int]] | None = None,
    ) -> None:
        self.runtime = runtime
        self.gate = gate or Gate(runtime)
        self.refusals = refusals or dict
        """What the node refused before serving, by "<door>:<reason>" (for Status)."""
        self.other_runs = 0
        """Calls refused because they were meant for another run."""

    def same_run(self, call: str, asked: str) -> None:
        """PreconditionError, naming both runs, for a call meant for another run than the
        one the node is configured for (an empty ``asked`` passes for read-only calls)."""
        current = self.runtime.run_id
        if not current or asked == current or (not asked and call in READ_ONLY):
            return
        self.other_runs += 1
        experiment = self.runtime.status().experiment
        meant = f"run {asked!r}" if asked else "no run"
        raise PreconditionError(
            f"{call} refused: it names {meant}, but this node runs {current!r} "
            f"(experiment {experiment!r}); is the run record an old one?"
        )

    @_mapped
    def Configure(
        self, request: control_pb2.NodeConfig, context: grpc.ServicerContext
    ) -> control_pb2.ConfigureReply:
        secrets = PeerSecrets(
            request.peer_secret, dict(request.send_secrets), dict(request.accept_secrets)
        )
        configured = self.runtime.configure(
            convert.config_to_spec(request),
            fresh=request.fresh,
            peer_secret=secrets,
            run_id=request.run_id,
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
        status = self.runtime.status()
        refused = self.refusals()
        for key, count in (
            ("control:denied", self.gate.denied["control"]),
            ("peer:denied", self.gate.denied["peer"]),
            ("peer:capacity", status.refused_streams),
            ("control:other_run", self.other_runs),
        ):
            if count:
                refused[key] = refused.get(key, 0) + count
        status = replace(
            status,
            run_id=self.runtime.run_id,
            refused=refused,
            denied_peer_streams=self.gate.denied["peer"],
            denied_control_calls=self.gate.denied["control"],
        )
        return status_to_proto(status)

    def StreamSamples(
        self, request: control_pb2.SamplesRequest, context: grpc.ServicerContext
    ) -> Iterator[control_pb2.SampleBatch]:
        self.gate.control(context)
        if not (request.experiment or request.node_id):  # a stored run names what it reads
            try:
                self.same_run("StreamSamples", request.run_id)
            except PreconditionError as exc:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        yield from self._stream_samples(request, context)

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
        # Named as shown(): a megabyte name, echoed whole, made details no client can read.
        which = f"experiment {shown(request.experiment)} for node {shown(request.node_id)}"
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
    """Inbound links. Each ``Exchange`` stream is a task on the node's loop for its life;
    at most ``max_streams`` are served at once, and one more is refused with
    RESOURCE_EXHAUSTED (and counted). One caller may hold at most
    :data:`STREAMS_PER_SENDER` streams as any one sender (a caller: its certificate's
    names, else its address), counted from the stream's opening, before it proved itself:
    no peer can take the slots of the others, and no stranger those of a genuine sender.

    A stream is admitted in two halves (:class:`~starling.node.runtime.gate.Gate`): its
    claimed sender is checked and sent a challenge, then its first message must prove the
    link's secret; only then is an iterate read. Iterates larger than a few MiB come in
    parts (:mod:`starling.node.protocol.wire`), joined up to :meth:`_bound` bytes."""

    def __init__(
        self,
        runtime: NodeRuntime,
        max_streams: int,
        gate: Gate | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self.runtime = runtime
        self.max_streams = max_streams
        self.max_message_bytes = max_message_bytes
        self.gate = gate or Gate(runtime)
        self._open = 0
        """Streams being served (all on the node's loop: no lock)."""
        self._open_by: collections.Counter[tuple[str, str]] = collections.Counter()

    def open_streams(self) -> int:
        """Inbound streams being served now (the metrics endpoint reads it)."""
        return self._open

    async def Exchange(
        self, request_iterator: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> peer_pb2.ExchangeSummary:
        """One inbound stream, on the node's loop; its requests are the bytes gRPC received
        (the server registers Exchange without a deserializer: :meth:`_exchange` reads an
        iterate's parts without protobuf). A refusal is an ``AbortCall`` for the door."""
        generation = self.runtime.generation  # read first: a Configure after it is seen
        admission = self.gate.peer_opening(context)
        sender = admission.sender
        key = (caller_of(context, orchestrator=False), sender)
        if self._open >= self.max_streams:
            self.runtime.note_refused_stream()
            raise AbortCall(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"node holds its limit of {self.max_streams} inbound peer streams",
            )
        if self._open_by[key] >= STREAMS_PER_SENDER:
            self.runtime.note_refused_stream()
            raise AbortCall(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"peer {shown(sender)} holds its limit of {STREAMS_PER_SENDER} streams to this "
                "node",
            )
        self._open += 1
        self._open_by[key] += 1
        try:
            await context.send_initial_metadata(self.gate.challenge_of(admission))
            hello = await anext(aiter(request_iterator), None)
            if hello is None:  # closed without a message: no proof
                self.gate.peer_unproved(context)
            admission.proof = _proof_of(hello)
            self.gate.peer_proof(context, admission)
            return await self._exchange(request_iterator, context, admission, generation)
        except grpc.RpcError:
            return peer_pb2.ExchangeSummary()  # the caller went away before its proof
        finally:
            self._open -= 1
            self._open_by[key] -= 1
            if not self._open_by[key]:
                del self._open_by[key]

    def _bound(self) -> int:
        """The most bytes an iterate of the configured run may join up to."""
        run = self.runtime.current_run
        largest = iterate_bound(run.spec, run.program) if run is not None else 0
        return min(self.max_message_bytes, largest)

    async def _exchange(
        self,
        request_iterator: AsyncIterator[bytes],
        context: grpc.aio.ServicerContext,
        admission: PeerAdmission,
        generation: int,
    ) -> peer_pb2.ExchangeSummary:
        # A bad message is rejected and counted, never fatal to the stream: the sender's
        # well-formed messages keep flowing.
        received = rejected = 0
        sender = admission.sender
        parts = PartJoiner()
        try:
            async for message in request_iterator:
                try:
                    arrived = parts.add_bytes(message, self._bound())
                except PartsRefused as exc:
                    self.runtime.reject(sender, f"peer {sender!r}: {exc}")
                    rejected += 1
                    continue
                if arrived is None:
                    continue  # more parts to come
                iterate = arrived.iterate
                while True:
                    try:
                        outcome = self.runtime.receive(
                            iterate, sender, generation, arrived.payloads
                        )
                        break
                    except Reconfigured as change:
                        # Configured again since the stream was admitted: a new run, perhaps
                        # with other secrets and in-peers. The stream speaks on only if its
                        # proof passes the gate under the new terms.
                        generation = change.generation
                        self.gate.peer_proof(context, admission)
                    except PreconditionError:
                        # Not configured (a restarted process serving before the orchestrator
                        # configured it, or being configured again): refuse the stream as
                        # retriable, so the sender keeps its messages and sends them again
                        # once this node can use them.
                        raise AbortCall(grpc.StatusCode.UNAVAILABLE, NOT_CONFIGURED) from None
                if outcome == "rejected":
                    rejected += 1
                else:
                    received += 1
        except grpc.RpcError:
            # The sender went away (or sent more than the transport accepts): its stream
            # ends here and its link reconnects.
            pass
        return peer_pb2.ExchangeSummary(received=received, rejected=rejected)


def _proof_of(hello: bytes) -> str:
    """The proof a stream's first message carries: "" (which no link's secret admits) when
    its bytes are not an Iterate."""
    try:
        return peer_pb2.Iterate.FromString(hello).proof
    except Exception:  # noqa: BLE001 - protobuf's DecodeError and its kin
        return ""
