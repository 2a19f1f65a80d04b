"""The one round loop: a program's round, every phase, against any :class:`Transport`.

Round ``r`` ([DESIGN] principle 2), for each phase of the program:

1. ``program.outgoing(r, phase)``; each message goes to ``transport.send`` — or, if the
   schedule takes it out (:meth:`starling.node.faults.ScheduledFaults.withholds`), to
   ``transport.withhold``;
2. ``transport.gather`` the inbox: synchronous programs wait for the expected senders'
   (r, phase) messages — less those the schedule has silenced — until all answered or the
   round deadline; asynchronous ones take each expected sender's latest message, waiting
   only to respect the program's ``max_staleness(r, phase)`` (semantics below);
3. ``program.incoming(r, phase, ordered_inbox(inbox), rng)``.

The driver records the sample after the last phase. The gRPC runtime
(:mod:`starling.node.runtime.runtime`) steps one node's :func:`round_steps` on its event
loop and, at each phase's pause, awaits the inbox's answer before it lets the round
gather; the simulator (:mod:`starling.node.engine.simulate`) advances every node's
:func:`round_steps` together, one phase at a time, so every node has sent before any
gathers — lockstep.

Asynchronous mode
-----------------
This is the one place the asynchronous semantics are written down; the gRPC runtime
(:mod:`starling.node.runtime.network`, :mod:`starling.node.runtime.inbox`) implements the same idea
with real clocks. A program with ``synchronous = False`` never waits for a particular round's
message. In each phase it is handed, for each of its ``expected_senders``, the *latest*
message that sender got through to it, stamped with the round it was sent in
(``Message.round``), so ``round − message.round`` is that input's staleness. A sender it
has never heard from is simply absent. The program keeps what it needs (the stale centre
c̃ of [001] eq. 6, a worker's stale gradient) in its own checkpointed state.

*Simulator: lockstep rounds, one round in flight.* Every node runs round r at the same
time. A message sent in round r (any phase) to an asynchronous receiver is in flight
during round r and lands in the receiver's latest-box at the end of the round, so it is
used from round r + 1 on — every asynchronous input is at least one round stale, as it is
on a network whose latency is about one round. A message a scheduled link fault
(:func:`starling.node.faults.withheld_by_schedule`) takes out never lands; the receiver keeps the
older one. Synchronous receivers are unaffected: they get this round's messages or none.
Nothing here is random except the programs' own generators, so a run is reproducible from
its seed, and with a Gaussian target the whole system — including the stale copies and
the messages in flight — is one linear-Gaussian recursion whose law can be computed
exactly (``tests/node/samplers/test_ec_sghmc.py``).

*Runtime: bounded staleness* (stale synchronous parallel, Ho et al. 2013). Nodes run at
their own pace, which lets a fast node (a centre with no data) race ahead and feed its
peers ever staler values. A program bounds this with ``max_staleness(round, phase)``: the
runtime waits until every expected sender's latest message is at most that many rounds
old — or that sender has answered for such a round with a withheld notice — or the round
deadline passes (a dead peer costs one deadline per round, never a hang), then proceeds
with what it has and counts each sender that overran in ``overruns`` on its inbound link.
``None`` means no bound. The samplers declare the staleness the simulator's model gives
them, so a network run is never staler than the simulator and often fresher: asynchronous
runs are not bit-identical between the engines (synchronous ones are).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from typing import NamedTuple

import numpy as np

from starling.node.engine.transport import Gather, Transport
from starling.node.faults import ScheduledFaults
from starling.node.samplers.base import NodeProgram, ordered_inbox

__all__ = ["PhaseGather", "phase_gather", "round_steps"]


class PhaseGather(NamedTuple):
    """One phase's gather, as :func:`phase_gather` works it out and :func:`round_steps`
    yields it at the phase's pause, before it gathers with it."""

    phase: int
    expected: tuple[str, ...]
    """The senders the gather expects (a synchronous program's without those the fault
    schedule silences this round)."""
    wait: Gather
    """How long the gather may wait for them."""


def round_steps(
    program: NodeProgram,
    round_index: int,
    transport: Transport,
    rng: np.random.Generator,
    faults: ScheduledFaults,
    round_deadline: float | None = None,
    stopped: Callable[[], bool] | None = None,
) -> Generator[PhaseGather, None, bool]:
    """One round of ``program``, paused after each phase's sends; at each pause it yields
    the :class:`PhaseGather` its next step gathers with.

    A lockstep driver advances every node to the pause before letting any gather; the
    gRPC node's driver awaits there, until the inbox can answer what it was yielded.
    Returns True once the round is complete, False if ``stopped()`` turned true during a
    gather (the round is then abandoned half way). ``round_deadline`` is in seconds from
    the pause; None means the transport never waits on a clock.
    """
    for phase in range(program.phases):
        for receiver, message in program.outgoing(round_index, phase).items():
            if faults.withholds(receiver, round_index):
                transport.withhold(round_index, phase, receiver)
            else:
                transport.send(round_index, phase, receiver, message)
        gather = phase_gather(program, round_index, phase, faults, round_deadline)
        yield gather
        inbox = transport.gather(round_index, phase, gather.expected, gather.wait)
        if stopped is not None and stopped():
            return False
        program.incoming(round_index, phase, ordered_inbox(inbox), rng)
    return True


def phase_gather(
    program: NodeProgram,
    round_index: int,
    phase: int,
    faults: ScheduledFaults,
    round_deadline: float | None = None,
) -> PhaseGather:
    """What the gather of (``round_index``, ``phase``) waits for, its deadline
    ``round_deadline`` seconds from now: the expected senders (a synchronous program's
    without those the schedule silences) and the :class:`Gather`. :func:`round_steps`
    works it out once per phase and yields it; drivers take it from there."""
    expected = tuple(program.expected_senders(round_index, phase))
    if program.synchronous:
        expected = tuple(s for s in expected if not faults.silences(s, round_index))
        return PhaseGather(phase, expected, Gather(True, deadline=_deadline(round_deadline)))
    bound = program.max_staleness(round_index, phase)
    deadline = None if bound is None else _deadline(round_deadline)
    return PhaseGather(phase, expected, Gather(False, bound, deadline))


def _deadline(seconds: float | None) -> float | None:
    return None if seconds is None else time.monotonic() + seconds
