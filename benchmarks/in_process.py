"""The same rounds without a network or a disk: what the samplers' own math costs.

:func:`sampler_ms` runs an experiment's nodes with ``simulate``'s lockstep engine in this
process (:func:`starling.node.engine.simulate.simulate`: the same programs and round as a
node's loop, messages handed over in memory, each round's sample copied as a node copies
it) and returns the CPU time per node and round, from the end of the first round to the end
of the last: data generation before and the stacking of every sample into one array after
are left out. It is the floor no transport can go under: a node over gRPC pays it and then
its messages and its disk, while the raw grpcio ring pays only the messages.
"""

from __future__ import annotations

import time

__all__ = ["sampler_ms"]


def sampler_ms(experiment) -> float:
    """CPU milliseconds per node and round of ``experiment``'s rounds run in-process
    (at least two rounds)."""
    import numpy as np

    from starling.node.engine.simulate import simulate
    from starling.orchestrator.node_specs import node_specs

    specs = node_specs(experiment)
    marks: list[float] = []
    with np.errstate(over="ignore", invalid="ignore"):
        simulate(specs, on_round=lambda _round: marks.append(time.process_time()))
    if len(marks) < 2:
        raise ValueError("sampler_ms needs an experiment of at least two rounds")
    return 1e3 * (marks[-1] - marks[0]) / (len(specs) * (len(marks) - 1))
