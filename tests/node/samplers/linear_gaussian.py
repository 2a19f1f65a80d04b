"""Exact laws of the undirected samplers on a Gaussian target, from the same specs they run on.

With a quadratic potential ``f_i(x) = ½ xᵀA_i x − b_iᵀx`` every update in
:mod:`starling.node.samplers.dsgld`, :mod:`~starling.node.samplers.dsghmc`,
:mod:`~starling.node.samplers.dula` and :mod:`~starling.node.samplers.admms` is affine in the
stacked state of all nodes plus Gaussian noise, ``z ← M z + c + G w``. This module writes ``M, c,
G`` down for each sampler (the derivation is in each function's docstring);
:func:`tests.stats.stationary_gaussian` then gives the exact stationary law, and
:func:`tests.stats.propagate_gaussian` the exact law at any round.

``A_i`` and ``b_i`` are read off the node's own potential (``∇f_i(x) = A_i x − b_i``), and
:func:`Network.posterior` is checked against the model's conjugate posterior, so a wrong
gradient cannot hide behind a law derived from that same gradient.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from starling.node.data.shards import load_shard
from starling.node.engine import simulate
from starling.node.models import build_model
from starling.node.spec import NodeSpec
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.planning.node_specs import node_specs

__all__ = [
    "LinearRecursion",
    "Network",
    "network_from_specs",
    "run_linear_regression",
    "transient",
    "window_law",
]


def run_linear_regression(
    algorithm: str,
    hyperparameters: dict,
    *,
    topology: str,
    nodes: int,
    size: int,
    rounds: int,
    chains: int,
    seed: int,
    faults: list | None = None,
    data_seed: int = 1,
) -> tuple[list[NodeSpec], dict[str, np.ndarray]]:
    """An experiment file's worth of Bayesian linear regression (d = 2, [000] §6.2 model),
    parsed and simulated exactly as ``starling simulate`` would; returns specs and samples."""
    raw = {
        "name": f"{algorithm}-check",
        "algorithm": algorithm,
        "hyperparameters": hyperparameters,
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "data": {"source": "synthetic", "size": size, "seed": data_seed},
        "topology": {"kind": topology, "nodes": nodes},
        "rounds": rounds,
        "chains": chains,
        "seed": seed,
        "faults": faults or [],
    }
    specs = node_specs(parse_experiment(raw))
    return specs, simulate(specs)


@dataclass(frozen=True)
class LinearRecursion:
    """``z ← M z + c + G w``; node i's position is ``readout[i] @ z``."""

    M: np.ndarray
    c: np.ndarray
    G: np.ndarray
    readout: tuple[np.ndarray, ...]

    def node_law(self, mean: np.ndarray, cov: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
        R = self.readout[i]
        return R @ mean, R @ cov @ R.T


@dataclass(frozen=True)
class Network:
    """The Gaussian problem as the nodes see it: their A_i, b_i, mixing weights, graph."""

    ids: tuple[str, ...]
    A: tuple[np.ndarray, ...]
    b: tuple[np.ndarray, ...]
    S: np.ndarray
    """Mixing weights S_ij as given to the nodes (row i: node i's weights)."""
    adjacency: np.ndarray
    """adjacency[i, j] = 1 when node i hears node j."""
    exact_mean: np.ndarray
    exact_cov: np.ndarray
    """The model's own conjugate posterior over the pooled shards."""

    @property
    def size(self) -> int:
        return len(self.ids)

    @property
    def dim(self) -> int:
        return self.A[0].shape[0]

    def posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """``N((Σ A_i)⁻¹ Σ b_i, (Σ A_i)⁻¹)``: the target ``exp(−Σ f_i)``."""
        cov = np.linalg.inv(sum(self.A))
        return cov @ sum(self.b), (cov + cov.T) / 2

    def block(self, blocks: Sequence[np.ndarray]) -> np.ndarray:
        d = self.dim
        out = np.zeros((self.size * d, self.size * d))
        for i, a in enumerate(blocks):
            out[i * d : (i + 1) * d, i * d : (i + 1) * d] = a
        return out

    def kron(self, matrix: np.ndarray) -> np.ndarray:
        return np.kron(matrix, np.eye(self.dim))

    def stacked_b(self) -> np.ndarray:
        return np.concatenate(self.b)

    def positions(self, offset: int, width: int) -> tuple[np.ndarray, ...]:
        """Readouts picking node i's d coordinates at ``offset`` in a state of ``width``."""
        d = self.dim
        out = []
        for i in range(self.size):
            R = np.zeros((d, width))
            R[:, offset + i * d : offset + (i + 1) * d] = np.eye(d)
            out.append(R)
        return tuple(out)

    def without_link(self, sender: str, receiver: str) -> Network:
        """The network when ``receiver`` never hears ``sender``: the lost mixing weight goes
        to the receiver itself (:func:`starling.node.samplers.dsgld.mix`) and the edge leaves its
        Laplacian row."""
        i, j = self.ids.index(receiver), self.ids.index(sender)
        S = self.S.copy()
        S[i, i] += S[i, j]
        S[i, j] = 0.0
        adjacency = self.adjacency.copy()
        adjacency[i, j] = 0.0
        return Network(self.ids, self.A, self.b, S, adjacency, self.exact_mean, self.exact_cov)

    # ------------------------------------------------------------------------------------
    # The samplers as linear recursions.

    def dsgld(self, eta: float) -> LinearRecursion:
        """D-SGLD ([000] eq. 22): ``X ← (S⊗I − η A) X + η b + √(2η) W``."""
        n = self.size * self.dim
        M = self.kron(self.S) - eta * self.block(self.A)
        G = np.sqrt(2.0 * eta) * np.eye(n)
        return LinearRecursion(M, eta * self.stacked_b(), G, self.positions(0, n))

    def dsghmc(self, eta: float, gamma: float) -> LinearRecursion:
        """D-SGHMC ([000] eq. 23-24) on z = (X, V):

        V' = (1 − ηγ) V − η A X + η b + √(2γη) W
        X' = S X + η V' = (S − η² A) X + η (1 − ηγ) V + η² b + η √(2γη) W
        """
        n = self.size * self.dim
        A = self.block(self.A)
        eye = np.eye(n)
        M = np.block(
            [
                [self.kron(self.S) - eta**2 * A, eta * (1 - eta * gamma) * eye],
                [-eta * A, (1 - eta * gamma) * eye],
            ]
        )
        b = self.stacked_b()
        c = np.concatenate([eta**2 * b, eta * b])
        root = np.sqrt(2.0 * gamma * eta)
        G = np.vstack([eta * root * eye, root * eye])
        return LinearRecursion(M, c, G, self.positions(0, 2 * n))

    def laplacian(self) -> np.ndarray:
        """Row i: ``Σ_{j heard by i} (x_i − x_j)`` as a matrix (unweighted)."""
        return np.diag(self.adjacency.sum(axis=1)) - self.adjacency

    def dula(self, alpha: float, beta: float, num_nodes: int) -> LinearRecursion:
        """One D-ULA step ([004] eq. 8-9): ``X ← (I − β L⊗I − α N A) X + α N b + √(2αN) W``."""
        n = self.size * self.dim
        M = np.eye(n) - beta * self.kron(self.laplacian()) - alpha * num_nodes * self.block(self.A)
        c = alpha * num_nodes * self.stacked_b()
        G = np.sqrt(2.0 * alpha * num_nodes) * np.eye(n)
        return LinearRecursion(M, c, G, self.positions(0, n))

    def dula_steps(
        self, alpha, beta, num_nodes: int, rounds: int
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for k in range(rounds):
            step = self.dula(alpha(k), beta(k), num_nodes)
            yield step.M, step.c, step.G

    def dadmms(self, rho: float) -> LinearRecursion:
        """D-ADMMS ([000] Algorithm 1) after round 0, for an undirected connected graph.

        Node i, with D = diag(deg), L = D − Adj and H_i = A_i + 2ρ deg_i I:

            P' = P + ρ L X
            X' = H⁻¹ (b − P' + ρ (D + Adj) X − √2 D W) = H⁻¹ (b − P + 2ρ Adj X − √2 D W)

        (the prox of :mod:`starling.node.samplers.admms` solved in closed form; the √2 D W term is
        ``2ρ deg_i · (√2/(2ρ)) w_i``). Σ_i p_i stays 0 (1ᵀL = 0), an eigenvalue 1 the noise
        never excites, so the dual is written in the basis U of 1^⊥: ``P = (U⊗I) q``,
        ``q' = q + ρ (UᵀL⊗I) X``. The state is z = (X, q).
        """
        N, d = self.size, self.dim
        n = N * d
        degree = self.adjacency.sum(axis=1)
        H_inv = np.linalg.inv(
            self.block(
                [a + 2 * rho * deg * np.eye(d) for a, deg in zip(self.A, degree, strict=True)]
            )
        )
        ones = np.ones((N, 1)) / np.sqrt(N)
        # Orthonormal basis of the complement of the constant vector.
        U = np.linalg.svd(np.eye(N) - ones @ ones.T)[0][:, : N - 1]
        Ud = self.kron(U)
        m = (N - 1) * d
        M = np.block(
            [
                [H_inv @ (2 * rho * self.kron(self.adjacency)), -H_inv @ Ud],
                [rho * self.kron(U.T @ self.laplacian()), np.eye(m)],
            ]
        )
        c = np.concatenate([H_inv @ self.stacked_b(), np.zeros(m)])
        G = np.vstack([-np.sqrt(2.0) * H_inv @ self.kron(np.diag(degree)), np.zeros((m, n))])
        return LinearRecursion(M, c, G, self.positions(0, n + m))


def network_from_specs(specs: Sequence[NodeSpec]) -> Network:
    """Read each node's quadratic potential and weights off its own spec."""
    model = build_model(specs[0].model)
    ids = tuple(spec.node_id for spec in specs)
    shards, A, b = [], [], []
    for spec in specs:
        shard = load_shard(spec.data, model)
        shards.append(shard)
        potential = model.local_potential(shard, spec.prior_share, 0)
        d = potential.dim
        offset = -potential.grad(np.zeros((1, d)))[0]
        slope = potential.grad(np.eye(d)) + offset[None, :]
        A.append((slope + slope.T) / 2)
        b.append(offset)
    N = len(specs)
    S = np.zeros((N, N))
    adjacency = np.zeros((N, N))
    for i, spec in enumerate(specs):
        hood = spec.neighbourhood(0)
        for peer, weight in hood.weights.items():
            S[i, ids.index(peer)] = weight
        for peer in hood.in_peers:
            adjacency[i, ids.index(peer)] = 1.0
    exact = model.exact_posterior(shards)
    return Network(ids, tuple(A), tuple(b), S, adjacency, exact.mean, exact.cov)


def transient(M: np.ndarray, burn_in: int) -> float:
    """How much of the initial offset survives ``burn_in`` steps: ``ρ(M)^burn_in``.

    Tests assert it is negligible, so discarding ``burn_in`` rounds provably leaves samples
    from the stationary law (up to that factor)."""
    return float(np.max(np.abs(np.linalg.eigvals(M))) ** burn_in)


def window_law(
    laws: dict[int, tuple[np.ndarray, np.ndarray]], recursion: LinearRecursion, node: int
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of node ``node``'s sample pooled over the recorded rounds.

    A uniform mixture over rounds: mean ``m̄ = avg m_t``, covariance
    ``avg (C_t + (m_t − m̄)(m_t − m̄)ᵀ)`` — what a window of a non-stationary chain estimates.
    """
    per_round = [recursion.node_law(m, c, node) for _, (m, c) in sorted(laws.items())]
    mean = np.mean([m for m, _ in per_round], axis=0)
    spread = [c + np.outer(m - mean, m - mean) for m, c in per_round]
    return mean, np.mean(spread, axis=0)
