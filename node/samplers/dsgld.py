"""Decentralised SGLD ([000] eq. 22; Gürbüzbalaban et al. 2021).

``x_i ← Σ_{j∈N_i∪{i}} S_ij x_j − η ∇f_i(x_i) + √(2η) w``, ``w ~ N(0, I)``, with S doubly
stochastic (Metropolis–Hastings weights unless configured). When a neighbour's message is
missing — its link was down this round — its weight moves to the node's own iterate, so
the row of S still sums to one (the graph of that round simply lacks the edge).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from node.messages import Message
from node.samplers.base import Inbox, NodeContext, NodeProgram, broadcast
from node.samplers.registry import AlgorithmInfo

__all__ = ["ALGORITHMS", "DSGLD", "DSGLDParams", "mix"]


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


def mix(own: np.ndarray, weights: Mapping[str, float], inbox: Inbox, kind: str) -> np.ndarray:
    """``Σ_j S_ij x_j`` over the node and the neighbours heard from, lost weight to self."""
    self_weight = 1.0 - sum(weights[j] for j in inbox)
    total = self_weight * own
    for sender, message in inbox.items():
        total = total + weights[sender] * message[kind]
    return total


class DSGLD(NodeProgram):
    state_fields = ("x",)

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        self.x = rng.standard_normal((ctx.chains, ctx.dim))

    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        return broadcast(Message("x", {"x": self.x}), self.ctx.neighbourhood(round_index).out_peers)

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        eta = self.ctx.hyper.eta
        weights = self.ctx.neighbourhood(round_index).weights
        consensus = mix(self.x, weights, inbox, "x")
        gradient = self.ctx.potential.grad(self.x, rng)
        noise = rng.standard_normal(self.x.shape)
        self.x = consensus - eta * gradient + np.sqrt(2.0 * eta) * noise

    def sample(self) -> np.ndarray:
        return self.x


ALGORITHMS = (
    AlgorithmInfo(
        name="d-sgld",
        summary="Decentralised SGLD: gossip average plus a Langevin step",
        source="[000] eq. 22",
        graph="undirected",
        params=DSGLDParams,
        programs={"peer": DSGLD},
    ),
)
