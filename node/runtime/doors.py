"""Every service a node serves, bounded: its own limits, its own threads where it needs
them, refusals counted.

The node serves on ``grpc.aio``, on the node's event loop (:mod:`starling.node.runtime.
event_loop`): a call held open costs a task, not a thread. Some handlers are still
synchronous (Control, which loads data and writes files; grpcio-health's blocking watch);
those run on threads. Each service is a *door* (:class:`Door`) with

* **a limit of calls served at once**, for callers in general (``public``) and for any one
  caller (``per_caller``), and slots kept for the orchestrator (``reserved``) on a node that
  can tell it from others (TLS or a token). A call past a limit is refused at once with
  RESOURCE_EXHAUSTED, before its request is read;
* **its own thread pool** for its synchronous handlers, so that no door can take another's
  threads: Health and Control always have theirs;
* **a time limit on a caller that has not sent its first message**
  (:data:`FIRST_MESSAGE_SECONDS`): a unary call is only read once its caller passed the
  gate, and a call whose request (or a stream's first message, a Peer stream's proof) does
  not come in time is cancelled (CANCELLED), counted ``idle``.

A *caller* is who a call comes from as far as the node can tell before reading it: the
orchestrator (its certificate, its token), else the DNS names of the client's certificate,
else its IP address. Every handler is registered as reading a request *stream* (a unary
call's one message is taken from it), so that nothing is read before these checks.

A handler on a door's thread sees a :class:`ThreadContext`; a refusal anywhere (the gate, a
handler) is an :class:`AbortCall` that the door carries out on the loop.

Refusals are counted by ``"<door>:<reason>"`` (:meth:`Doors.refusals`, the ``refused`` map
of ``Status`` and ``starling_refused_requests`` of the metrics) and logged, the first few of
each kind and then one in a thousand, so a flood cannot flood the log.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import logging
import threading
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any, NoReturn

import grpc

__all__ = [
    "FIRST_MESSAGE_SECONDS",
    "AbortCall",
    "Door",
    "DoorLimits",
    "Doors",
    "FirstMessageLate",
    "ThreadContext",
    "caller_of",
]

log = logging.getLogger("starling.node")

FIRST_MESSAGE_SECONDS = 10.0
"""How long a call may keep its first message (a unary request, a stream's first message,
a Peer stream's proof) before it is cancelled: far beyond a round trip on any network a
node runs on, far below what would let idle calls pile up."""

SPARE_THREADS = 4
"""Threads of each door beyond its slots: a synchronous streaming handler may hold one for
a moment after its call ended (until it next sees the call inactive), while the slot is
already another call's."""

LOG_FIRST = 10
"""Refusals of one kind logged one by one; after these, one in :data:`LOG_EVERY`."""
LOG_EVERY = 1000

ORCHESTRATOR = "orchestrator"
"""The caller key of calls that showed the orchestrator's credentials."""


@dataclass(frozen=True)
class DoorLimits:
    """How many calls a door serves at once: from callers in general, from any one of them,
    and kept for the orchestrator (0: it shares the public ones)."""

    public: int
    per_caller: int
    reserved: int = 0

    @property
    def pool(self) -> int:
        """Threads for the door's synchronous handlers: one a slot and
        :data:`SPARE_THREADS`."""
        return self.public + self.reserved + SPARE_THREADS


class Door:
    """One service's limits, and threads for its synchronous handlers (see module)."""

    def __init__(self, name: str, limits: DoorLimits, what: str):
        self.name = name
        self.limits = limits
        self.what = what
        """What the door's calls are, for a refusal's message (``"peer streams"``)."""
        self._pool: futures.ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._public = 0
        self._reserved = 0
        self._by_caller: collections.Counter[str] = collections.Counter()

    @property
    def pool(self) -> futures.ThreadPoolExecutor:
        """The threads of the door's synchronous handlers (made at the first one)."""
        with self._lock:
            if self._pool is None:
                self._pool = futures.ThreadPoolExecutor(
                    max_workers=self.limits.pool, thread_name_prefix=f"starling-{self.name}"
                )
            return self._pool

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
        with self._lock:
            pool = self._pool
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


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


class AbortCall(Exception):  # noqa: N818 - what it asks for, not an error of the node
    """End the call being served with ``code`` and ``details``. Raised by the gate and by a
    handler's context on a door's thread (:class:`ThreadContext`); the door carries it out on
    the server's loop (``grpc.aio``'s ``abort`` is a coroutine of that loop)."""

    def __init__(self, code: grpc.StatusCode, details: str):
        super().__init__(details)
        self.code = code
        self.details = details


class FirstMessageLate(Exception):  # noqa: N818 - a caller's silence, not an error
    """A call's first message did not come within :data:`FIRST_MESSAGE_SECONDS`."""


class ThreadContext:
    """The context a synchronous handler sees on its door's thread: the parts of
    ``grpc.ServicerContext`` the node's handlers and grpcio-health use, over the call's
    ``grpc.aio`` context. ``abort`` raises :class:`AbortCall` for the door to carry out;
    the call is no longer active once its door has seen it end (:meth:`end`), which also
    runs the callbacks a handler registered (a blocking health watch ends with them)."""

    def __init__(self, context: grpc.aio.ServicerContext):
        self._context = context
        self._ended = False
        self._callbacks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn:
        raise AbortCall(code, details)

    def is_active(self) -> bool:
        return not self._ended and not self._context.done()

    def add_callback(self, callback: Callable[[], None]) -> bool:
        with self._lock:
            if self._ended:
                return False
            self._callbacks.append(callback)
            return True

    def end(self) -> None:
        """The call ended (served, failed or cancelled): run the registered callbacks."""
        with self._lock:
            self._ended = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def peer(self) -> str:
        return self._context.peer()

    def auth_context(self) -> dict[str, list[bytes]]:
        return self._context.auth_context()

    def invocation_metadata(self) -> Any:
        return self._context.invocation_metadata()

    def time_remaining(self) -> float | None:
        return self._context.time_remaining()

    def set_code(self, code: grpc.StatusCode) -> None:
        self._context.set_code(code)

    def set_details(self, details: str) -> None:
        self._context.set_details(details)


class _Call:
    """One call inside its door: who made it, the slot it holds, when its first message is
    due and whether it came too late."""

    def __init__(self, caller: str, slot: str, due: float):
        self.caller = caller
        self.slot = slot
        self.due = due
        self.late = False


class _Watched:
    """A call's request stream whose first message must come by the call's due time
    (:class:`FirstMessageLate` otherwise)."""

    def __init__(self, requests: AsyncIterable[Any], call: _Call):
        self._requests = requests
        self._reading: AsyncIterator[Any] | None = None
        self._call = call

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> Any:
        if self._reading is not None:
            return await self._reading.__anext__()
        # Only now: gRPC's reader of a call is a coroutine, which, made and never awaited
        # (a stream refused before its first message), is warned about on stderr.
        self._reading = self._requests.__aiter__()
        wait = max(0.0, self._call.due - asyncio.get_running_loop().time())
        try:
            item = await asyncio.wait_for(self._reading.__anext__(), wait)
        except asyncio.TimeoutError:
            self._call.late = True
            raise FirstMessageLate from None
        return item


_END = object()


def _next_or_end(responses: Iterator[Any]) -> Any:
    return next(responses, _END)


class Doors(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """The server interceptor that puts every method behind its door (see module).

    ``route(method)`` gives a method's :class:`Entrance` (None: served as registered);
    ``is_orchestrator(context)`` tells the orchestrator's calls, on a node that can."""

    def __init__(
        self,
        route: Callable[[str], Entrance | None],
        is_orchestrator: Callable[[grpc.aio.ServicerContext], bool],
        first_message_seconds: float = FIRST_MESSAGE_SECONDS,
    ):
        self._route = route
        self._is_orchestrator = is_orchestrator
        self.first_message_seconds = first_message_seconds
        self._lock = threading.Lock()
        self._refused: collections.Counter[str] = collections.Counter()

    # ------------------------------------------------------------ counting

    def refuse(
        self, door: str, reason: str, context: grpc.aio.ServicerContext, caller: str = ""
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

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        entrance = self._route(handler_call_details.method)
        if entrance is None:
            return handler
        make = (
            grpc.stream_stream_rpc_method_handler
            if handler.response_streaming
            else grpc.stream_unary_rpc_method_handler
        )
        return make(
            self._behaviour(handler, entrance),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    def _behaviour(self, handler: grpc.RpcMethodHandler, entrance: Entrance) -> Any:
        """The method's handler behind its door, as a handler of a request stream."""
        behind = _Behind(self, entrance, handler)
        return behind.streaming if handler.response_streaming else behind.unary

    @contextlib.asynccontextmanager
    async def inside(
        self, entrance: Entrance, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[_Call]:
        """A call inside its door: entered (or refused), refusals carried out, left."""
        call = await self._enter(entrance, context)
        try:
            yield call
        except AbortCall as abort:
            await context.abort(abort.code, abort.details)
        except FirstMessageLate:
            await context.abort(
                grpc.StatusCode.CANCELLED,
                f"{entrance.door.name}: no first message within {self.first_message_seconds:g} s",
            )
        finally:
            entrance.door.leave(call.caller, call.slot)
            if call.late:
                self.refuse(entrance.door.name, "idle", context, call.caller)

    async def _enter(self, entrance: Entrance, context: grpc.aio.ServicerContext) -> _Call:
        """Check, take a slot, set the first message's due time; aborts a refused call."""
        door = entrance.door
        try:
            if entrance.check is not None:
                entrance.check(context)
        except AbortCall as abort:
            await context.abort(abort.code, abort.details)
        caller = caller_of(context, self._is_orchestrator(context))
        taken, slot = door.enter(caller)
        if not taken:
            self.refuse(door.name, slot, context, caller)
            if slot == "caller_busy":
                message = f"one caller may hold {door.limits.per_caller} {door.what} at once"
            else:
                message = f"node serves its limit of {door.limits.public} {door.what} at once"
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
        due = asyncio.get_running_loop().time() + self.first_message_seconds
        return _Call(caller, slot, due)


class _Behind:
    """One method's handler behind its door: a call is entered, its first message watched,
    and a synchronous handler run on the door's threads."""

    def __init__(self, doors: Doors, entrance: Entrance, handler: grpc.RpcMethodHandler):
        self.doors = doors
        self.entrance = entrance
        self.original = (
            handler.unary_unary
            or handler.unary_stream
            or handler.stream_unary
            or handler.stream_stream
        )
        self.unary_request = not handler.request_streaming
        self.on_loop = inspect.iscoroutinefunction(self.original) or inspect.isasyncgenfunction(
            self.original
        )
        if not self.on_loop and not self.unary_request:
            raise TypeError(f"{self.original!r}: a synchronous handler of a request stream")

    async def _argument(self, requests: AsyncIterable[Any], call: _Call) -> Any:
        """What the original takes: its one request, or its (watched) stream."""
        watched = _Watched(requests, call)
        if not self.unary_request:
            return watched
        try:
            return await watched.__anext__()
        except StopAsyncIteration:
            name = self.entrance.door.name
            raise AbortCall(
                grpc.StatusCode.INVALID_ARGUMENT, f"{name}: a call without a request"
            ) from None

    async def unary(self, requests: AsyncIterable[Any], context: grpc.aio.ServicerContext) -> Any:
        async with self.doors.inside(self.entrance, context) as call:
            request = await self._argument(requests, call)
            if self.on_loop:
                return await self.original(request, context)
            threaded = ThreadContext(context)
            try:
                loop = asyncio.get_running_loop()
                pool = self.entrance.door.pool
                return await loop.run_in_executor(pool, self.original, request, threaded)
            finally:
                threaded.end()
        raise AssertionError("unreachable: a refused call is aborted")  # pragma: no cover

    async def streaming(
        self, requests: AsyncIterable[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        async with self.doors.inside(self.entrance, context) as call:
            request = await self._argument(requests, call)
            responses = (
                self.original(request, context)
                if self.on_loop
                else _from_threads(self.entrance.door, self.original, request, context)
            )
            async for response in responses:
                yield response


async def _from_threads(
    door: Door,
    original: Callable[..., Iterable[Any]],
    request: Any,
    context: grpc.aio.ServicerContext,
) -> AsyncIterator[Any]:
    """The responses of a synchronous streaming handler, each made on the door's threads
    (which see the call's ``context`` as a :class:`ThreadContext`)."""
    threaded = ThreadContext(context)
    loop = asyncio.get_running_loop()
    try:
        responses = await loop.run_in_executor(door.pool, lambda: iter(original(request, threaded)))
        while True:
            response = await loop.run_in_executor(door.pool, _next_or_end, responses)
            if response is _END:
                return
            yield response
    finally:
        threaded.end()
