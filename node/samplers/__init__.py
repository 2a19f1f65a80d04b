"""Samplers from the five papers, as per-node programs. See :mod:`starling.node.samplers.base`.

Each algorithm module in this package exposes ``ALGORITHMS``, a tuple of
:class:`~starling.node.samplers.registry.AlgorithmInfo`;
:func:`~starling.node.samplers.registry.discover` collects them here, so adding a sampler means
adding one module. The package does no IO: :mod:`starling.node.assemble` loads a node's data and
builds its program.
"""

from __future__ import annotations

from starling.node.params import ConfigError
from starling.node.samplers.base import NodeProgram
from starling.node.samplers.registry import AlgorithmInfo, discover
from starling.node.spec import NodeSpec

__all__ = ["ALGORITHMS", "AlgorithmInfo", "algorithm_info", "program_class"]

ALGORITHMS: dict[str, AlgorithmInfo] = discover(__name__)


def algorithm_info(name: str) -> AlgorithmInfo:
    try:
        return ALGORITHMS[name]
    except KeyError:
        raise ConfigError(
            f"algorithm: unknown algorithm {name!r} (known: {', '.join(ALGORITHMS)})"
        ) from None


def program_class(info: AlgorithmInfo, spec: NodeSpec) -> type[NodeProgram]:
    """The program of the spec's role; a role the algorithm does not have is a ConfigError."""
    if spec.role not in info.programs:
        raise ConfigError(
            f"node {spec.node_id!r}: role {spec.role!r} is not one of {info.name}'s roles "
            f"({', '.join(info.roles)})"
        )
    return info.programs[spec.role]
