"""The node's event loop: one ``asyncio`` loop on a thread of its own, where the round
loop, the outbound links and the ``grpc.aio`` server run (issue 32's port, measured in
docs/performance.md).

A message's whole way runs on this one thread: the round loop
(:meth:`NodeRuntime._rounds <starling.node.runtime.runtime.NodeRuntime._rounds>`) hands a
message to its link (:mod:`starling.node.runtime.links`), whose task writes it to its
``grpc.aio`` stream as soon as the round loop awaits something; an incoming one is read by
its Peer stream's task (:class:`~starling.node.runtime.servicers.PeerServicer`), filed in
the inbox, and the round loop woken (:meth:`NodeLoop.waker`), all without a thread
hand-off. Threads are left to what must not hold up the loop: Control's synchronous calls
and health watches, on their doors' threads (:mod:`starling.node.runtime.doors`); a
long sampler step, on a thread of its own (:meth:`NodeLoop.computing`).

Other threads reach the loop through :meth:`NodeLoop.submit` and :meth:`NodeLoop.call`;
the durable checkpoint's ``fsync`` leaves it through :meth:`NodeLoop.on_disk`, one bounded
executor, so a slow disk holds up the round that waits for it and never the links.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["NodeLoop"]

T = TypeVar("T")


class NodeLoop:
    """An ``asyncio`` loop running on its own daemon thread until :meth:`close`."""

    def __init__(self, name: str = "node-loop"):
        self.loop = asyncio.new_event_loop()
        self._disk = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"{name}-disk")
        self._name = name
        started = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(started,), name=name, daemon=True)
        self._thread.start()
        started.wait()

    def _serve(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(started.set)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def in_loop(self) -> bool:
        """Whether the caller runs on the loop's thread."""
        return threading.current_thread() is self._thread

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coroutine`` on the loop (from any thread); its future, for other threads."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def call(self, function: Callable[..., object], *args: object) -> None:
        """Call ``function(*args)`` on the loop: at once if the caller is on it, else soon;
        not at all once the loop is closed (the node is shutting down)."""
        if self.in_loop():
            function(*args)
            return
        with contextlib.suppress(RuntimeError):  # closed meanwhile
            self.loop.call_soon_threadsafe(function, *args)

    def run(self, function: Callable[..., T], *args: object) -> T:
        """``function(*args)`` on the loop, its result (or exception) given back to the
        caller, which waits: for what must be made on the loop's thread (a ``grpc.aio``
        server binds to the loop it is created on)."""
        if self.in_loop():
            return function(*args)

        async def on_loop() -> T:
            return function(*args)

        return self.submit(on_loop()).result()

    def waker(self, event: asyncio.Event) -> Callable[[], None]:
        """A function any thread may call to set ``event`` (an event of this loop)."""
        return lambda: self.call(event.set)

    async def on_disk(self, function: Callable[..., T], *args: object) -> T:
        """``function(*args)`` on the disk executor (one thread), awaited on the loop."""
        return await self.loop.run_in_executor(self._disk, function, *args)

    async def computing(self, function: Callable[..., T], *args: object) -> T:
        """``function(*args)`` on a thread of its own, awaited on the loop: a long
        computation that must not hold up what else runs on the loop. The thread is a
        daemon: a process shutting down does not wait for a computation it gave up on
        (an executor's threads are joined at exit)."""
        done: asyncio.Future[T] = self.loop.create_future()

        def settle(outcome: Callable[[], None]) -> None:
            if not done.done():  # not cancelled meanwhile
                outcome()

        def compute() -> None:
            try:
                result = function(*args)
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                failure = exc
                self.call(settle, lambda: done.set_exception(failure))
            else:
                self.call(settle, lambda: done.set_result(result))

        threading.Thread(target=compute, name=f"{self._name}-compute", daemon=True).start()
        return await done

    def close(self) -> None:
        """Stop the loop (tasks still on it are dropped) and the disk executor."""
        if self.loop.is_closed():
            return
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:  # closed meanwhile
            pass
        if not self.in_loop():
            self._thread.join(5.0)
        self._disk.shutdown(wait=False)
