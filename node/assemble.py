"""A node's program, assembled: the one place that turns a spec into a running sampler.

It loads the node's private shard (the only IO on the way), builds the model's local
potential and instantiates the role's program from :mod:`starling.node.samplers`, which stays pure.
The simulator and the network runtime both call :func:`build_program` with the generator
from :func:`node_rng`, so both transports drive identical sampler objects.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from starling.node.data.shards import load_shard
from starling.node.models import build_model
from starling.node.params import parse_params
from starling.node.samplers import algorithm_info, program_class
from starling.node.samplers.base import NodeContext, NodeProgram
from starling.node.spec import NodeSpec

__all__ = ["build_program", "node_rng"]


def node_rng(spec: NodeSpec) -> np.random.Generator:
    """A node's own generator, from (experiment seed, node index): runs are reproducible."""
    return np.random.default_rng(np.random.SeedSequence([spec.seed, spec.node_index]))


def build_program(spec: NodeSpec, rng: np.random.Generator) -> NodeProgram:
    """Load the node's data, build its potential, and instantiate its role's program."""
    info = algorithm_info(spec.algorithm)
    program = program_class(info, spec)
    hyper: Any = parse_params(info.params, spec.hyperparameters, "hyperparameters")
    model = build_model(spec.model)
    potential = None
    if spec.data is not None:
        data = load_shard(spec.data, model)
        batch = hyper.batch_size if info.batching else 0
        potential = model.local_potential(data, spec.prior_share, batch)
    ctx = NodeContext(spec=spec, potential=potential, dim=model.dim, hyper=hyper)
    return program(ctx, rng)
