"""The peer door of a configured run: one incoming iterate checked, filed, counted.

``Peer.Exchange`` (:mod:`starling.node.runtime.servicers`) hands every iterate to
:meth:`NodeRuntime.receive <starling.node.runtime.runtime.NodeRuntime.receive>`, which files it
here: checked against the spec and the program (:func:`starling.node.runtime.checks.check_iterate`),
put in the inbox the round engine gathers from, and counted on the sender's inbound link. A bad
message is rejected and counted, never fatal to the stream.
"""

from __future__ import annotations

import logging

from starling.node.protocol.starling.v1 import peer_pb2
from starling.node.runtime.checks import Rejected, check_iterate
from starling.node.runtime.inbox import WITHHELD
from starling.node.runtime.run import Run

__all__ = ["file_iterate"]

log = logging.getLogger("starling.node")


def file_iterate(
    run: Run, iterate: peer_pb2.Iterate, window: int, stream_sender: str | None = None
) -> str:
    """File ``iterate`` in ``run``; returns the outcome (``received``, ``late``, ``rejected``
    ...). ``window``: how many rounds past its own a message may be (``ROUND_WINDOW``).
    ``stream_sender``: who the stream was admitted for; it speaks for no one else."""
    sender = iterate.sender or "<anonymous>"
    try:
        if stream_sender is not None and iterate.sender != stream_sender:
            raise Rejected(f"stream of {stream_sender!r}: a message claims {sender!r}")
        message = check_iterate(iterate, run.spec, run.program, run.senders, run.round + window)
    except Rejected as exc:
        count = run.inbound.add(sender, "rejected", error=str(exc))
        if count <= 10 or count % 1000 == 0:  # a flood of bad messages must not flood logs
            log.warning(
                "rejected (%d from %r so far): %s", count, sender, exc,
                extra={"event": "rejected", "peer": sender, "round": iterate.round},
            )  # fmt: skip
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
    if outcome == "duplicate":
        run.inbound.add(
            sender, "rejected",
            error=f"peer {sender!r}: second message for round {iterate.round} "
            f"phase {iterate.phase}",
        )  # fmt: skip
        return "rejected"
    nbytes = 0 if message is None else sum(v.nbytes for v in message.tensors.values())
    run.inbound.add(sender, outcome, nbytes=nbytes)
    return outcome
