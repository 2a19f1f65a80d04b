"""The simulator: every node's program in one process, over the lockstep transport.

Used by ``starling simulate`` and for sweeps. With the same specs it produces exactly the
samples a fault-free network run of *synchronous* programs produces
(``tests/node/test_runtime.py``), because both build programs with
:func:`starling.node.assemble.build_program`, seed them with
:func:`starling.node.assemble.node_rng`, and run the same round (:mod:`starling.node.engine.rounds`)
— inboxes ordered by sender, the fault schedule decided in one place. Asynchronous programs run in
the lockstep model described there. No grpc here.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence

import numpy as np

from starling.node.assemble import build_program, node_rng
from starling.node.engine.memory import LockstepNetwork, MemoryTransport
from starling.node.engine.rounds import PhaseGather, round_steps
from starling.node.faults import ScheduledFaults
from starling.node.params import ConfigError
from starling.node.samplers.base import NodeProgram
from starling.node.spec import NodeSpec

__all__ = ["NodeFailed", "SimulationInterrupted", "simulate"]


class NodeFailed(RuntimeError):
    """A node's program raised during a round: which node, which round, why, and every
    node's samples of the rounds before (shape (round, chains, d) each)."""

    def __init__(
        self, node: str, round_index: int, cause: Exception, samples: dict[str, np.ndarray]
    ):
        super().__init__(f"round {round_index}: {type(cause).__name__}: {cause}")
        self.node = node
        self.round = round_index
        self.cause = cause
        self.samples = samples


class SimulationInterrupted(KeyboardInterrupt):
    """Ctrl-C (or what the caller turns into one, e.g. SIGTERM) during the simulation: the
    ``rounds`` every node completed and each node's samples of exactly those rounds (shape
    (rounds, chains, d)): a round interrupted half-way is left out on every node, so all
    hold the same rounds. Still a :class:`KeyboardInterrupt` to callers that do not look."""

    def __init__(self, rounds: int, samples: dict[str, np.ndarray]):
        super().__init__(f"interrupted after {rounds} rounds")
        self.rounds = rounds
        self.samples = samples


def simulate(
    specs: Sequence[NodeSpec],
    on_round: Callable[[int], None] | None = None,
    metrics_out: dict[str, dict[str, float]] | None = None,
    network_out: list[LockstepNetwork] | None = None,
) -> dict[str, np.ndarray]:
    """Run every node for its rounds; returns node id -> samples of shape (rounds, chains, d).

    Nodes whose role records no samples (e.g. a DG-LMC worker) are left out. If given,
    ``metrics_out`` receives each node's :meth:`NodeProgram.metrics` at the end. A program
    that raises stops the simulation with :class:`NodeFailed`, as the node's round loop
    would fail on a network. A :class:`KeyboardInterrupt` stops it with
    :class:`SimulationInterrupted`, holding the rounds completed until then (and
    ``metrics_out`` filled as at the end). ``network_out``, if given, receives the network,
    whose :meth:`~starling.node.engine.memory.LockstepNetwork.books` are the links' counts.
    """
    rngs = {spec.node_id: node_rng(spec) for spec in specs}
    programs = {spec.node_id: _built(spec, rngs[spec.node_id]) for spec in specs}
    faults = {spec.node_id: ScheduledFaults.of(spec) for spec in specs}
    network = LockstepNetwork({node: program.synchronous for node, program in programs.items()})
    if network_out is not None:
        network_out.append(network)
    transports = {node: network.endpoint(node) for node in programs}
    rounds = max(spec.rounds for spec in specs)
    recorded: dict[str, list[np.ndarray]] = {node: [] for node in programs}
    completed = 0  # rounds every node has played and recorded
    try:
        for round_index in range(rounds):
            _play_round(round_index, programs, transports, rngs, faults, network, recorded)
            completed = round_index + 1
            if on_round is not None:
                on_round(round_index)
    except KeyboardInterrupt as interrupt:
        _program_metrics(programs, metrics_out)
        raise SimulationInterrupted(completed, _stacked(recorded, completed)) from interrupt
    _program_metrics(programs, metrics_out)
    return _stacked(recorded)


def _built(spec: NodeSpec, rng: np.random.Generator) -> NodeProgram:
    """The node's program, or a ConfigError that names the node: a node's own data file
    (``nodes[k].data.path``) missing was reported as ``data.path`` alone, as if it were
    the experiment's data. A node process says the same (``node 'a': cannot build …``)."""
    try:
        return build_program(spec, rng)
    except ConfigError as exc:
        if f"node {spec.node_id!r}" in str(exc):
            raise  # it names the node already (a worker's bound, say)
        raise ConfigError(f"node {spec.node_id!r}: {exc}") from None


def _play_round(
    round_index: int,
    programs: dict[str, NodeProgram],
    transports: dict[str, MemoryTransport],
    rngs: dict[str, np.random.Generator],
    faults: dict[str, ScheduledFaults],
    network: LockstepNetwork,
    recorded: dict[str, list[np.ndarray]],
) -> None:
    """One round of every node in lockstep, then each node's sample appended to ``recorded``;
    :class:`NodeFailed` if a program raises."""
    steps = [
        (node, round_steps(program, round_index, transports[node], rngs[node], faults[node]))
        for node, program in programs.items()
    ]
    node = ""
    try:
        # Lockstep: each pass takes every node through one phase's sends (and the
        # previous phase's gather), so no node gathers a phase before all have sent in it.
        while steps:
            remaining = []
            for node, step in steps:  # a loop, not a comprehension: ``node`` names
                if _advance(step):  # the one that raised
                    remaining.append((node, step))
            steps = remaining
        network.end_round()
        for node, program in programs.items():
            value = program.sample()
            if value is not None:
                recorded[node].append(np.array(value, copy=True))
    except Exception as exc:  # noqa: BLE001 - reported with the node and round
        raise NodeFailed(node, round_index, exc, _stacked(recorded)) from exc


def _program_metrics(
    programs: dict[str, NodeProgram], metrics_out: dict[str, dict[str, float]] | None
) -> None:
    if metrics_out is not None:
        for node, program in programs.items():
            metrics_out[node] = {k: float(v) for k, v in program.metrics().items()}


def _stacked(
    recorded: dict[str, list[np.ndarray]], rounds: int | None = None
) -> dict[str, np.ndarray]:
    """Each node's samples (of its first ``rounds`` only, if given), stacked; nodes without
    any are left out."""
    kept = {node: values[:rounds] for node, values in recorded.items()}
    return {node: np.stack(values) for node, values in kept.items() if values}


def _advance(step: Generator[PhaseGather, None, bool]) -> bool:
    """One step of a node's round; False once the round is complete. What the step yields
    (the phase's gather) is not needed: in lockstep nothing waits."""
    try:
        next(step)
    except StopIteration:
        return False
    return True
