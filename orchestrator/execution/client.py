"""The orchestrator's handle on one node: plain Python in, plain Python out.

Unary calls that fail with UNAVAILABLE (the node is starting, restarting or briefly
unreachable) are retried with exponential backoff and full jitter, a few times
(:data:`RETRY`, through :mod:`starling.orchestrator.core.retry`); a samples stream cut that
way is opened again where it stopped, under the same policy. Any other
failure becomes one readable line naming the node's address: :class:`ConfigError` when the
node refused its configuration (INVALID_ARGUMENT), :class:`NodeUnavailable` otherwise.

Every call into gRPC (a unary call's attempt, a stream's next message, its cancel, the
channel's close) defers a Ctrl-C to its end
(:func:`~starling.orchestrator.core.interrupts.interrupts_deferred`): raised inside gRPC's
code, it could leave the channel's lock taken, and the Stop and collection after it hung.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from starling.node.params import ConfigError
from starling.node.protocol import convert
from starling.node.protocol.contract import (
    Configured,
    LinkCounters,
    NodeState,
    NodeStatus,
    configured_from_proto,
    status_from_proto,
)
from starling.node.protocol.starling.v1 import control_pb2, control_pb2_grpc
from starling.node.spec import NodeSpec
from starling.orchestrator.core.errors import NodeRejected, NodeUnavailable
from starling.orchestrator.core.interrupts import interrupts_deferred
from starling.orchestrator.core.retry import Attempts, RetryPolicy, exponential_jitter, retry
from starling.orchestrator.execution.access import Access

__all__ = [
    "Configured",
    "LinkStats",
    "NodeClient",
    "NodeRejected",
    "NodeStatus",
    "NodeUnavailable",
]

T = TypeVar("T")

RETRY_ATTEMPTS = 5
RETRY_BASE = 0.1
RETRY_CAP = 2.0


def _unavailable(exc: BaseException) -> bool:
    return isinstance(exc, grpc.RpcError) and exc.code() == grpc.StatusCode.UNAVAILABLE


STOPPING_WAIT = 60.0
"""Seconds :meth:`NodeClient.stop` waits, after the Stop call, for a node that says
``stopping`` (a round computing when Stop came) to say ``stopped``."""

STOPPING_POLL = 0.2
"""Seconds between its Status calls meanwhile."""


RETRY = RetryPolicy(RETRY_ATTEMPTS, _unavailable, exponential_jitter(RETRY_BASE, RETRY_CAP))
"""Calls a node answered UNAVAILABLE: five tries in all, waits of full jitter up to 0.1·2^k s
(capped at 2 s)."""


LinkStats = LinkCounters
"""The counters of one link, as the node reports them (one type: the contract's)."""

# Configured and NodeStatus, what configure() and status() return, are the wire contract's
# plain types (starling.node.protocol.contract), named here for the orchestrator's modules.


_DEFAULT_ACCESS = Access(run_id="")
"""Clients made without an Access share one (no TLS, no token, one random peer secret per
orchestrator process) and name no run: a node answers their read-only calls (Status, a
stored run's samples) whatever it runs, and refuses the others naming its run. A run makes
its own, with its run id (:mod:`starling.orchestrator.execution.runner`)."""


class NodeClient:
    def __init__(
        self,
        address: str,
        timeout: float = 10.0,
        access: Access | None = None,
        node_id: str = "",
        sleep: Callable[[float], None] = time.sleep,
    ):
        """``node_id``: with TLS, the node's certificate must name it. ``sleep`` pauses
        between retries (a test hands its own clock's)."""
        self.address = address
        self.timeout = timeout
        self._retry = dataclasses.replace(RETRY, sleep=sleep)
        self.access = access or _DEFAULT_ACCESS
        with interrupts_deferred():
            self._channel = self.access.channel(address, node_id)
        self._control = control_pb2_grpc.ControlStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    def __enter__(self) -> NodeClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------ calls

    def wait_ready(self, timeout: float = 15.0) -> None:
        """Block until the node's health service says SERVING."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise NodeUnavailable(
                    f"node at {self.address} did not become ready within {timeout:g} s ({last})"
                )
            try:
                with interrupts_deferred():
                    reply = self._health.Check(
                        health_pb2.HealthCheckRequest(service=""),
                        timeout=min(remaining, 2.0),
                        wait_for_ready=True,
                    )
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
                last = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
            except grpc.RpcError as exc:
                last = f"{exc.code().name}: {exc.details()}"
            time.sleep(min(0.05, max(deadline - time.monotonic(), 0)))

    @property
    def run_id(self) -> str:
        """The run every call names (the Access's)."""
        return self.access.run_id

    def configure_request(self, spec: NodeSpec, fresh: bool = False) -> control_pb2.NodeConfig:
        """What :meth:`configure` sends: the spec, the run's id, and the secrets of the
        node's own links."""
        config = convert.spec_to_config(spec)
        config.fresh = fresh
        config.run_id = self.run_id
        own, send, accept = self.access.link_secrets(
            spec.node_id, spec.out_peers(), spec.in_peers()
        )
        config.peer_secret = own  # never the run's: every link's secret derives from it
        config.send_secrets.update(send)
        config.accept_secrets.update(accept)
        return config

    def configure(self, spec: NodeSpec, fresh: bool = False) -> Configured:
        """Send the node its spec; ``fresh`` drops state it holds from an earlier run."""
        config = self.configure_request(spec, fresh)
        reply = self._call(
            "configure",
            lambda t: self._control.Configure(config, timeout=t),
            timeout=max(self.timeout, 60.0),
        )  # loading data may take a while
        return configured_from_proto(reply)

    def start(self) -> None:
        self._call(
            "start",
            lambda t: self._control.Start(control_pb2.StartRequest(run_id=self.run_id), timeout=t),
        )

    def stop(self, stopping_wait: float = STOPPING_WAIT) -> None:
        """Stop the node's round loop. A node that says ``stopping`` (Stop found a round
        computing) is asked again every :data:`STOPPING_POLL` seconds until it says
        anything else, for up to ``stopping_wait`` seconds: its store may take that round's
        sample until then, so samples are collected after this returns. A node still
        stopping after that is a :class:`NodeUnavailable` naming its round."""
        self._call(
            "stop",
            lambda t: self._control.Stop(control_pb2.StopRequest(run_id=self.run_id), timeout=t),
            timeout=max(self.timeout, 15.0),
        )
        deadline = time.monotonic() + stopping_wait
        while (status := self.status()).state == NodeState.STOPPING:
            if time.monotonic() >= deadline:
                raise NodeUnavailable(
                    f"node at {self.address} is still computing round {status.round} "
                    f"{stopping_wait:g} s after Stop; its store may take that round's sample"
                )
            time.sleep(STOPPING_POLL)

    def status(self, attempts: int = RETRY_ATTEMPTS) -> NodeStatus:
        """The node's state, round and counters; ``attempts=1`` fails fast on a dead node."""
        reply = self._call(
            "status",
            lambda t: self._control.Status(
                control_pb2.StatusRequest(run_id=self.run_id), timeout=t
            ),
            attempts=attempts,
        )
        return status_from_proto(reply)

    def samples(
        self, offset: int = 0, follow: bool = False, stored_run: tuple[str, str] | None = None
    ) -> Iterator[tuple[int, np.ndarray]]:
        """Stored samples from index ``offset`` as (round, (chains, d) array).

        A stream cut by UNAVAILABLE is re-opened where it stopped (with the same retry
        policy as unary calls); with ``follow`` the stream ends when the run does.
        ``stored_run`` = (experiment, node id) reads that run's store even when the node is
        not configured for it (a node restarted idle on its state dir), without follow.
        """
        experiment, node_id = stored_run or ("", "")
        index = max(offset, 0)
        attempts = Attempts(self._retry)
        # A bounded read must not hang on a node that stopped answering; a followed stream
        # lasts as long as the run (keepalive notices a dead connection).
        timeout = None if follow else max(self.timeout, 60.0)
        # A Ctrl-C waits for the next message only where a deadline bounds that wait.
        next_batch = _next_deferred if timeout is not None else _next_now
        while True:
            request = control_pb2.SamplesRequest(
                offset=index,
                follow=follow,
                experiment=experiment,
                node_id=node_id,
                run_id=self.run_id,
            )
            with interrupts_deferred():
                stream = self._control.StreamSamples(request, timeout=timeout)
            try:
                while (batch := next_batch(stream)) is not None:
                    attempts.succeeded()
                    for sample in batch.samples:
                        index = sample.index + 1
                        yield int(sample.round), convert.array_from_tensor(sample.value)
                return
            except grpc.RpcError as exc:
                try:
                    attempts.failed(exc)  # waits, or raises when it is not worth a retry
                except grpc.RpcError:
                    raise self._error("samples", exc) from None
            finally:
                with interrupts_deferred():
                    stream.cancel()

    def set_link(
        self,
        receiver: str,
        up: bool | None = None,
        drop: float | None = None,
        delay_ms: float | None = None,
    ) -> None:
        request = control_pb2.SetLinkRequest(receiver=receiver, run_id=self.run_id)
        if up is not None:
            request.up = up
        if drop is not None:
            request.drop = drop
        if delay_ms is not None:
            request.delay_ms = delay_ms
        self._call("set_link", lambda t: self._control.SetLink(request, timeout=t))

    def hold(self, round_index: int | None) -> None:
        """Have the node stop before ``round_index`` and wait there (None releases)."""
        request = control_pb2.HoldRequest(
            round=-1 if round_index is None else round_index, run_id=self.run_id
        )
        self._call("hold", lambda t: self._control.Hold(request, timeout=t))

    def set_peer_down(self, peer: str, down: bool) -> None:
        """Tell the node its in-peer ``peer`` is down (stop waiting for it) or back."""
        request = control_pb2.PeerDownRequest(peer=peer, down=down, run_id=self.run_id)
        self._call("set_peer_down", lambda t: self._control.SetPeerDown(request, timeout=t))

    def checkpoint(self) -> None:
        self._call(
            "checkpoint",
            lambda t: self._control.Checkpoint(
                control_pb2.CheckpointRequest(run_id=self.run_id), timeout=t
            ),
            timeout=max(self.timeout, 30.0),
        )

    def close(self) -> None:
        with interrupts_deferred():
            self._channel.close()

    # ------------------------------------------------------------ plumbing

    def _call(
        self,
        what: str,
        call: Callable[[float], T],
        timeout: float | None = None,
        attempts: int = RETRY_ATTEMPTS,
    ) -> T:
        timeout = self.timeout if timeout is None else timeout
        try:
            return retry(lambda: _deferred_call(call, timeout), self._retry.tries(attempts))
        except grpc.RpcError as exc:
            raise self._error(what, exc) from None

    def _error(self, what: str, exc: grpc.RpcError) -> Exception:
        code = exc.code()
        details = exc.details() or code.name
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            # The node's message starts with the field it names; keep it first.
            return ConfigError(f"{details} (node at {self.address})")
        if code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.RESOURCE_EXHAUSTED):
            return NodeRejected(f"node at {self.address}: {what}: {details}")
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return NodeUnavailable(f"node at {self.address} is unreachable ({what}: {details})")
        return NodeUnavailable(f"node at {self.address}: {what} failed: {code.name}: {details}")


def _deferred_call(call: Callable[[float], T], timeout: float) -> T:
    """One attempt of a unary call; a Ctrl-C during it is raised once it has returned."""
    with interrupts_deferred():
        return call(timeout)


def _next_deferred(stream: Iterator[T]) -> T | None:
    """The stream's next message, or None at its end; a Ctrl-C while waiting for it is raised
    once it is here (a call's deadline bounds the wait)."""
    with interrupts_deferred():
        return next(stream, None)


def _next_now(stream: Iterator[T]) -> T | None:
    """The stream's next message, or None at its end; a Ctrl-C is raised where it lands (a
    followed stream has no deadline to wait for)."""
    return next(stream, None)
