"""Elastically coupled SGHMC, EC-SGHMC ([001] eq. 5-6, Springenberg et al. 2016).

K workers each run an SGHMC chain ``(θ^i, p^i)``; a centre node holds a centre variable
``(c, r)`` to which every worker is tied by a spring of stiffness α. One round is one step
of every node, in this order (symplectic Euler, the order of :class:`~starling.node.samplers.
centralised.SGHMC`: the forces act at the freshly moved position)::

    worker i:  θ^i ← θ^i + ε M⁻¹ p^i
               p^i ← p^i − ε ∇Ũ(θ^i) − ε V M⁻¹ p^i − ε α (θ^i − c̃) + N(0, σ_p²)
    centre:    c   ← c + ε M⁻¹ r
               r   ← r − ε C M⁻¹ r − ε α (1/K) Σ_i (c − θ̃^i) + N(0, σ_r²)

``c̃`` is the worker's latest copy of c and ``θ̃^i`` the centre's latest copy of θ^i: the
nodes run asynchronously (``synchronous = False``, semantics in
:mod:`starling.node.engine.rounds`) and exchange every ``sync_period`` s rounds — a worker
sends θ^i and the centre sends c at rounds r ≡ 0 (mod s). Before a worker has heard from
the centre it feels no spring; the centre averages over the workers it has heard from.
Both keep their copies (and the round they were sent in) in the checkpointed state.

**Noise** (``noise``). [001] eq. 4 injects ``N(0, 2εV)`` with friction εV — the Euler step
of ``dp = −∇U dt − V M⁻¹p dt + √(2V) dB``, whose invariant law has θ-marginal exp(−U).
Eq. 6 prints ``2ε²(V + C)`` for the workers and ``2ε²C`` for the centre; ALGORITHMS.md
transcribes ``2ε(V + C)``. Only the fluctuation–dissipation pair (noise 2εV with friction
V, 2εC with friction C) makes a worker with α = 0 sample its target:

* ``euler`` (default): ``σ_p² = 2εV``, ``σ_r² = 2εC``;
* ``eq6``:             ``σ_p² = 2ε²(V + C)``, ``σ_r² = 2ε²C`` — as printed, ε times too
  cold (variance ≈ ε(V + C)/V of the target's);
* ``v_plus_c``:        ``σ_p² = 2ε(V + C)``, ``σ_r² = 2εC`` — (V + C)/V times too hot.

``tests/node/samplers/test_ec_sghmc.py`` measures all three against the exact law.

**Gradient from a private shard.** Worker i holds only its shard D_i and its local
potential ``f_i = −log p(D_i|θ) − (1/K) log p(θ)``. It estimates ∇U by ``K ∇f_i(θ)
= K ∇(−log p(D_i|θ)) − ∇log p(θ)``, i.e. [001] §1.1.1's Ũ with the shard as the
mini-batch (N/|B| = K for equal shards), optionally on a mini-batch of the shard
(``batch_size``, scaled by n_i/b inside ``f_i``). Unlike a random mini-batch this
estimate's error is *fixed*, not fresh noise: with α = 0 worker i samples exp(−K f_i),
whose mean is its own shard's, not the posterior's. Only when the shards are alike
(exchangeable and large, or identical) is exp(−K f_i) the posterior. The coupling pulls the
workers' means together — and, for K > 1, their spread too (below).

**What is recorded.** Workers record θ^i (the chains the paper plots); the centre records
nothing: c is an auxiliary variable (the y of [001] §1, discarded), its law is not the
posterior (about θ̄ ± α^(−1/2)), and recording it would put it in the per-node W2 table
and the network average.

**Bias of the coupling, measured not assumed.** [001] Prop. 3.1 claims every θ^i has the
posterior as its marginal. It does not hold for K > 1: integrating c out of
exp(−(α/2K) Σ_i ‖θ^i − c‖²) leaves exp(−(α/2K) Σ_i ‖θ^i − θ̄‖²), which pulls the chains
together; and eq. 6's force on θ^i is α(θ^i − c) while that on c is (α/K) Σ (c − θ^i), which
is not the gradient of one potential (the Hamiltonian of eq. 5 would give α/K on θ^i). On a
Gaussian target the tests compute the exact law of this recursion, stale copies and
messages in flight included, and report each worker's covariance against the posterior's.

``metrics()``: a worker reports the mean and maximum staleness of the c̃ it used
(rounds since the centre sent it); the centre the same for its θ̃^i. In the simulator's
lockstep model both are 1 … s (mean (s + 1)/2 once running); on the network each node
declares ``max_staleness = s``, so neither the centre (which has no data and would run
fastest) nor a worker gets more than one period ahead of the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol, TypeVar

import numpy as np

from starling.node.messages import Message
from starling.node.samplers.base import Inbox, NodeContext, Program, ProgramState, broadcast
from starling.node.samplers.centralised import check_friction
from starling.node.samplers.kernels import sghmc_momentum, sghmc_position
from starling.node.samplers.registry import AlgorithmInfo
from starling.node.samplers.staleness import new_tally, tally

__all__ = [
    "ALGORITHMS",
    "ECCentre",
    "ECCentreState",
    "ECSGHMCParams",
    "ECWorker",
    "ECWorkerState",
    "NOISES",
]

NOISES = ("euler", "eq6", "v_plus_c")


@dataclass(frozen=True)
class ECSGHMCParams:
    eps: float = 0.01
    """Step ε ([001] §4: 1e-2)."""
    alpha: float = 1.0
    """Coupling strength α ≥ 0 ([001] §4: 1); 0 gives K independent SGHMC chains."""
    friction: float = 1.0
    """Workers' friction V, a scalar times I ([001] §4: V = I)."""
    centre_noise: float = 1.0
    """C, the centre's friction and noise scale, a scalar times I ([001] §4: C = I)."""
    mass: float = 1.0
    """Mass M of workers and centre, a scalar times I ([001]: default I)."""
    sync_period: int = 1
    """s: workers and centre exchange θ^i and c every s rounds."""
    batch_size: int = 0
    """Mini-batch size within the worker's shard; 0 uses the whole shard."""
    noise: str = "euler"
    """Injected noise: ``euler`` (2εV / 2εC), ``eq6`` (2ε²(V+C) / 2ε²C, as printed in
    [001] eq. 6) or ``v_plus_c`` (2ε(V+C) / 2εC); see the module docstring."""

    def validate(self) -> None:
        if not self.eps > 0:
            raise ValueError("eps: must be positive")
        if not self.alpha >= 0:
            raise ValueError("alpha: must be non-negative")
        if not self.mass > 0:
            raise ValueError("mass: must be positive")
        check_friction("friction", self.friction, self.eps, self.mass)
        check_friction("centre_noise", self.centre_noise, self.eps, self.mass)
        if self.sync_period < 1:
            raise ValueError("sync_period: must be at least 1")
        if self.batch_size < 0:
            raise ValueError("batch_size: must be zero (full batch) or positive")
        if self.noise not in NOISES:
            raise ValueError(f"noise: must be one of {', '.join(NOISES)}, got {self.noise!r}")

    def worker_noise_var(self) -> float:
        eps, v, c = self.eps, self.friction, self.centre_noise
        return {"euler": 2 * eps * v, "eq6": 2 * eps**2 * (v + c), "v_plus_c": 2 * eps * (v + c)}[
            self.noise
        ]

    def centre_noise_var(self) -> float:
        eps, c = self.eps, self.centre_noise
        return 2 * eps**2 * c if self.noise == "eq6" else 2 * eps * c

    def sends_at(self, round_index: int) -> bool:
        return round_index % self.sync_period == 0


class ECWorkerState(NamedTuple):
    x: np.ndarray
    """θ^i, (chains, d)."""
    p: np.ndarray
    """p^i, (chains, d)."""
    c_tilde: np.ndarray
    """c̃, the latest copy of the centre, (chains, d)."""
    c_round: np.ndarray
    """The round c̃ was sent in (a scalar array); -1: nothing heard from the centre yet."""
    staleness: np.ndarray
    """Tally of c̃'s age (:mod:`starling.node.samplers.staleness`)."""


class ECCentreState(NamedTuple):
    c: np.ndarray
    """The centre variable, (chains, d)."""
    r: np.ndarray
    """Its momentum, (chains, d)."""
    theta_tilde: np.ndarray
    """θ̃^i, the latest copy of each worker, (workers, chains, d)."""
    theta_round: np.ndarray
    """The round each θ̃^i was sent in, (workers,); -1: not heard from yet."""
    staleness: np.ndarray
    """Tally of the θ̃^i's age (:mod:`starling.node.samplers.staleness`)."""


class _Tallied(ProgramState, Protocol):
    @property
    def staleness(self) -> np.ndarray: ...


E = TypeVar("E", bound=_Tallied)


class _Elastic(Program[E]):
    """What workers and centre share: asynchrony, staleness bookkeeping, exchange rounds."""

    synchronous = False
    _kind = ""  # the message kind this role sends
    _hears = ""  # the message kind this role receives

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        self.params: ECSGHMCParams = ctx.hyper

    def message_shapes(self, kind: str) -> dict[str, tuple[int, ...]]:
        if kind != self._hears:
            raise ValueError(f"expected {self._hears!r}")
        return {self._hears: (self.ctx.chains, self.ctx.dim)}

    def max_staleness(self, round_index: int, phase: int) -> int | None:
        """Bounded staleness for the runtime: the sync period. In the simulator's lockstep
        model the copy used at round r was sent at the last exchange round ≤ r − 1, at most
        s rounds ago; the runtime waits for that (or a fresher) one."""
        return self.params.sync_period

    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        if not self.params.sends_at(round_index):
            return {}
        message = Message(self._kind, {self._kind: self._position()})
        return broadcast(message, self.ctx.neighbourhood(round_index).out_peers)

    def _position(self) -> np.ndarray:
        """What this role sends: θ^i for a worker, c for the centre."""
        raise NotImplementedError

    def _staleness_metrics(self, name: str) -> dict[str, float]:
        total, count, worst = (float(v) for v in self.current.staleness)
        return {
            f"{name}_staleness_mean": total / count if count else float("nan"),
            f"{name}_staleness_max": worst,
        }


def _ages(round_index: int, sent_rounds: np.ndarray) -> np.ndarray:
    # On the network a peer may be ahead: a copy sent in a later round is 0 rounds stale.
    ages: np.ndarray = np.maximum(round_index - sent_rounds[sent_rounds >= 0], 0.0)
    return ages


class ECWorker(_Elastic[ECWorkerState]):
    """Worker i of [001] eq. 6: an SGHMC chain on K ∇f_i tied to its copy c̃ of the centre."""

    _kind, _hears = "theta", "c"

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        shape = (ctx.chains, ctx.dim)
        x = rng.standard_normal(shape)
        p = np.sqrt(self.params.mass) * rng.standard_normal(shape)  # p ~ N(0, M)
        self.current = ECWorkerState(x, p, np.zeros(shape), np.array(-1.0), new_tally())
        self._scale = float(max(ctx.spec.num_nodes, 1))  # K: the shard stands for N/K of D

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        params = self.params
        x, p, c_tilde, c_round, staleness = self.current
        for message in inbox.values():  # the centre, the only in-peer
            if message.round > c_round:
                c_tilde = np.array(message["c"], copy=True)
                c_round = np.array(float(message.round))
        x = sghmc_position(x, p, params.eps, params.mass)
        force = self._scale * self.ctx.local_potential.grad(x, rng)
        if c_round >= 0:
            force = force + params.alpha * (x - c_tilde)  # the spring of [001] eq. 6
            staleness = tally(staleness, _ages(round_index, np.array([float(c_round)])))
        p = sghmc_momentum(
            p, force, params.eps, params.friction, params.mass, rng, params.worker_noise_var()
        )
        self.current = ECWorkerState(x, p, c_tilde, c_round, staleness)

    def _position(self) -> np.ndarray:
        return self.current.x

    def sample(self) -> np.ndarray:
        return self.current.x

    def metrics(self) -> dict[str, float]:
        return self._staleness_metrics("centre")


class ECCentre(_Elastic[ECCentreState]):
    """The centre of [001] eq. 6: c with momentum r, pulled to the mean of its copies θ̃^i."""

    _kind, _hears = "c", "theta"

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        shape = (ctx.chains, ctx.dim)
        c = rng.standard_normal(shape)
        r = np.sqrt(self.params.mass) * rng.standard_normal(shape)
        self._workers = ctx.spec.in_peers()
        k = len(self._workers)
        self.current = ECCentreState(c, r, np.zeros((k, *shape)), np.full(k, -1.0), new_tally())

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        params = self.params
        c, r, theta_tilde, theta_round, staleness = self.current
        theta_tilde, theta_round = theta_tilde.copy(), theta_round.copy()
        for sender, message in inbox.items():
            k = self._workers.index(sender)
            if message.round > theta_round[k]:
                theta_tilde[k] = message["theta"]
                theta_round[k] = float(message.round)
        c = sghmc_position(c, r, params.eps, params.mass)
        heard = theta_round >= 0
        force = np.zeros_like(c)
        if heard.any():
            # (1/K) Σ_i (c − θ̃^i) over the workers heard from.
            force = params.alpha * (c - theta_tilde[heard].mean(axis=0))
            staleness = tally(staleness, _ages(round_index, theta_round))
        r = sghmc_momentum(
            r, force, params.eps, params.centre_noise, params.mass, rng, params.centre_noise_var()
        )
        self.current = ECCentreState(c, r, theta_tilde, theta_round, staleness)

    def _position(self) -> np.ndarray:
        return self.current.c

    def metrics(self) -> dict[str, float]:
        return self._staleness_metrics("worker")


ALGORITHMS = (
    AlgorithmInfo(
        name="ec-sghmc",
        summary="Elastically coupled SGHMC: asynchronous workers tied to a centre variable",
        source="[001] eq. 5-6",
        graph="star",
        params=ECSGHMCParams,
        programs={"centre": ECCentre, "worker": ECWorker},
        data_roles=("worker",),
        synchronous=False,
        hub_role="centre",
        batching=True,
    ),
)
