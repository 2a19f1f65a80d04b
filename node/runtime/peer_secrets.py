"""The secrets a run's Peer streams prove, as the orchestrator hands them over in Configure.

Without TLS a Peer stream proves where it comes from only by a secret it answers the
receiver's challenge with (:mod:`starling.node.runtime.link_proof`: the secret itself never
crosses the wire). An orchestrator gives either one secret for the
whole run (``peer_secret``: every node knows it, so any node of the run could pose as any
other to a third) or, as Starling's does, one secret per directed link (``send_secrets`` by
receiver, ``accept_secrets`` by sender:
:func:`starling.orchestrator.execution.access.link_secrets`), so a node knows only its own links'
secrets and can speak only as itself. With TLS the certificate already says who speaks; a secret is
then checked if one was given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from starling.node.logs import redact_run
from starling.node.runtime.link_proof import proof_matches
from starling.node.security import check_header_value

__all__ = ["PeerSecrets"]


@dataclass(frozen=True)
class PeerSecrets:
    shared: str = field(default="", repr=False)
    """The run's one secret (an orchestrator that gives no per-link secrets)."""
    send: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Receiver -> the secret this node's stream to it carries."""
    accept: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Sender -> the secret a stream from it must carry; when given, the only ones taken."""

    def __post_init__(self) -> None:
        """Refuse, naming the field, a secret no Peer stream's metadata could carry: it
        would fail every stream, and a node would keep it (in its logs' redaction) for as
        long as it runs."""
        named = [("peer_secret", self.shared)]
        for side, secrets in (("send_secrets", self.send), ("accept_secrets", self.accept)):
            named += [(f"{side}.{peer}", secret) for peer, secret in secrets.items()]
        for where, secret in named:
            check_header_value(secret, f"{where}:")

    @classmethod
    def of(cls, given: str | PeerSecrets) -> PeerSecrets:
        """``given`` as secrets: a plain string is the run's one shared secret."""
        return given if isinstance(given, PeerSecrets) else cls(shared=given)

    def __bool__(self) -> bool:
        return bool(self.shared or self.accept)

    def admits(self, sender: str, receiver: str, run: str, challenge: str, given: str) -> bool:
        """Whether a stream claiming ``sender`` answered ``challenge`` with the proof of the
        right secret (constant time); with no secret at all (TLS alone), every stream does."""
        if self.accept:
            expected = self.accept.get(sender)
            if expected is None:
                return False
        elif self.shared:
            expected = self.shared
        else:
            return True
        return proof_matches(given, expected, run, sender, receiver, challenge)

    def sending(self, receiver: str) -> str:
        """The secret this node proves on its stream to ``receiver``."""
        return self.send.get(receiver, self.shared)

    def redact(self) -> None:
        """Keep every one of them out of the logs, for this run and the next."""
        redact_run((self.shared, *self.send.values(), *self.accept.values()))
