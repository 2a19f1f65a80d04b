"""The in-process engine: the same node programs as the gRPC runtime, messages in memory.

Used by ``starling simulate`` and for sweeps. With the same specs it produces exactly the
samples a fault-free network run produces (``tests/test_run_equals_simulate.py``), because
both build programs with :func:`node.samplers.build_program`, seed them with
:func:`node.samplers.node_rng`, order inboxes by sender and apply the same fault schedule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from node.faults import withheld_by_schedule
from node.messages import Message
from node.samplers import build_program, node_rng
from node.samplers.base import ordered_inbox
from node.spec import NodeSpec

__all__ = ["simulate"]


def _copy(message: Message) -> Message:
    # The network hands each receiver its own arrays; so does the simulator.
    return Message(message.kind, {k: np.array(v, copy=True) for k, v in message.tensors.items()})


def simulate(
    specs: Sequence[NodeSpec],
    on_round: Callable[[int], None] | None = None,
    metrics_out: dict[str, dict[str, float]] | None = None,
) -> dict[str, np.ndarray]:
    """Run every node for its rounds; returns node id -> samples of shape (rounds, chains, d).

    Nodes whose role records no samples (e.g. a DG-LMC worker) are left out. If given,
    ``metrics_out`` receives each node's :meth:`NodeProgram.metrics` at the end.
    """
    by_id = {spec.node_id: spec for spec in specs}
    rngs = {spec.node_id: node_rng(spec) for spec in specs}
    programs = {spec.node_id: build_program(spec, rngs[spec.node_id]) for spec in specs}
    rounds = max(spec.rounds for spec in specs)
    phases = max(program.phases for program in programs.values())
    recorded: dict[str, list[np.ndarray]] = {node: [] for node in programs}
    for round_index in range(rounds):
        for phase in range(phases):
            inboxes: dict[str, dict[str, Message]] = {node: {} for node in programs}
            for sender, program in programs.items():
                faults = by_id[sender].link_faults
                for receiver, message in program.outgoing(round_index, phase).items():
                    if receiver not in inboxes:
                        raise ValueError(f"node {sender!r} sent to unknown peer {receiver!r}")
                    if withheld_by_schedule(faults, sender, receiver, round_index):
                        continue
                    inboxes[receiver][sender] = _copy(message)
            for node, program in programs.items():
                program.incoming(round_index, phase, ordered_inbox(inboxes[node]), rngs[node])
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
