"""Every service a node serves, bounded: its own threads, its own limits, refusals counted.

gRPC's synchronous server runs every call's handler on a thread of one pool, and a streaming
call holds its thread for as long as the caller keeps it open. With one shared pool, a few
hundred idle streams of any service (reflection, a health watch, a Peer stream that never
proves itself) took every thread, and Health and Control then went unanswered. Here each
service is a *door* (:class:`Door`) with

* **its own thread pool** (gRPC takes a handler's ``experimental_thread_pool``), so no door
  can take another's threads: Health and Control always have theirs;
* **a limit of calls served at once**, for callers in general (``public``) and for any one
  caller (``per_caller``), and slots kept for the orchestrator (``reserved``) on a node that
  can tell it from others (TLS or a token). A call past a limit is refused at once with
  RESOURCE_EXHAUSTED, before its request is read;
* **a time limit on a caller that has not sent its first message**
  (:data:`FIRST_MESSAGE_SECONDS`): a unary call is only read once its caller passed the
  gate, and a call whose request (or a stream's first message, a Peer stream's proof) does
  not come in time is cancelled (:class:`Watchdog`), counted ``idle``.

A *caller* is who a call comes from as far as the node can tell before reading it: the
orchestrator (its certificate, its token), else the DNS names of the client's certificate,
else its IP address. Every handler is registered as reading a request *stream* (a unary
call's one message is taken from it), so that nothing is read before these checks.

Refusals are counted by ``"<door>:<reason>"`` (:meth:`Doors.refusals`, the ``refused`` map
of ``Status`` and ``starling_refused_requests`` of the metrics) and logged, the first few of
each kind and then one in a thousand, so a flood cannot flood the log.
"""

from __future__ import annotations

import collections
import contextvars
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc

__all__ = [
    "FIRST_MESSAGE_SECONDS",
    "Door",
    "DoorLimits",
    "Doors",
    "Watchdog",
    "caller_of",
    "first_message_arrived",
]

log = logging.getLogger("starling.node")

FIRST_MESSAGE_SECONDS = 10.0
"""How long a call may keep its first message (a unary request, a stream's first message,
a Peer stream's proof) before it is cancelled: far beyond a round trip on any network a
node runs on, far below what would let idle calls pile up."""

SPARE_THREADS = 4
"""Threads of each door beyond its limits: refusals and the orchestrator's slots are
served by them while every public slot is held."""

LOG_FIRST = 10
"""Refusals of one kind logged one by one; after these, one in :data:`LOG_EVERY`."""
LOG_EVERY = 1000

ORCHESTRATOR = "orchestrator"
"""The caller key of calls that showed the orchestrator's credentials."""


@dataclass(frozen=True)
class DoorLimits:
    """How many calls a door serves at once: from callers in general, from any one of them,
    and kept for the orchestrator (0: it shares the public ones); and its threads (by
    default one a slot and :data:`SPARE_THREADS`)."""

    public: int
    per_caller: int
    reserved: int = 0
    threads: int = 0

    @property
    def pool(self) -> int:
        return self.threads or self.public + self.reserved + SPARE_THREADS


class Door:
    """One service's threads and limits (see module)."""

    def __init__(self, name: str, limits: DoorLimits, what: str):
        self.name = name
        self.limits = limits
        self.what = what
        """What the door's calls are, for a refusal's message (``"peer streams"``)."""
        self.pool = futures.ThreadPoolExecutor(
            max_workers=limits.pool,
            thread_name_prefix=f"starling-{name}",
        )
        self._lock = threading.Lock()
        self._public = 0
        self._reserved = 0
        self._by_caller: collections.Counter[str] = collections.Counter()

    def enter(self, caller: str) -> tuple[bool, str]:
        """Take a slot for ``caller``: ``(True, "reserved" | "public")``, the slot taken, or
        ``(False, why)`` (``busy``: every public slot is held; ``caller_busy``: the caller
        holds its share of them)."""
        limits = self.limits
        with self._lock:
            if caller == ORCHESTRATOR and self._reserved < limits.reserved:
                self._reserved += 1
                return True, "reserved"
            if self._public >= limits.public:
                return False, "busy"
            if caller != ORCHESTRATOR and self._by_caller[caller] >= limits.per_caller:
                return False, "caller_busy"
            self._public += 1
            self._by_caller[caller] += 1
            return True, "public"

    def leave(self, caller: str, slot: str) -> None:
        """Give back the ``slot`` (as :meth:`enter` said) that ``caller`` held."""
        with self._lock:
            if slot == "reserved":
                self._reserved -= 1
                return
            self._public -= 1
            self._by_caller[caller] -= 1
            if not self._by_caller[caller]:
                del self._by_caller[caller]

    def serving(self) -> int:
        """Calls served now."""
        with self._lock:
            return self._public + self._reserved

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


class Watchdog:
    """Cancels calls whose first message does not come in time, from one thread for all."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Ticket]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    def arm(self, context: grpc.ServicerContext, seconds: float) -> _Ticket:
        ticket = _Ticket(context)
        with self._wake:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="starling-watchdog")
                self._thread.daemon = True
                self._thread.start()
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._order), ticket))
            self._wake.notify()
        return ticket

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._closed and (not self._heap or self._heap[0][0] > time.monotonic()):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._wake.wait(timeout)
                if self._closed:
                    return
                _, _, ticket = heapq.heappop(self._heap)
            ticket.fire()


class _Ticket:
    """One armed call: disarmed once its first message came, fired (the call cancelled)
    otherwise."""

    def __init__(self, context: grpc.ServicerContext):
        self._context = context
        self.slot = ""
        """The door's slot the call holds (:meth:`Door.enter`)."""
        self._lock = threading.Lock()
        self.armed = True
        self.fired = False

    def disarm(self) -> None:
        with self._lock:
            self.armed = False

    def fire(self) -> None:
        with self._lock:
            if not self.armed:
                return
            self.armed, self.fired = False, True
        self._context.cancel()


_current: contextvars.ContextVar[_Ticket | None] = contextvars.ContextVar(
    "starling_call_ticket", default=None
)


def first_message_arrived() -> None:
    """The call being served got its first message (a Peer stream its proof): stop its
    watchdog. Called by the door's own reading for every call; a handler that reads its
    stream itself may call it once the caller has proved who it is."""
    ticket = _current.get()
    if ticket is not None:
        ticket.disarm()


def caller_of(context: grpc.ServicerContext, orchestrator: bool) -> str:
    """Who a call comes from, as far as the node can tell before reading it (see module)."""
    if orchestrator:
        return ORCHESTRATOR
    names = context.auth_context().get("peer_dns", [])
    if names:
        return "cert:" + ",".join(sorted(n.decode(errors="replace") for n in names))
    peer = context.peer()  # ipv4:1.2.3.4:5678, ipv6:[::1]:5678, unix:/path
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        return rest.rpartition(":")[0].strip("[]") or peer
    return kind or peer


@dataclass(frozen=True)
class Entrance:
    """How calls of one method come in: through which door, past which check."""

    door: Door
    check: Callable[[grpc.ServicerContext], None] | None = None
    """Runs before anything is read (the gate: aborts a caller it refuses)."""


class Doors(grpc.ServerInterceptor):  # type: ignore[misc]
    """The server interceptor that puts every method behind its door (see module).

    ``route(method)`` gives a method's :class:`Entrance` (None: left to gRPC's own pool);
    ``is_orchestrator(context)`` tells the orchestrator's calls, on a node that can."""

    def __init__(
        self,
        route: Callable[[str], Entrance | None],
        is_orchestrator: Callable[[grpc.ServicerContext], bool],
        first_message_seconds: float = FIRST_MESSAGE_SECONDS,
    ):
        self._route = route
        self._is_orchestrator = is_orchestrator
        self.first_message_seconds = first_message_seconds
        self.watchdog = Watchdog()
        self._lock = threading.Lock()
        self._refused: collections.Counter[str] = collections.Counter()

    # ------------------------------------------------------------ counting

    def refuse(
        self, door: str, reason: str, context: grpc.ServicerContext | None, caller: str = ""
    ) -> int:
        """Count (and, the first times, log) one refusal of ``door`` for ``reason``."""
        key = f"{door}:{reason}"
        with self._lock:
            self._refused[key] += 1
            count = self._refused[key]
        if count <= LOG_FIRST or count % LOG_EVERY == 0:
            where = caller or (context.peer() if context is not None else "?")
            log.warning(
                "refused a %s call from %s: %s (%d so far)",
                door,
                where,
                reason,
                count,
                extra={"event": "refused", "peer": where},
            )
        return count

    def refusals(self) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._refused.items()))

    # ------------------------------------------------------------ the interceptor

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        entrance = self._route(handler_call_details.method)
        if entrance is None:
            return handler
        behaviour = self._behaviour(handler, entrance)
        setattr(behaviour, "experimental_thread_pool", entrance.door.pool)  # noqa: B010
        make = (
            grpc.stream_stream_rpc_method_handler
            if handler.response_streaming
            else grpc.stream_unary_rpc_method_handler
        )
        return make(
            behaviour,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _behaviour(self, handler: grpc.RpcMethodHandler, entrance: Entrance) -> Any:
        original = (
            handler.unary_unary
            or handler.unary_stream
            or handler.stream_unary
            or handler.stream_stream
        )
        unary_request = not handler.request_streaming

        def admitted(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            """The original call, once admitted: its one request, or its stream."""
            if unary_request:
                request = self._first(requests, context, entrance.door.name)
                return original(request, context)
            return original(_Watched(requests), context)

        if handler.response_streaming:

            def streaming(requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
                caller, ticket = self._enter(entrance, context)
                try:
                    yield from admitted(requests, context)
                finally:
                    self._leave(entrance.door, caller, ticket, context)

            return streaming

        def unary(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            caller, ticket = self._enter(entrance, context)
            try:
                return admitted(requests, context)
            finally:
                self._leave(entrance.door, caller, ticket, context)

        return unary

    def _enter(self, entrance: Entrance, context: grpc.ServicerContext) -> tuple[str, _Ticket]:
        """Check, take a slot, arm the watchdog; aborts the call when refused."""
        door = entrance.door
        if entrance.check is not None:
            entrance.check(context)
        caller = caller_of(context, self._is_orchestrator(context))
        taken, slot = door.enter(caller)
        if not taken:
            self.refuse(door.name, slot, context, caller)
            if slot == "caller_busy":
                message = f"one caller may hold {door.limits.per_caller} {door.what} at once"
            else:
                message = f"node serves its limit of {door.limits.public} {door.what} at once"
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
        ticket = self.watchdog.arm(context, self.first_message_seconds)
        ticket.slot = slot
        _current.set(ticket)
        return caller, ticket

    def _leave(
        self, door: Door, caller: str, ticket: _Ticket, context: grpc.ServicerContext
    ) -> None:
        ticket.disarm()
        door.leave(caller, ticket.slot)
        if ticket.fired:
            self.refuse(door.name, "idle", context, caller)

    @staticmethod
    def _first(requests: Iterator[Any], context: grpc.ServicerContext, door: str) -> Any:
        """A unary call's request; the call ends if none comes (cancelled by the watchdog,
        or the caller closed its side without one)."""
        try:
            request = next(requests)
        except StopIteration:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{door}: a call without a request")
        first_message_arrived()
        return request

    def close(self) -> None:
        self.watchdog.close()


class _Watched:
    """A request stream that stops its call's watchdog at its first message."""

    def __init__(self, requests: Iterator[Any]):
        self._requests = requests
        self._first = True

    def __iter__(self) -> _Watched:
        return self

    def __next__(self) -> Any:
        item = next(self._requests)
        if self._first:
            self._first = False
            first_message_arrived()
        return item
