"""Screening: the values a node takes from its in-neighbours, held to a bound.

A legitimate in-neighbour (its certificate, its link's secret: everything the gate checks)
that sends finite but absurd iterates — 1e10 where the posterior lives within a few units —
used to drive the receiver's samples there: nothing in the shape or finiteness checks
noticed. Each iterate a node receives is now *screened* before the program sees it: every
value of the tensors its program names (:meth:`NodeProgram.screened_tensors
<starling.node.samplers.base.NodeProgram.screened_tensors>`) must lie within ``± bound ×
scale``, else the message is refused, counted ``screened`` (and ``rejected``) on that
sender's link, and logged naming the sender.

**The bound** is the node's own setting (``screen_bound`` in its config,
``--screen-bound``), :data:`starling.node.config.DEFAULT_SCREEN_BOUND` unless given; 0 turns
screening off. Why 1e6: the iterates of the shipped examples are model parameters (posterior samples
and the chains on their way there) on the scale of their data, standardised or near it; the largest
value any message carried in ``simulate`` of the shipped single experiments and studies (a position,
a push-sum share, DG-LMC's z and θ, ADMM's x, EC-SGHMC's centres) was about 50, and of an
asynchronous gradient about 200 (the BNN on digits), so the bound leaves four orders of magnitude of
room while a hostile value can move the receiver by at most that much, never to overflow. A model on
raw, unscaled data whose parameters are legitimately larger needs a larger bound (the
``screened`` counter and the log line say so at once).

**The scale** is the program's, per tensor: 1 for an iterate (a position, a centre, a
gradient); the number of nodes for push-sum's shares (a node's mass can gather up to all
of it); rounds × nodes for push-sum's running sums, which grow by at most a share a round;
counters (a round number, a step count, a timing profile) are not screened.

What it does not do: it is a plausibility bound, not Byzantine-robust aggregation. A
hostile neighbour sending values inside the bound (a subtly wrong iterate, a constant
offset) still biases its receivers; nothing here detects that. Deciding takes no random
numbers, and an honest run's iterates are far inside the bound, so ``run`` and ``simulate``
stay bit-identical; ``simulate`` has no wire and screens nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starling.node.messages import Message

__all__ = ["screen"]


def screen(message: Message, scales: Mapping[str, float], bound: float) -> str | None:
    """Why ``message`` is screened (the first tensor whose largest magnitude exceeds
    ``bound`` times its scale), or None when it passes (or ``bound`` is 0)."""
    if not bound:
        return None
    for name, scale in scales.items():
        value = message.tensors.get(name)
        if value is None or value.size == 0:
            continue
        limit = bound * scale
        # Two passes without a temporary (np.abs would copy a large iterate).
        largest = max(float(value.max()), -float(value.min()))
        if largest > limit:
            return f"{name!r} holds {largest:.3g}, beyond the screening bound {limit:.3g}"
    return None
