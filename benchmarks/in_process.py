"""The same rounds without a network or a disk: what the samplers' own math costs.

:func:`sampler_ms` runs an experiment's nodes with ``simulate``'s lockstep engine in this
process (:func:`starling.node.engine.simulate.simulate`: the same programs and round as a
node's loop, messages handed over in memory, each round's sample copied as a node copies
it) and returns the CPU time per node and round, from the end of the first round to the end
of the last: data generation before and the stacking of every sample into one array after
are left out. It is the floor no transport can go under: a node over gRPC pays it and then
its messages and its disk, while the raw grpcio ring pays only the messages.

:func:`storage_ms` times the other thing every node must do and the raw ring does not:
keep each round's sample and its resume point, written as the round loop writes them
(:meth:`starling.node.runtime.run.Run.persist_finished`), alone in this process.
"""

from __future__ import annotations

import time

__all__ = ["sampler_ms", "storage_ms"]


def sampler_ms(experiment) -> float:
    """CPU milliseconds per node and round of ``experiment``'s rounds run in-process
    (at least two rounds)."""
    import numpy as np

    from starling.node.engine.simulate import simulate
    from starling.orchestrator.planning.node_specs import node_specs

    specs = node_specs(experiment)
    marks: list[float] = []
    with np.errstate(over="ignore", invalid="ignore"):
        simulate(specs, on_round=lambda _round: marks.append(time.process_time()))
    if len(marks) < 2:
        raise ValueError("sampler_ms needs an experiment of at least two rounds")
    return 1e3 * (marks[-1] - marks[0]) / (len(specs) * (len(marks) - 1))


def storage_ms(chains: int, dim: int, rounds: int = 20) -> float:
    """CPU milliseconds per round to keep one (chains, dim) sample as a node does: its
    copy, the store's append (checksum, write, flush to the OS) and the resume point's slot
    holding the same array, in a temporary folder; no network, no other process."""
    import tempfile
    from pathlib import Path

    import numpy as np

    from starling.node.runtime.checkpoint import Checkpoint
    from starling.node.runtime.resume import ResumeSlots
    from starling.node.runtime.store import SampleStore

    state = np.random.default_rng(0).standard_normal((chains, dim))
    rng_state = dict(np.random.default_rng(0).bit_generator.state)
    with tempfile.TemporaryDirectory(prefix="starling-bench-store-") as folder:
        store, slots = SampleStore(Path(folder) / "samples.bin"), ResumeSlots(folder)
        try:
            began = time.process_time()
            for index in range(rounds):
                sample = np.array(state, dtype=np.float64, copy=True)
                store.append(index, sample)
                slots.write(Checkpoint(index + 1, index + 1, rng_state, {"x": state}, "bench"))
            spent = time.process_time() - began
        finally:
            store.close()
            slots.close()
    return 1e3 * spent / rounds
