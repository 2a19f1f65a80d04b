"""The same rounds without a network or a disk: what the samplers' own math costs.

:func:`sampler_cpu` runs an experiment's nodes with ``simulate``'s lockstep engine in this
process (:func:`starling.node.engine.simulate.simulate`: the same programs and round as a
node's loop, messages handed over in memory, samples kept in memory) and returns the CPU
time it took. Marginal over two run lengths, divided by node-rounds, it is the floor no
transport can go under: a node over gRPC pays it and then its messages and its disk, while
the raw grpcio ring pays only the messages.
"""

from __future__ import annotations

import time

__all__ = ["sampler_cpu"]


def sampler_cpu(experiment) -> float:
    """CPU seconds of ``experiment``'s rounds run in-process (data generation included,
    which a marginal over two lengths cancels)."""
    import numpy as np

    from starling.node.engine.simulate import simulate
    from starling.orchestrator.node_specs import node_specs

    specs = node_specs(experiment)
    began = time.process_time()
    with np.errstate(over="ignore", invalid="ignore"):
        simulate(specs)
    return time.process_time() - began
