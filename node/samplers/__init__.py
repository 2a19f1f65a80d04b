"""Samplers from the five papers, as per-node programs. See :mod:`node.samplers.base`."""

from __future__ import annotations

import numpy as np

from node.data import load_shard
from node.models import build_model
from node.params import ConfigError, parse_params
from node.samplers.admms import ADMM, DADMMS, ADMMSParams
from node.samplers.base import NodeContext, NodeProgram
from node.samplers.dsgld import DSGLD, DSGLDParams
from node.samplers.registry import ALGORITHMS, AlgorithmInfo, register
from node.spec import NodeSpec

__all__ = ["ALGORITHMS", "AlgorithmInfo", "build_program", "node_rng", "algorithm_info"]

register(
    AlgorithmInfo(
        name="d-sgld",
        summary="Decentralised SGLD: gossip average plus a Langevin step",
        source="[000] eq. 22",
        graph="undirected",
        params=DSGLDParams,
        programs={"peer": DSGLD},
    )
)
register(
    AlgorithmInfo(
        name="d-admms",
        summary="Decentralised ADMM sampler: noisy proximal primal step, dual ascent",
        source="[000] Algorithm 1",
        graph="undirected",
        params=ADMMSParams,
        programs={"peer": DADMMS},
    )
)
register(
    AlgorithmInfo(
        name="admm",
        summary="Consensus ADMM (D-ADMMS with w = 0): converges to the MAP, a baseline",
        source="[000] §6.2",
        graph="undirected",
        params=ADMMSParams,
        programs={"peer": ADMM},
    )
)


def algorithm_info(name: str) -> AlgorithmInfo:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ConfigError(
            f"algorithm: unknown algorithm {name!r} (known: {', '.join(sorted(ALGORITHMS))})"
        ) from None


def node_rng(spec: NodeSpec) -> np.random.Generator:
    """A node's own generator, from (experiment seed, node index): runs are reproducible."""
    return np.random.default_rng(np.random.SeedSequence([spec.seed, spec.node_index]))


def build_program(spec: NodeSpec, rng: np.random.Generator) -> NodeProgram:
    """Load the node's data, build its potential, and instantiate its role's program."""
    info = algorithm_info(spec.algorithm)
    if spec.role not in info.programs:
        raise ConfigError(
            f"node {spec.node_id!r}: role {spec.role!r} is not one of {info.name}'s roles "
            f"({', '.join(info.roles)})"
        )
    hyper = parse_params(info.params, spec.hyperparameters, "hyperparameters")
    model = build_model(spec.model)
    potential = None
    if spec.data is not None:
        data = load_shard(spec.data, model)
        batch = getattr(hyper, "batch_size", 0)
        potential = model.local_potential(data, spec.prior_share, batch)
    ctx = NodeContext(spec=spec, potential=potential, dim=model.dim, hyper=hyper)
    return info.programs[spec.role](ctx, rng)
