"""Decentralised SGHMC ([000] eq. 23-24; Gürbüzbalaban et al. 2021).

Per node: position ``x_i`` and velocity ``v_i``. One round, after the neighbours' ``x_j``
arrived:

    v_i ← v_i − η (γ v_i + ∇f_i(x_i)) + √(2γη) w,   w ~ N(0, I)          ([000] eq. 23)
    x_i ← Σ_{j∈N_i∪{i}} S_ij x_j + η v_i        (with the new v_i)       ([000] eq. 24)

S is doubly stochastic (Metropolis–Hastings weights from the topology). A neighbour whose
message did not arrive this round is treated as absent from that round's graph: its weight
moves to the node's own iterate (:func:`starling.node.samplers.gossip.mix`), as in D-SGLD.

Defaults η = 0.1, γ = 7 are those of [000] §6.2 (taken from Gürbüzbalaban et al.).
Initialisation: ``x_i ~ N(0, I)`` and ``v_i ~ N(0, I)`` — the velocity's law under the
continuous dynamics' invariant measure, and what [000]'s public code does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from starling.node.messages import Message
from starling.node.samplers.base import Inbox, NodeContext, Program, broadcast
from starling.node.samplers.gossip import check_mixing_weights, mix
from starling.node.samplers.kernels import friction_velocity, sghmc_position
from starling.node.samplers.registry import AlgorithmInfo

__all__ = ["ALGORITHMS", "DSGHMC", "DSGHMCParams", "DSGHMCState"]


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


class DSGHMCState(NamedTuple):
    x: np.ndarray
    """Positions, (chains, d)."""
    v: np.ndarray
    """Velocities, (chains, d)."""


class DSGHMC(Program[DSGHMCState]):
    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        check_mixing_weights(ctx.spec)
        self.params: DSGHMCParams = ctx.hyper
        x = rng.standard_normal((ctx.chains, ctx.dim))
        self.current = DSGHMCState(x, rng.standard_normal((ctx.chains, ctx.dim)))

    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        x = self.current.x
        return broadcast(Message("x", {"x": x}), self.ctx.neighbourhood(round_index).out_peers)

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        x, v = self.current
        eta = self.params.eta
        consensus = mix(x, self.ctx.neighbourhood(round_index).weights, inbox, "x")
        gradient = self.ctx.local_potential.grad(x, rng)
        v = friction_velocity(v, gradient, eta, self.params.gamma, rng)  # [000] eq. 23
        self.current = DSGHMCState(sghmc_position(consensus, v, eta, 1.0), v)  # eq. 24

    def sample(self) -> np.ndarray:
        return self.current.x


ALGORITHMS = (
    AlgorithmInfo(
        name="d-sghmc",
        summary="Decentralised SGHMC: gossip average of positions plus an underdamped step",
        source="[000] eq. 23-24",
        graph="undirected",
        params=DSGHMCParams,
        programs={"peer": DSGHMC},
        batching=True,
        mixing_weights=True,
    ),
)
