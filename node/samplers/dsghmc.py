"""Decentralised SGHMC ([000] eq. 23-24; Gürbüzbalaban et al. 2021).

Per node: position ``x_i`` and velocity ``v_i``. One round, after the neighbours' ``x_j``
arrived:

    v_i ← v_i − η (γ v_i + ∇f_i(x_i)) + √(2γη) w,   w ~ N(0, I)          ([000] eq. 23)
    x_i ← Σ_{j∈N_i∪{i}} S_ij x_j + η v_i        (with the new v_i)       ([000] eq. 24)

S is doubly stochastic (Metropolis–Hastings weights from the topology). A neighbour whose
message did not arrive this round is treated as absent from that round's graph: its weight
moves to the node's own iterate (:func:`node.samplers.dsgld.mix`), as in D-SGLD.

Defaults η = 0.1, γ = 7 are those of [000] §6.2 (taken from Gürbüzbalaban et al.).
Initialisation: ``x_i ~ N(0, I)`` and ``v_i ~ N(0, I)`` — the velocity's law under the
continuous dynamics' invariant measure, and what [000]'s public code does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from node.messages import Message
from node.samplers.base import Inbox, NodeContext, NodeProgram, broadcast
from node.samplers.dsgld import mix
from node.samplers.registry import AlgorithmInfo

__all__ = ["ALGORITHMS", "DSGHMC", "DSGHMCParams"]


@dataclass(frozen=True)
class DSGHMCParams:
    eta: float = 0.1
    """Step size η ([000] §6.2: 0.1 for linear regression, 0.02 for logistic regression)."""
    gamma: float = 7.0
    """Friction γ ([000] §6.2: 7; §6.3: 30)."""
    batch_size: int = 0
    """Mini-batch size b for the stochastic gradient; 0 means the full local gradient."""

    def validate(self) -> None:
        if not self.eta > 0:
            raise ValueError("eta: must be positive")
        if not self.gamma > 0:
            raise ValueError("gamma: must be positive")
        if self.eta * self.gamma >= 2:
            # The velocity's own recursion v ← (1 − ηγ) v + ... diverges once |1 − ηγ| ≥ 1.
            raise ValueError(
                f"gamma: eta * gamma must stay below 2 for the velocity recursion to be "
                f"stable (got {self.eta} * {self.gamma} = {self.eta * self.gamma:g})"
            )
        if self.batch_size < 0:
            raise ValueError("batch_size: must be zero (full batch) or positive")


class DSGHMC(NodeProgram):
    state_fields = ("x", "v")

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        self.x = rng.standard_normal((ctx.chains, ctx.dim))
        self.v = rng.standard_normal((ctx.chains, ctx.dim))

    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        return broadcast(Message("x", {"x": self.x}), self.ctx.neighbourhood(round_index).out_peers)

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        eta, gamma = self.ctx.hyper.eta, self.ctx.hyper.gamma
        weights = self.ctx.neighbourhood(round_index).weights
        consensus = mix(self.x, weights, inbox, "x")
        gradient = self.ctx.potential.grad(self.x, rng)
        noise = rng.standard_normal(self.x.shape)
        self.v = self.v - eta * (gamma * self.v + gradient) + np.sqrt(2.0 * gamma * eta) * noise
        self.x = consensus + eta * self.v

    def sample(self) -> np.ndarray:
        return self.x


ALGORITHMS = (
    AlgorithmInfo(
        name="d-sghmc",
        summary="Decentralised SGHMC: gossip average of positions plus an underdamped step",
        source="[000] eq. 23-24",
        graph="undirected",
        params=DSGHMCParams,
        programs={"peer": DSGHMC},
    ),
)
