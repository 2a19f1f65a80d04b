"""Decentralised SGLD ([000] eq. 22; Gürbüzbalaban et al. 2021).

``x_i ← Σ_{j∈N_i∪{i}} S_ij x_j − η ∇f_i(x_i) + √(2η) w``, ``w ~ N(0, I)``, with S doubly
stochastic (Metropolis–Hastings weights unless configured). When a neighbour's message is
missing — its link was down this round — its weight moves to the node's own iterate, so
the row of S still sums to one (the graph of that round simply lacks the edge).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from starling.node.messages import Message
from starling.node.samplers.base import Inbox, NodeContext, Program, broadcast
from starling.node.samplers.gossip import check_mixing_weights, mix
from starling.node.samplers.kernels import langevin_step
from starling.node.samplers.registry import AlgorithmInfo

__all__ = ["ALGORITHMS", "DSGLD", "DSGLDParams", "DSGLDState"]


@dataclass(frozen=True)
class DSGLDParams:
    eta: float = 0.009
    """Step size η ([000] §6.2 uses 0.009)."""
    batch_size: int = 0
    """Mini-batch size b for the stochastic gradient; 0 means the full local gradient."""

    def validate(self) -> None:
        if self.eta <= 0:
            raise ValueError("eta: must be positive")
        if self.batch_size < 0:
            raise ValueError("batch_size: must be zero (full batch) or positive")


class DSGLDState(NamedTuple):
    x: np.ndarray
    """The node's iterates, (chains, d)."""


class DSGLD(Program[DSGLDState]):
    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        check_mixing_weights(ctx.spec)
        self.params: DSGLDParams = ctx.hyper
        self.current = DSGLDState(rng.standard_normal((ctx.chains, ctx.dim)))

    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        x = self.current.x
        return broadcast(Message("x", {"x": x}), self.ctx.neighbourhood(round_index).out_peers)

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        x = self.current.x
        consensus = mix(x, self.ctx.neighbourhood(round_index).weights, inbox, "x")
        gradient = self.ctx.local_potential.grad(x, rng)
        self.current = DSGLDState(langevin_step(consensus, gradient, self.params.eta, rng))

    def sample(self) -> np.ndarray:
        return self.current.x


ALGORITHMS = (
    AlgorithmInfo(
        name="d-sgld",
        summary="Decentralised SGLD: gossip average plus a Langevin step",
        source="[000] eq. 22",
        graph="undirected",
        params=DSGLDParams,
        programs={"peer": DSGLD},
        batching=True,
        mixing_weights=True,
    ),
)
