"""The peer door of a configured run: one incoming iterate checked, filed, counted.

``Peer.Exchange`` (:mod:`starling.node.runtime.servicers`) hands every iterate to
:meth:`NodeRuntime.receive <starling.node.runtime.runtime.NodeRuntime.receive>`, which files it
here: checked against the spec and the program (:func:`starling.node.runtime.checks.check_iterate`),
put in the inbox the round engine gathers from, and counted on the sender's inbound link. A bad
message is rejected and counted, never fatal to the stream — whatever is wrong with it. Counts
go to the sender the stream was admitted for, whoever a message claims to be: a peer cannot
book rejections on an innocent one, nor add links to the node's status by inventing names.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from starling.node.protocol.starling.v1 import peer_pb2
from starling.node.runtime.checks import Rejected, Screened, Unusable, check_iterate
from starling.node.runtime.inbox import PENDING_BYTES, PENDING_MESSAGES, REFUSED, WITHHELD
from starling.node.runtime.run import Run
from starling.node.runtime.status import PreconditionError

__all__ = ["Reconfigured", "count_rejected", "file_iterate", "receive_at"]

log = logging.getLogger("starling.node")

_REFUSALS = {
    "duplicate": "a second message for it",
    "overflow": f"too much of this sender waits for later rounds already (at most "
    f"{PENDING_MESSAGES} messages, {PENDING_BYTES // 2**20} MiB)",
}
"""Inbox outcomes that refuse a well-formed message, and why (counted ``rejected``)."""


class Reconfigured(Exception):
    """The node was configured again since the stream was admitted: nothing was filed, and
    the stream must pass the gate under the new terms (``generation``) before it speaks on."""

    def __init__(self, generation: int):
        super().__init__(f"configured again (generation {generation})")
        self.generation = generation


def receive_at(
    door: tuple[Run | None, int],
    iterate: peer_pb2.Iterate,
    window: int,
    stream_sender: str | None = None,
    generation: int = -1,
    screen_bound: float = 0.0,
    payloads: Sequence[memoryview] | None = None,
) -> str:
    """File ``iterate`` in the run behind ``door`` — (run, generation), read as one object
    without a lock, so a message is never held up by the round loop, a checkpoint's fsync or
    a status snapshot, and never filed in a run its stream was not admitted for:
    :class:`Reconfigured` if ``generation`` (the stream's, −1: any) is not the door's.
    ``payloads``: as :func:`file_iterate` takes them."""
    run, current = door
    if generation >= 0 and current != generation:
        raise Reconfigured(current)
    if run is None:
        raise PreconditionError("node is not configured; it takes no iterates yet")
    return file_iterate(run, iterate, window, stream_sender, screen_bound, payloads)


def count_rejected(run: Run, sender: str, reason: str, round_index: int | None = None) -> None:
    """Count a message of ``sender`` rejected for ``reason`` on its inbound link, and log
    it the first times (a flood of bad messages must not flood the log)."""
    count = run.inbound.add(sender, "rejected", error=reason)
    if count <= 10 or count % 1000 == 0:
        log.warning(
            "rejected (%d from %r so far): %s",
            count,
            sender,
            reason,
            extra={"event": "rejected", "peer": sender, "round": round_index},
        )


def file_iterate(
    run: Run,
    iterate: peer_pb2.Iterate,
    window: int,
    stream_sender: str | None = None,
    screen_bound: float = 0.0,
    payloads: Sequence[memoryview] | None = None,
) -> str:
    """File ``iterate`` in ``run``; returns the outcome (``received``, ``late``, ``rejected``
    ...). ``window``: how many rounds past its own a message may be (``ROUND_WINDOW``).
    ``stream_sender``: who the stream was admitted for; it speaks for no one else.
    ``screen_bound``: the node's screening bound (:mod:`~starling.node.runtime.screening`;
    a message beyond it is counted ``screened`` and ``rejected``). ``payloads``: its
    tensors' bytes when they were read out of the received message by hand
    (:class:`~starling.node.protocol.wire.Arrived`)."""
    claimed = iterate.sender or "<anonymous>"
    sender = claimed if stream_sender is None else stream_sender
    try:
        if stream_sender is not None and iterate.sender != stream_sender:
            raise Rejected(f"stream of {stream_sender!r}: a message claims {claimed!r}")
        message = check_iterate(
            iterate,
            run.spec,
            run.program,
            run.senders,
            run.round + window,
            screen_bound,
            payloads,
        )
    except Exception as exc:  # noqa: BLE001 - no message may end the stream it came on
        if isinstance(exc, Screened):
            run.inbound.add(sender, "screened")
        elif not isinstance(exc, Rejected):
            exc = Rejected(f"peer {sender!r}: unreadable message ({type(exc).__name__}: {exc})")
        count_rejected(run, sender, str(exc), iterate.round)
        if isinstance(exc, Unusable):  # it answered for its round: nothing to wait for
            run.inbox.deliver(sender, int(iterate.round), int(iterate.phase), REFUSED)
        return "rejected"
    outcome = run.inbox.deliver(
        sender,
        int(iterate.round),
        int(iterate.phase),
        WITHHELD if message is None else message,
        resent=iterate.resent,
    )
    if outcome == "stale resend":
        return outcome
    if outcome in _REFUSALS:
        run.inbound.add(
            sender,
            "rejected",
            error=f"peer {sender!r}: round {iterate.round} phase {iterate.phase}: "
            + _REFUSALS[outcome],
        )
        return "rejected"
    return outcome  # counted by the inbox, with what is pending (Inbox.deliver)
