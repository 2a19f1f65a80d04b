"""The node's gate: who may call Control (and reflection) and who may open a Peer stream
(:mod:`starling.node.security`, :mod:`starling.node.tokens`,
:mod:`starling.node.runtime.link_proof`).

A refusal is an :class:`~starling.node.runtime.doors.AbortCall`, which the call's door
carries out. Refusals are counted (``denied_peer_streams``, ``denied_control_calls`` in the
status) and logged with the caller's address and the reason, never with what the caller
presented; a flood of them logs the first few and then one in a thousand.
"""

from __future__ import annotations

import logging
import threading
from typing import NoReturn

import grpc

from starling.node.protocol.contract import NOT_CONFIGURED
from starling.node.revocation import Revocations
from starling.node.runtime.doors import LOG_EVERY, LOG_FIRST, AbortCall
from starling.node.runtime.link_proof import CHALLENGE_KEY, new_challenge
from starling.node.runtime.runtime import NodeRuntime, PeerTerms
from starling.node.security import ORCHESTRATOR_ID, SENDER_KEY, identities, metadata, token_given
from starling.node.shown import shorten
from starling.node.tokens import NodeTokens

__all__ = ["Gate", "PeerAdmission"]

log = logging.getLogger("starling.node")


class PeerAdmission:
    """What a Peer stream showed at its opening: who it claims to be, the challenge it was
    given and the proof it answered with (kept to gate it again after a reconfiguration)."""

    def __init__(self, sender: str, challenge: str):
        self.sender = sender
        self.challenge = challenge
        self.proof = ""


class Gate:
    """Who may call: Control needs the orchestrator's certificate (mutual TLS) and this
    node's token (:class:`~starling.node.tokens.NodeTokens`), each if configured (open when
    neither is: a loopback node); a Peer stream needs its sender's certificate (TLS), to be
    an in-neighbour, and to prove its link's secret. Refusals are counted in the status."""

    def __init__(
        self,
        runtime: NodeRuntime,
        tls: bool = False,
        tokens: NodeTokens | None = None,
        revocations: Revocations | None = None,
    ):
        self.runtime = runtime
        self.tls = tls
        self.tokens = tokens
        self.revocations = revocations
        """The CA's revocation list (``tls.crl``): a caller whose certificate it holds is
        refused everywhere the gate looks, the orchestrator included."""
        self.denied = {"peer": 0, "control": 0}
        self._lock = threading.Lock()

    @property
    def guarded(self) -> bool:
        """Whether the node can tell the orchestrator from other callers (TLS or a token)."""
        return self.tls or self.tokens is not None

    def is_orchestrator(self, context: grpc.ServicerContext) -> bool:
        """Whether the call shows the orchestrator's credentials (never on an open node,
        where anyone could)."""
        if not self.guarded:
            return False
        if self.tls and (ORCHESTRATOR_ID not in identities(context) or self._revoked(context)):
            return False
        return self.tokens is None or self.tokens.accepts(token_given(context))

    def _revoked(self, context: grpc.ServicerContext) -> bool:
        if self.revocations is None:
            return False
        certificate = context.auth_context().get("x509_pem_cert", [b""])[0]
        return self.revocations.revoked(certificate)

    def _refuse_revoked(self, context: grpc.ServicerContext, channel: str) -> None:
        if self._revoked(context):
            self._deny(
                context,
                channel,
                grpc.StatusCode.PERMISSION_DENIED,
                "the client certificate is revoked (the CA's revocation list, tls.crl)",
            )

    def control(self, context: grpc.ServicerContext) -> None:
        self._refuse_revoked(context, "control")
        if self.tls and ORCHESTRATOR_ID not in identities(context):
            self._deny(
                context,
                "control",
                grpc.StatusCode.PERMISSION_DENIED,
                "Control needs the orchestrator's certificate",
            )
        # Given both, both are needed: a token file given beside TLS is not silently ignored.
        if self.tokens is not None and not self.tokens.accepts(token_given(context)):
            self._deny(
                context,
                "control",
                grpc.StatusCode.UNAUTHENTICATED,
                "Control needs this node's token (authorization: Bearer)",
            )

    def guard(self, context: grpc.ServicerContext) -> None:
        """Reflection: on a guarded node, only for the orchestrator (the Control check)."""
        if self.guarded:
            self.control(context)

    def peer_opening(self, context: grpc.ServicerContext) -> PeerAdmission:
        """The first half of a Peer stream's admission, before it sends anything: its
        certificate names the sender it claims (TLS), the node is configured, and the sender
        is an in-neighbour. The stream is to be sent its challenge (:meth:`challenge_of`)."""
        return PeerAdmission(self._identified(context), new_challenge())

    @staticmethod
    def challenge_of(admission: PeerAdmission) -> tuple[tuple[str, str], ...]:
        """The initial metadata that gives a Peer stream its challenge."""
        return ((CHALLENGE_KEY, admission.challenge),)

    def peer_proof(self, context: grpc.ServicerContext, admission: PeerAdmission) -> None:
        """The second half: the stream's proof answers its challenge with the secret of the
        link from its sender, under the node's current configuration (gated again after a
        reconfiguration: another run's secret or in-peers may refuse it)."""
        sender = self._identified(context)
        terms = self._terms(context)
        proved = terms.secrets.admits(
            sender, terms.node_id, terms.experiment, admission.challenge, admission.proof
        )
        if sender != admission.sender or not proved:
            self._deny(
                context,
                "peer",
                grpc.StatusCode.UNAUTHENTICATED,
                "peer stream: no or a wrong proof of this link's secret",
            )

    def peer_unproved(self, context: grpc.ServicerContext) -> NoReturn:
        """Refuse a Peer stream that ended before its first message (its proof)."""
        self._deny(
            context,
            "peer",
            grpc.StatusCode.UNAUTHENTICATED,
            "peer stream: ended before proving its link's secret",
        )

    def _identified(self, context: grpc.ServicerContext) -> str:
        self._refuse_revoked(context, "peer")
        given = metadata(context)
        sender = given.get(SENDER_KEY, "")
        if self.tls and sender not in identities(context):
            self._deny(
                context,
                "peer",
                grpc.StatusCode.PERMISSION_DENIED,
                f"peer stream: the client certificate is not node {sender!r}'s",
            )
        if sender not in self._terms(context).senders:
            self._deny(
                context,
                "peer",
                grpc.StatusCode.PERMISSION_DENIED,
                f"peer stream: {sender!r} is not an in-neighbour of this node",
            )
        return sender

    def _terms(self, context: grpc.ServicerContext) -> PeerTerms:
        terms = self.runtime.peer_terms()
        if terms is None:
            # No secret and no in-neighbours to check against yet: admitting the stream
            # now would let it speak once the node is configured without ever proving the
            # secret. Retriable, and not a refusal to count: a genuine sender that is early
            # keeps its messages and opens the stream again.
            raise AbortCall(grpc.StatusCode.UNAVAILABLE, NOT_CONFIGURED)
        return terms

    def _deny(
        self, context: grpc.ServicerContext, channel: str, code: grpc.StatusCode, message: str
    ) -> NoReturn:
        message = shorten(message)  # a claimed sender may be 16 KiB of metadata
        with self._lock:
            self.denied[channel] += 1
            count = self.denied[channel]
        if count <= LOG_FIRST or count % LOG_EVERY == 0:
            log.warning(
                "refused a %s call from %s: %s (%d so far)",
                channel,
                context.peer(),
                message,
                count,
                extra={"event": "denied", "peer": context.peer()},
            )
        raise AbortCall(code, message)
