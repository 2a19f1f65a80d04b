"""The node's gate: who may call Control and who may open a Peer stream
(:mod:`starling.node.security`).

Refusals are counted (``denied_peer_streams``, ``denied_control_calls`` in the status) and
logged with the caller's address and the reason, never with what the caller presented.
"""

from __future__ import annotations

import logging
import threading

import grpc

from starling.node.protocol.contract import NOT_CONFIGURED
from starling.node.runtime.runtime import NodeRuntime
from starling.node.security import (
    ORCHESTRATOR_ID,
    SECRET_KEY,
    SENDER_KEY,
    identities,
    metadata,
    same_secret,
    token_given,
)

__all__ = ["Gate"]

log = logging.getLogger("starling.node")


class Gate:
    """Who may call: Control needs the orchestrator's certificate (mutual TLS) and the
    bearer token of ``--token-file``, each if configured (open when neither is: a loopback
    node); a Peer stream needs its sender's certificate (TLS), the experiment's secret and a
    sender that is an in-neighbour. Refusals are counted in the node's status."""

    def __init__(self, runtime: NodeRuntime, tls: bool = False, token: str | None = None):
        self.runtime = runtime
        self.tls = tls
        self.token = token
        self.denied = {"peer": 0, "control": 0}
        self._lock = threading.Lock()

    def control(self, context: grpc.ServicerContext) -> None:
        if self.tls and ORCHESTRATOR_ID not in identities(context):
            self._deny(
                context,
                "control",
                grpc.StatusCode.PERMISSION_DENIED,
                "Control needs the orchestrator's certificate",
            )
        # Given both, both are needed: a token file given beside TLS is not silently ignored.
        if self.token is not None and not same_secret(token_given(context), self.token):
            self._deny(
                context,
                "control",
                grpc.StatusCode.UNAUTHENTICATED,
                "Control needs this node's token (authorization: Bearer)",
            )

    def peer(self, context: grpc.ServicerContext) -> str:
        """The admitted sender of a Peer stream (aborts the call otherwise)."""
        given = metadata(context)
        sender = given.get(SENDER_KEY, "")
        if self.tls and sender not in identities(context):
            self._deny(
                context,
                "peer",
                grpc.StatusCode.PERMISSION_DENIED,
                f"peer stream: the client certificate is not node {sender!r}'s",
            )
        terms = self.runtime.peer_terms()
        if terms is None:
            # No secret and no in-neighbours to check against yet: admitting the stream now
            # would let it speak once the node is configured without ever showing the
            # secret. Retriable, and not a refusal to count: a genuine sender that is early
            # keeps its messages and opens the stream again.
            context.abort(grpc.StatusCode.UNAVAILABLE, NOT_CONFIGURED)
            raise AssertionError("unreachable: context.abort raises")
        senders, secrets = terms
        # A stranger has no link secret to check: it is refused as one below.
        in_reach = sender in senders or not secrets.accept
        if in_reach and not secrets.admits(sender, given.get(SECRET_KEY)):
            self._deny(
                context,
                "peer",
                grpc.StatusCode.UNAUTHENTICATED,
                "peer stream: no or a wrong secret for this link",
            )
        if sender not in senders:
            self._deny(
                context,
                "peer",
                grpc.StatusCode.PERMISSION_DENIED,
                f"peer stream: {sender!r} is not an in-neighbour of this node",
            )
        return sender

    def _deny(
        self, context: grpc.ServicerContext, channel: str, code: grpc.StatusCode, message: str
    ) -> None:
        with self._lock:
            self.denied[channel] += 1
        log.warning("refused a %s call from %s: %s", channel, context.peer(), message)
        context.abort(code, message)
