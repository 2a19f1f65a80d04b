"""The in-process engine: the same node programs as the gRPC runtime, messages in memory.

Used by ``starling simulate`` and for sweeps. With the same specs it produces exactly the
samples a fault-free network run of *synchronous* programs produces
(``tests/node/test_runtime.py``), because both build programs with
:func:`node.samplers.build_program`, seed them with :func:`node.samplers.node_rng`, order
inboxes by sender and apply the same fault schedule.

Asynchronous mode ([DESIGN] principle 2)
----------------------------------------
This is the one place the asynchronous semantics are written down; the gRPC runtime
(:mod:`node.runtime.runtime`, :mod:`node.runtime.inbox`) implements the same idea with real
clocks. A program with ``synchronous = False`` never waits for a particular round's
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
(:func:`node.faults.withheld_by_schedule`) takes out never lands; the receiver keeps the
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

from collections.abc import Callable, Sequence

import numpy as np

from node.faults import withheld_by_schedule
from node.messages import Message
from node.assemble import build_program, node_rng
from node.samplers.base import ordered_inbox
from node.spec import NodeSpec

__all__ = ["simulate"]


def _copy(message: Message, round_index: int) -> Message:
    # The network hands each receiver its own arrays, stamped with the sending round.
    return Message(
        message.kind,
        {k: np.array(v, copy=True) for k, v in message.tensors.items()},
        round=round_index,
    )


def simulate(
    specs: Sequence[NodeSpec],
    on_round: Callable[[int], None] | None = None,
    metrics_out: dict[str, dict[str, float]] | None = None,
) -> dict[str, np.ndarray]:
    """Run every node for its rounds; returns node id -> samples of shape (rounds, chains, d).

    Nodes whose role records no samples (e.g. a DG-LMC worker) are left out. If given,
    ``metrics_out`` receives each node's :meth:`NodeProgram.metrics` at the end.
    Asynchronous programs run in the lockstep model described in the module docstring.
    """
    by_id = {spec.node_id: spec for spec in specs}
    rngs = {spec.node_id: node_rng(spec) for spec in specs}
    programs = {spec.node_id: build_program(spec, rngs[spec.node_id]) for spec in specs}
    rounds = max(spec.rounds for spec in specs)
    phases = max(program.phases for program in programs.values())
    recorded: dict[str, list[np.ndarray]] = {node: [] for node in programs}
    # Asynchronous receivers' latest-boxes: receiver -> sender -> newest landed message.
    latest: dict[str, dict[str, Message]] = {
        node: {} for node, program in programs.items() if not program.synchronous
    }
    for round_index in range(rounds):
        in_flight: list[tuple[str, str, Message]] = []
        for phase in range(phases):
            inboxes: dict[str, dict[str, Message]] = {node: {} for node in programs}
            for sender, program in programs.items():
                faults = by_id[sender].link_faults
                for receiver, message in program.outgoing(round_index, phase).items():
                    if receiver not in inboxes:
                        raise ValueError(f"node {sender!r} sent to unknown peer {receiver!r}")
                    if withheld_by_schedule(faults, sender, receiver, round_index):
                        continue
                    if receiver in latest:
                        in_flight.append((receiver, sender, _copy(message, round_index)))
                    else:
                        inboxes[receiver][sender] = _copy(message, round_index)
            for node, program in programs.items():
                if node in latest:
                    box = latest[node]
                    expected = program.expected_senders(round_index, phase)
                    inbox = {s: box[s] for s in expected if s in box}
                else:
                    inbox = inboxes[node]
                program.incoming(round_index, phase, ordered_inbox(inbox), rngs[node])
        # Land this round's messages: later phases overwrite earlier ones from the same sender.
        for receiver, sender, message in in_flight:
            latest[receiver][sender] = message
        for node, program in programs.items():
            value = program.sample()
            if value is not None:
                recorded[node].append(np.array(value, copy=True))
        if on_round is not None:
            on_round(round_index)
    if metrics_out is not None:
        for node, program in programs.items():
            metrics_out[node] = {k: float(v) for k, v in program.metrics().items()}
    return {node: np.stack(values) for node, values in recorded.items() if values}
