"""Samplers from the five papers, as per-node programs. See :mod:`node.samplers.base`.

Each algorithm module in this package exposes ``ALGORITHMS``, a tuple of
:class:`~node.samplers.registry.AlgorithmInfo`; they are collected here, so adding a
sampler means adding one module.
"""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np

from node.data import load_shard
from node.models import build_model
from node.params import ConfigError, parse_params
from node.samplers.base import NodeContext, NodeProgram
from node.samplers.registry import AlgorithmInfo
from node.spec import NodeSpec

__all__ = ["ALGORITHMS", "AlgorithmInfo", "algorithm_info", "build_program", "node_rng"]


def _discover() -> dict[str, AlgorithmInfo]:
    found: dict[str, AlgorithmInfo] = {}
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        for info in getattr(importlib.import_module(f"{__name__}.{module}"), "ALGORITHMS", ()):
            if info.name in found:
                raise RuntimeError(f"algorithm {info.name!r} is registered twice")
            found[info.name] = info
    return dict(sorted(found.items()))


ALGORITHMS: dict[str, AlgorithmInfo] = _discover()


def algorithm_info(name: str) -> AlgorithmInfo:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ConfigError(
            f"algorithm: unknown algorithm {name!r} (known: {', '.join(ALGORITHMS)})"
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
