"""The orchestrator's handle on one node: plain Python in, plain Python out.

Unary calls that fail with UNAVAILABLE (the node is starting, restarting or briefly
unreachable) are retried with exponential backoff and full jitter, a few times. Any other
failure becomes one readable line naming the node's address: :class:`ConfigError` when the
node refused its configuration (INVALID_ARGUMENT), :class:`NodeUnavailable` otherwise.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc

from starling.node.params import ConfigError
from starling.node.protocol import convert
from starling.node.protocol.contract import (
    LinkCounters,
    NodeState,
    link_books_from_proto,
    state_from_proto,
)
from starling.node.protocol.starling.v1 import control_pb2, control_pb2_grpc
from starling.node.runtime.network import in_peers, out_peers
from starling.node.spec import DataSpec, NodeSpec
from starling.orchestrator.access import Access
from starling.orchestrator.errors import NodeRejected, NodeUnavailable

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


LinkStats = LinkCounters
"""The counters of one link, as the node reports them (one type: the contract's)."""


@dataclass(frozen=True)
class Configured:
    """What a node said to its configuration: where it starts and what it already holds."""

    next_round: int
    resumed: bool
    """True if it resumed from a checkpoint (a restarted node)."""
    samples_stored: int
    """Samples in its durable store: collection from an offset beyond this must step back."""
    data: DataSpec | None = None
    """The node's own data (``data.source: node``): a synthetic shard's recipe, or only
    ``source="file"``."""


@dataclass(frozen=True)
class NodeStatus:
    node_id: str
    experiment: str
    state: NodeState
    """The node's lifecycle state; a ``str`` enum, so it compares equal to ``"running"``."""
    round: int
    error: str
    samples_stored: int
    outbound: dict[str, LinkStats] = field(default_factory=dict)
    inbound: dict[str, LinkStats] = field(default_factory=dict)
    program_metrics: dict[str, float] = field(default_factory=dict)
    """The sampler program's own figures (``NodeProgram.metrics``)."""
    holding: bool = False
    """Waiting at a hold before ``round`` (see :meth:`NodeClient.hold`)."""
    peers_down: tuple[str, ...] = ()
    """In-peers it was told are down (:meth:`NodeClient.set_peer_down`): not waited for."""
    refused_streams: int = 0
    """Inbound peer streams it refused because it held its limit of them."""
    denied_peer_streams: int = 0
    """Inbound peer streams refused for their identity (secret, certificate, neighbour)."""
    denied_control_calls: int = 0
    """Control calls refused: not the orchestrator's certificate, no or a wrong token."""
    run_id: str = ""
    """The run the node is configured for (the orchestrator's id of it)."""
    refused: dict[str, int] = field(default_factory=dict)
    """What the node refused before serving it, by "<door>:<reason>" (``health:busy``,
    ``peer:idle``, ``tls:handshake``, ``control:other_run``, ...)."""


_DEFAULT_ACCESS = Access()
"""Clients made without an Access share one (no TLS, no token, one random peer secret per
orchestrator process); a run makes its own per experiment (:mod:`starling.orchestrator.runner`)."""


class NodeClient:
    def __init__(
        self, address: str, timeout: float = 10.0, access: Access | None = None, node_id: str = ""
    ):
        """``node_id``: with TLS, the node's certificate must name it."""
        self.address = address
        self.timeout = timeout
        self.access = access or _DEFAULT_ACCESS
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
        own, send, accept = self.access.link_secrets(spec.node_id, out_peers(spec), in_peers(spec))
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
        return Configured(
            next_round=int(reply.next_round),
            resumed=bool(reply.resumed),
            samples_stored=int(reply.samples_stored),
            data=convert.data_from_proto(reply.data) if reply.HasField("data") else None,
        )

    def start(self) -> None:
        self._call(
            "start",
            lambda t: self._control.Start(control_pb2.StartRequest(run_id=self.run_id), timeout=t),
        )

    def stop(self) -> None:
        self._call(
            "stop",
            lambda t: self._control.Stop(control_pb2.StopRequest(run_id=self.run_id), timeout=t),
            timeout=max(self.timeout, 15.0),
        )

    def status(self, attempts: int = RETRY_ATTEMPTS) -> NodeStatus:
        """The node's state, round and counters; ``attempts=1`` fails fast on a dead node."""
        reply = self._call(
            "status",
            lambda t: self._control.Status(
                control_pb2.StatusRequest(run_id=self.run_id), timeout=t
            ),
            attempts=attempts,
        )
        return NodeStatus(
            node_id=reply.node_id,
            experiment=reply.experiment,
            state=state_from_proto(reply.state),
            round=reply.round,
            error=reply.error,
            samples_stored=reply.samples_stored,
            outbound=link_books_from_proto(reply.outbound),
            inbound=link_books_from_proto(reply.inbound),
            program_metrics=dict(sorted(reply.program_metrics.items())),
            holding=reply.holding,
            peers_down=tuple(reply.peers_down),
            refused_streams=reply.refused_streams,
            denied_peer_streams=reply.denied_peer_streams,
            denied_control_calls=reply.denied_control_calls,
            run_id=reply.run_id,
            refused=dict(sorted(reply.refused.items())),
        )

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
        attempt = 0
        # A bounded read must not hang on a node that stopped answering; a followed stream
        # lasts as long as the run (keepalive notices a dead connection).
        timeout = None if follow else max(self.timeout, 60.0)
        while True:
            request = control_pb2.SamplesRequest(
                offset=index,
                follow=follow,
                experiment=experiment,
                node_id=node_id,
                run_id=self.run_id,
            )
            stream = self._control.StreamSamples(request, timeout=timeout)
            try:
                for batch in stream:
                    attempt = 0
                    for sample in batch.samples:
                        index = sample.index + 1
                        yield int(sample.round), convert.array_from_tensor(sample.value)
                return
            except grpc.RpcError as exc:
                code = exc.code()
                if code == grpc.StatusCode.UNAVAILABLE and attempt < RETRY_ATTEMPTS - 1:
                    time.sleep(_backoff(attempt))
                    attempt += 1
                    continue
                raise self._error("samples", exc) from None
            finally:
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
        attempts = max(attempts, 1)
        for attempt in range(attempts):
            try:
                return call(timeout)
            except grpc.RpcError as exc:
                code = exc.code()
                if code == grpc.StatusCode.UNAVAILABLE and attempt < attempts - 1:
                    time.sleep(_backoff(attempt))
                    continue
                raise self._error(what, exc) from None
        raise AssertionError("unreachable")  # pragma: no cover

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


def _backoff(attempt: int) -> float:
    """Full jitter: uniform in [0, min(cap, base·2^attempt)]."""
    return random.uniform(0.0, min(RETRY_CAP, RETRY_BASE * 2**attempt))
