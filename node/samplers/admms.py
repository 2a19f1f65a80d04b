"""D-ADMMS, decentralised ADMM sampling ([000] Algorithm 1), and ADMM (the same, w = 0).

Per node: primal ``x_i`` (init ``N(0, I)``, or ``N(m, A Aᵀ)`` given ``init_mean`` and
``init_factor``: [000] §6.2.4's Fig. 4), dual ``p_i`` (init 0). Round k, after the
neighbours' current ``x_j`` arrived:

    p_i ← p_i + ρ Σ_{j∈N_i} (x_i − x_j)                        (not at round 0)
    x_i ← argmin_x f_i(x) + p_iᵀx + ρ Σ_{j∈N_i} ‖x − (x_i + x_j)/2 + (√2/(2ρ)) w‖²

which is ``prox_{f_i, 1/(2ρ deg_i)}(v)`` with
``v = Σ_j (x_i + x_j) / (2 deg_i) − (√2/(2ρ)) w − p_i / (2ρ deg_i)`` ([000] eq. 40).
The update is synchronous: every node uses the iterates of the same round, as the paper's
algorithm states (its public code updates agents one after another — not followed here).

A neighbour whose message did not arrive is treated as absent from the graph that round:
its terms leave both updates. A node with no neighbour in the graph at all has no quadratic
term and takes ``x_i = argmin f_i + p_iᵀx`` — the paper's "no-edge" baseline.

**A round in which every expected message is lost** (``isolated_round``). Read literally,
the algorithm treats such a node as a no-edge node for that round and jumps to
``argmin f_i + p_iᵀx`` — but p_i holds the dual accumulated while it had neighbours, so the
jump lands far from consensus, and the neighbours' next dual updates amplify it. On the
link-failure study's ring (5 nodes, ρ = 5, every link down w.p. p each round) that makes
D-ADMMS diverge from p = 0.3 on (W2 of the average 0.72 at p = 0.3, 7e9 at p = 0.5).
``hold`` (default) keeps x_i and p_i unchanged for that round instead, as if the round had
not happened for this node; the same study then gives W2 0.21–0.22 for every p up to 0.5,
as without failures (``tests/node/samplers/test_undirected_admms.py``). ``prox`` keeps the
literal rule. Neither changes a fault-free run on one fixed graph.

The same holds for a round whose graph gives the node no neighbour while the schedule gives
it some in other rounds (a time-varying ``topology.schedule``): the literal no-edge step
made every node of a 5-node schedule of three sparse graphs diverge by round 31 (ρ = 5,
linear and logistic regression); ``hold`` ends within 5 % (linear, W2 of the average) and
20 % (logistic, Sinkhorn distance to a MALA reference) of the same schedule with every node
linked in every graph (``tests/node/samplers/test_undirected_admms.py``). Only a node with
no neighbour in the whole schedule takes the no-edge step every round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from starling.node.messages import Message
from starling.node.models.base import LocalPotential
from starling.node.params import check_dimension
from starling.node.samplers.base import Inbox, NodeContext, Program, broadcast
from starling.node.samplers.registry import AlgorithmInfo

__all__ = ["ADMM", "ALGORITHMS", "ADMMSParams", "ADMMSState", "DADMMS"]


ISOLATED_ROUND = ("hold", "prox")


MAX_RHO = 1e300
"""The largest ρ taken: with up to 10⁵ neighbours (an experiment's node limit) the primal
step 1/(2ρ·degree) is still a normal float. ρ = 1e308 made it 0, and every node failed its
first round with ZeroDivisionError."""


@dataclass(frozen=True)
class ADMMSParams:
    rho: float = 5.0
    """Penalty ρ > 0, at most :data:`MAX_RHO` ([000] §6.2 uses 5)."""
    isolated_round: str = "hold"
    """When every expected neighbour's message is lost in a round: ``hold`` keeps x_i and
    p_i; ``prox`` takes the no-edge step argmin f_i + p_iᵀx (see the module docstring)."""

    init_mean: tuple[float, ...] | None = None
    """Mean ``m`` of the initial iterates x_i(0) ~ N(m, A Aᵀ) ([000] §6.2.4, Fig. 4: its
    ablation starts from N((−1, 2), A_q A_qᵀ)); None: zero, the paper's N(0, I)."""
    init_factor: tuple[tuple[float, ...], ...] | None = None
    """``A``, row by row (d rows of d numbers); None: the identity."""

    def check_dimension(self, dim: int) -> None:
        """The initial law must be the model's dimension (:func:`check_dimension`)."""
        for name, value in (("init_mean", self.init_mean), ("init_factor", self.init_factor)):
            if value is not None and len(value) != dim:
                raise ValueError(
                    f"{name}: has {len(value)} entries, the model's dimension is {dim}"
                )

    def validate(self) -> None:
        if self.init_factor is not None:
            size = len(self.init_factor)
            if size == 0 or any(len(row) != size for row in self.init_factor):
                raise ValueError("init_factor: must be a square matrix, given row by row")
            if self.init_mean is not None and len(self.init_mean) != size:
                raise ValueError(
                    f"init_mean: has {len(self.init_mean)} numbers, init_factor {size} rows"
                )
        if self.rho <= 0:
            raise ValueError("rho: must be positive")
        if self.rho > MAX_RHO:
            raise ValueError(
                f"rho: must be at most {MAX_RHO:g}, got {self.rho!r} (the primal step "
                "1/(2 rho degree) would be 0)"
            )
        if self.isolated_round not in ISOLATED_ROUND:
            raise ValueError(
                f"isolated_round: must be one of {', '.join(ISOLATED_ROUND)}, "
                f"got {self.isolated_round!r}"
            )


class ADMMSState(NamedTuple):
    x: np.ndarray
    """Primal iterates, (chains, d)."""
    p: np.ndarray
    """Dual variables, (chains, d)."""


def admms_step(
    state: ADMMSState,
    neighbours: list[np.ndarray],
    round_index: int,
    rho: float,
    noise: np.ndarray,
    potential: LocalPotential,
) -> ADMMSState:
    """One round of [000] Algorithm 1: the dual ascent, then the noisy proximal primal step
    (eq. 40) with the neighbours heard from (none: the no-edge step argmin f_i + pᵀx)."""
    x, p = state
    degree = len(neighbours)
    if round_index > 0:
        for x_j in neighbours:
            p = p + rho * (x - x_j)
    if degree == 0:
        # No quadratic term: x = argmin f_i(x) + pᵀx, i.e. a prox with an infinite step
        # around −p·step; a very large step gives it through the same solver.
        step = 1e12
        v = -p * step
    else:
        step = 1.0 / (2.0 * rho * degree)
        midpoint = sum((x + x_j) for x_j in neighbours) / (2.0 * degree)
        v = midpoint - (np.sqrt(2.0) / (2.0 * rho)) * noise - p * step
    return ADMMSState(potential.prox(v, step, warm_start=x), p)


class DADMMS(Program[ADMMSState]):
    noisy = True

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        self.params: ADMMSParams = ctx.hyper
        shape = (ctx.chains, ctx.dim)
        self.current = ADMMSState(self._initial(rng.standard_normal(shape)), np.zeros(shape))
        self.isolated_rounds = 0
        self.ever_linked = bool(ctx.spec.in_peers())
        """Whether the schedule gives the node a neighbour in some round: if not, it is the
        no-edge baseline and never holds."""

    def _initial(self, z: np.ndarray) -> np.ndarray:
        """x_i(0) = m + A z from standard normal draws ``z`` (chains, d); without ``init_*``,
        ``z`` itself (the same draws, so a run that sets neither is unchanged)."""
        check_dimension(self.params, self.ctx.dim, "hyperparameters")
        mean, factor = self.params.init_mean, self.params.init_factor
        x = z if factor is None else z @ np.asarray(factor, dtype=float).T
        return x if mean is None else x + np.asarray(mean, dtype=float)

    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        x = self.current.x
        return broadcast(Message("x", {"x": x}), self.ctx.neighbourhood(round_index).out_peers)

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        neighbours = [message["x"] for message in inbox.values()]
        if not neighbours and self.ever_linked and self.params.isolated_round == "hold":
            self.isolated_rounds += 1
            return
        x = self.current.x
        noise = rng.standard_normal(x.shape) if self.noisy else np.zeros_like(x)
        self.current = admms_step(
            self.current, neighbours, round_index, self.params.rho, noise, self.ctx.local_potential
        )

    def sample(self) -> np.ndarray:
        return self.current.x

    def metrics(self) -> dict[str, float]:
        return {"isolated_rounds_held": float(self.isolated_rounds)}


class ADMM(DADMMS):
    """Consensus ADMM for the MAP: D-ADMMS with the noise removed ([000] §6.2 baseline)."""

    noisy = False


ALGORITHMS = (
    AlgorithmInfo(
        name="d-admms",
        summary="Decentralised ADMM sampler: noisy proximal primal step, dual ascent",
        source="[000] Algorithm 1",
        graph="undirected",
        params=ADMMSParams,
        programs={"peer": DADMMS},
        proximal=True,
    ),
    AlgorithmInfo(
        name="admm",
        summary="Consensus ADMM (D-ADMMS with w = 0): converges to the MAP, a baseline",
        source="[000] §6.2",
        graph="undirected",
        params=ADMMSParams,
        programs={"peer": ADMM},
        proximal=True,
    ),
)
