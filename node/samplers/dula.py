"""Decentralised ULA ([004] Algorithm 1, eq. 8; [000] eq. 25).

Per node, round k, after the neighbours' ``x_j`` arrived:

    x_i ← x_i − β_k Σ_{j∈N_i} (x_i − x_j) − α_k N ∇f_i(x_i) + √(2α_k) v,   v ~ N(0, N·I)

with N the number of data-holding nodes, unweighted adjacency (a_ij = 1 for a neighbour)
and the step sizes of [004] eq. 15, shifted by an offset k0:

    α_k = a / (k0 + k + 1)^δ2,        β_k = b / (k0 + k + 1)^δ1,        k = 0, 1, 2, ...

``k0 = 0`` is [004] exactly. [000] §6.2 writes ``α(k) = 0.00082/(230+k)^χ2`` and
``ζ(k) = 0.48/(230+k)^χ1`` with k counted from 0 (so does its public code), which is
``k0 = 229`` here. The average of the nodes follows ULA on the pooled potential ([004] eq.
16): the factor N on the gradient and the variance N of v cancel against the 1/N of the
average.

[004] proves convergence under ``a, b > 0``, ``0 ≤ δ1`` and ``1/2 + δ1 < δ2 < 1`` (eq. 15).
``check_rates`` (default on) rejects settings outside that range; switch it off to run them
anyway — [000] §6.2 does so on purpose (χ1 = χ2 = 0.05), and δ1 = δ2 = 0 gives the
constant-step variant, which keeps a bias.

Defaults: [000] §6.2's b = 0.48 and k0 = 229 with δ1 = 0.05, and δ2 = 0.6, a round value
inside eq. 15. With δ2 = 0.6 the offset shrinks the first step by 230^0.6 ≈ 26, so a = 0.02
(not [000]'s 0.00082, tuned for δ2 = 0.05) gives α_0 ≈ 7.6e-4, close to [000]'s
0.00082/230^0.05 ≈ 6.3e-4. Measured on [000]'s linear regression (d = 2, ξ = 4, λ = 10;
5 nodes × 50 points, data seed 1; 100 chains; seeds 7–9), after 1000 rounds the nodes' mean
W2 to the posterior is 0.033–0.043 on the ring and on the full graph, with the model's
default x* = (1, −1) and with [000]'s x* = (4.211, 2.262) alike. a = 0.00082 leaves it at
1.08–1.09 for x* = (1, −1) and 3.52–3.54 for (4.211, 2.262): its steps barely move the
chains from their N(0, I) start, so the figure is the distance from the start to the
posterior, and grows with x*.

**Stable consensus.** Without the Langevin terms, eq. 8 is ``x ← (I − B_k L) x`` on the
stacked iterates (L the graph Laplacian, B_k = diag(β_k of each node)), which multiplies
each disagreement mode by ``1 − β_k λ``, λ an eigenvalue of ``B_k^{1/2} L B_k^{1/2}``: the
nodes only draw together while ``β_k λ_max < 2``, and β_k is largest at k = 0. [000]'s
b = 0.48 (β_0 ≈ 0.37) meets this on a ring (λ_max ≤ 4) and a full graph of 5 (λ_max = 5),
but not on a full graph or star of 7 (λ_max = 7): there the disagreement grows by 1.55 a
round for tens of thousands of rounds. :func:`consensus_check` refuses such a graph before
any node starts. Links that fail only remove edges, which never raises λ_max.

A neighbour whose message did not arrive this round is absent from that round's graph: its
term leaves the consensus sum. k is the round index, so a restarted node resumes its schedule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from starling.node.messages import Message
from starling.node.samplers.base import Inbox, NodeContext, Program, broadcast
from starling.node.samplers.gossip import disagreement
from starling.node.samplers.kernels import langevin_step
from starling.node.samplers.registry import AlgorithmInfo
from starling.node.samplers.schedules import PolynomialDecay

__all__ = ["ALGORITHMS", "DULA", "DULAParams", "DULAState", "consensus_check"]


@dataclass(frozen=True)
class DULAParams:
    a: float = 0.02
    """Scale a of the Langevin step α_k ([000] §6.2 uses 0.00082 with δ2 = 0.05)."""
    b: float = 0.48
    """Scale b of the consensus step β_k ([000] §6.2: 0.48)."""
    delta1: float = 0.05
    """Decay δ1 of β_k ([000] §6.2 uses χ1 = 0.05 on the ring)."""
    delta2: float = 0.6
    """Decay δ2 of α_k; the default is inside [004] eq. 15's range for δ1 = 0.05."""
    k0: int = 229
    """Offset of the schedules: 0 is [004]; 229 gives [000]'s (230 + k)."""
    check_rates: bool = True
    """Reject (δ1, δ2) outside [004] eq. 15's ``1/2 + δ1 < δ2 < 1``; false allows them."""
    batch_size: int = 0
    """Mini-batch size b for the stochastic gradient ([004] §5.2-5.3); 0: full batch."""

    def validate(self) -> None:
        if not self.a > 0:
            raise ValueError("a: must be positive")
        if not self.b >= 0:
            raise ValueError("b: must be non-negative")
        if not self.delta1 >= 0:
            raise ValueError("delta1: must be non-negative")
        if not self.delta2 >= 0:
            raise ValueError("delta2: must be non-negative")
        if self.k0 < 0:
            raise ValueError("k0: must be non-negative")
        if self.batch_size < 0:
            raise ValueError("batch_size: must be zero (full batch) or positive")
        if self.check_rates:
            if not self.b > 0:
                raise ValueError(
                    "b: [004] eq. 15 needs b > 0 (set check_rates: false to run without consensus)"
                )
            if not 0.5 + self.delta1 < self.delta2 < 1.0:
                raise ValueError(
                    f"delta2: [004] eq. 15 needs 1/2 + delta1 < delta2 < 1, got "
                    f"delta1={self.delta1:g}, delta2={self.delta2:g} (set check_rates: false "
                    "to run outside the proven range, as [000] §6.2 does)"
                )

    def alpha(self) -> PolynomialDecay:
        return PolynomialDecay(self.a, self.k0 + 1.0, self.delta2)

    def beta(self) -> PolynomialDecay | None:
        return PolynomialDecay(self.b, self.k0 + 1.0, self.delta1) if self.b > 0 else None

    def first_beta(self) -> float:
        """β_0, the largest consensus step of the schedule."""
        schedule = self.beta()
        return schedule(0) if schedule is not None else 0.0


def consensus_check(params: Sequence[DULAParams], laplacian: Any) -> str | None:
    """Why eq. 8's consensus step would push the nodes apart on this graph, or None.

    ``params``: every node's hyperparameters, in the order of ``laplacian``'s rows (the
    graph's unweighted Laplacian, a scipy sparse matrix). The disagreement modes are
    multiplied by ``1 − λ``, λ the eigenvalues of ``B^{1/2} L B^{1/2}`` with
    ``B = diag(β_0)`` (the module docstring); one grows when the largest exceeds 2. The
    largest absolute row sum bounds it (Gershgorin), which settles most graphs at once.
    """
    from scipy.sparse import diags

    beta = np.array([p.first_beta() for p in params], dtype=float)
    largest = float(beta.max()) if len(beta) else 0.0
    if not largest > 0.0:
        return None  # no consensus step at all
    # In units of the largest β_0: a b near the largest float made B^{1/2} L B^{1/2}
    # overflow, its eigenvalue NaN (with numpy's warning on stderr) and the advice
    # "take b below nan".
    root = diags(np.sqrt(beta / largest))
    scaled = (root @ laplacian @ root).tocsr()
    if largest * float(abs(scaled).sum(axis=1).max()) <= 2.0:
        return None
    unit_top = _largest_eigenvalue(scaled)
    top = largest * unit_top
    if top <= 2.0 * (1.0 + 1e-9):
        return None
    largest_b = max(p.b for p in params)
    return (
        f"its consensus step ([004] eq. 8) would push the nodes apart: beta_0 * "
        f"lambda_max(L) = {top:.3g} exceeds 2 (beta_0 = b/(k0 + 1)^delta1 = "
        f"{largest:.3g}, lambda_max(L) = {_largest_eigenvalue(laplacian):.3g}); "
        f"take b below {2.0 / (unit_top * (largest / largest_b)):.3g}"
    )


def _largest_eigenvalue(symmetric: Any) -> float:
    if symmetric.shape[0] <= 2000:
        return float(np.linalg.eigvalsh(symmetric.toarray())[-1])
    from scipy.sparse.linalg import eigsh

    return float(eigsh(symmetric.astype(float), k=1, which="LA", return_eigenvectors=False)[0])


class DULAState(NamedTuple):
    x: np.ndarray
    """The node's iterates, (chains, d)."""


class DULA(Program[DULAState]):
    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        params: DULAParams = ctx.hyper
        self.current = DULAState(rng.standard_normal((ctx.chains, ctx.dim)))
        self._alpha = params.alpha()
        self._beta = params.beta()
        self._n = max(ctx.spec.num_nodes, 1)

    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        x = self.current.x
        return broadcast(Message("x", {"x": x}), self.ctx.neighbourhood(round_index).out_peers)

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        x = self.current.x
        alpha = self._alpha(round_index)
        beta = self._beta(round_index) if self._beta is not None else 0.0
        base = x - beta * disagreement(x, inbox, "x")
        gradient = self.ctx.local_potential.grad(x, rng)
        # [004] eq. 8: a step on N f_i with noise v ~ N(0, N I).
        self.current = DULAState(langevin_step(base, gradient, alpha, rng, scale=self._n))

    def sample(self) -> np.ndarray:
        return self.current.x


ALGORITHMS = (
    AlgorithmInfo(
        name="d-ula",
        summary="Decentralised ULA: Laplacian consensus plus a Langevin step, decaying steps",
        source="[004] Algorithm 1, eq. 8",
        graph="undirected",
        params=DULAParams,
        programs={"peer": DULA},
        batching=True,
        graph_check=consensus_check,
    ),
)
