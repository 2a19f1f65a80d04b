"""What an algorithm declares about itself, and where the catalogue of algorithms comes from.

Each algorithm module exposes ``ALGORITHMS``, a tuple of :class:`AlgorithmInfo`;
:func:`discover` collects them from every module of a package, so a new sampler is one
module (plus its test) and no edit anywhere else.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["GRAPHS", "AlgorithmInfo", "discover"]

GRAPHS = ("undirected", "directed", "star", "none")


@dataclass(frozen=True)
class AlgorithmInfo:
    name: str
    summary: str
    source: str
    graph: str
    """``undirected``, ``directed`` (strongly connected over time), ``star`` or ``none``."""
    params: type
    programs: dict[str, type] = field(default_factory=dict)
    """Role name -> NodeProgram class; the first role is the default one."""
    data_roles: tuple[str, ...] = ("peer",)
    """Roles whose nodes hold data (and so a share of the prior)."""
    synchronous: bool = True
    hub_role: str | None = None
    """The role at the centre of a star (DG-LMC's master, EC-SGHMC's centre); the
    orchestrator gives it to the star's hub and every other node another role."""
    batching: bool = False
    """True: the gradient may be a mini-batch estimate, of ``params.batch_size`` rows
    (0: the full local data); the node builds its potential with that batch size."""
    proximal: bool = False
    """True: every round solves each chain's proximal sub-problem (``LocalPotential.prox``),
    which for a model with ``prox_by_newton`` holds every chain's ``d × d`` Hessian."""
    mixing_weights: bool = False
    """True: the nodes average their in-peers' iterates with the topology's mixing weights
    (``topology.weights``, Metropolis by default); the orchestrator refuses a weight matrix
    given to an algorithm that has none to use."""
    graph_check: Callable[[Sequence[Any], np.ndarray], str | None] | None = None
    """Given every node's hyperparameters (in node order) and one graph's unweighted
    Laplacian (rows in the same order), why the algorithm cannot run on that graph, or
    None; the orchestrator refuses such a graph before any node starts."""

    def __post_init__(self) -> None:
        if self.graph not in GRAPHS:
            raise ValueError(f"{self.name}: graph must be one of {', '.join(GRAPHS)}")
        if self.hub_role is not None and self.hub_role not in self.programs:
            raise ValueError(f"{self.name}: hub_role {self.hub_role!r} is not one of its roles")
        if self.batching and "batch_size" not in {f.name for f in dataclasses.fields(self.params)}:
            raise ValueError(f"{self.name}: batching needs a batch_size in {self.params.__name__}")

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(self.programs)

    @property
    def sampling_roles(self) -> tuple[str, ...]:
        """Roles whose program records samples (it has its own ``sample``); the others
        (a DG-LMC worker, an EC-SGHMC centre) record none by design."""
        from starling.node.samplers.base import NodeProgram  # it imports the samplers' kit

        return tuple(
            r
            for r, p in self.programs.items()
            if getattr(p, "sample", None) is not NodeProgram.sample
        )


def discover(package: str) -> dict[str, AlgorithmInfo]:
    """Every ``ALGORITHMS`` entry of the modules directly inside ``package``, by name."""
    path = importlib.import_module(package).__path__
    found: dict[str, AlgorithmInfo] = {}
    for module in sorted(m.name for m in pkgutil.iter_modules(path)):
        for info in getattr(importlib.import_module(f"{package}.{module}"), "ALGORITHMS", ()):
            if info.name in found:
                raise RuntimeError(f"algorithm {info.name!r} is registered twice")
            found[info.name] = info
    return dict(sorted(found.items()))
