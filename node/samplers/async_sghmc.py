"""Async SGHMC: a parameter server running SGHMC on stale worker gradients ([001] §2, I).

The naive parallelisation [001] §2 calls approach I ("Async SGHMC" in its §4): a server
holds the chain (θ, p) and sends θ to K workers every ``sync_period`` s rounds; each worker
computes a gradient at its (possibly stale) copy θ̃ and sends it back; the server simulates
SGHMC ([001] eq. 4) with whatever gradients it has.

Data stays home, so worker i computes ``∇f_i(θ̃)`` on its own shard
(``f_i = −log p(D_i|θ) − (1/K) log p(θ)``; optionally a mini-batch of the shard, scaled by
n_i/b) and the server sums the latest one of *every* worker: ``g = Σ_i ∇f_i(θ̃_i)`` is the
full ∇U, evaluated at stale points — [001] §2 with O = K, where staleness is the only
error. (A worker not heard from yet contributes nothing; that only happens at the start or
when a worker is down.)

One round, two phases::

    phase 0   server → workers: θ, at rounds r ≡ 0 (mod s)
              worker i: θ̃_i ← latest θ;  g_i ← ∇f_i(θ̃_i)
    phase 1   worker i → server: g_i and the round θ̃_i was sent in
              server:   p ← p − ε Σ_i g̃_i − ε V M⁻¹ p + N(0, 2εV)
                        θ ← θ + ε M⁻¹ p

With fresh gradients (g̃ = ∇U(θ)) this is exactly :class:`~starling.node.samplers.centralised.SGHMC`
(p updated before θ, which relabels its momentum and leaves the θ-chain's law unchanged),
noise 2εV matched to friction V. In the simulator's lockstep model
(:mod:`starling.node.engine.rounds`: a message is used from the round after it was sent) θ sent
at round q reaches the workers at q + 1, their gradients reach the server at q + 2: the
gradient used at round r was taken at the θ sent 2 … s + 1 rounds earlier. The server
reports that age as ``gradient_staleness`` (and ``message_staleness``, the age of the
gradient messages themselves); workers report the age of their θ̃. [001] §2 finds the
extra noise harmless for small s and harmful as s grows;
``tests/node/samplers/test_async_sghmc.py`` measures the variance inflation against the
exact law of this recursion for s = 1 … 32, and the divergence once staleness outruns the
friction.

Bounded staleness in the runtime (``max_staleness``): the server takes gradient messages
at most one round old (what the lockstep model gives it), the workers θ at most s rounds
old, so no node runs more than a round or a period ahead of the others.

The server records θ; workers record nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from starling.node.messages import Message
from starling.node.samplers.base import Inbox, NodeContext, Program, broadcast
from starling.node.samplers.centralised import SGHMCParams
from starling.node.samplers.kernels import sghmc_momentum, sghmc_position
from starling.node.samplers.registry import AlgorithmInfo
from starling.node.samplers.staleness import new_tally, tally, tally_metrics

__all__ = [
    "ALGORITHMS",
    "AsyncSGHMCParams",
    "AsyncServer",
    "AsyncServerState",
    "AsyncWorker",
    "AsyncWorkerState",
]


@dataclass(frozen=True)
class AsyncSGHMCParams(SGHMCParams):
    """SGHMC's ε, friction V (noise N(0, 2εV), [001] eq. 4) and mass, plus the sync period."""

    batch_size: int = 0
    """Mini-batch size within a worker's shard; 0 uses the whole shard."""
    sync_period: int = 1
    """s: the server sends θ to the workers every s rounds ([001] §2)."""

    def validate(self) -> None:
        super().validate()
        if self.sync_period < 1:
            raise ValueError("sync_period: must be at least 1")


class AsyncServerState(NamedTuple):
    x: np.ndarray
    """θ, (chains, d)."""
    p: np.ndarray
    """Momentum, (chains, d)."""
    grads: np.ndarray
    """The latest gradient of each worker, (workers, chains, d); zeros until heard."""
    grad_round: np.ndarray
    """The round each gradient was sent in, (workers,); -1: never heard."""
    at_round: np.ndarray
    """The round the θ̃ each gradient was taken at was sent in, (workers,)."""
    staleness: np.ndarray
    """[Σ gradient staleness, Σ message staleness, rounds counted, max gradient staleness]."""


class AsyncWorkerState(NamedTuple):
    theta: np.ndarray
    """θ̃, the latest θ from the server, (chains, d)."""
    theta_round: np.ndarray
    """The round θ̃ was sent in (a scalar array); -1: no θ yet."""
    grad: np.ndarray
    """∇f_i(θ̃), (chains, d)."""
    staleness: np.ndarray
    """Tally of θ̃'s age (:mod:`starling.node.samplers.staleness`)."""


class AsyncServer(Program[AsyncServerState]):
    """The parameter server: SGHMC on the sum of the workers' latest gradients."""

    synchronous = False
    phases = 2

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        self.params: AsyncSGHMCParams = ctx.hyper
        shape = (ctx.chains, ctx.dim)
        x = rng.standard_normal(shape)
        p = np.sqrt(self.params.mass) * rng.standard_normal(shape)
        self._workers = ctx.spec.in_peers()
        k = len(self._workers)
        self.current = AsyncServerState(
            x, p, np.zeros((k, *shape)), np.full(k, -1.0), np.full(k, -1.0), np.zeros(4)
        )

    def message_shapes(self, kind: str) -> dict[str, tuple[int, ...]]:
        if kind != "grad":
            raise ValueError("expected 'grad'")
        return {"grad": (self.ctx.chains, self.ctx.dim), "at_round": (1,)}

    def screened_tensors(self, kind: str) -> dict[str, float]:
        """The gradient; ``at_round`` is a round number."""
        self.message_shapes(kind)
        return {"grad": 1.0}

    def expected_senders(self, round_index: int, phase: int) -> tuple[str, ...]:
        return self._workers if phase == 1 else ()

    def max_staleness(self, round_index: int, phase: int) -> int | None:
        """Workers send a gradient every round; the lockstep model uses last round's."""
        return 1 if phase == 1 else None

    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        if phase != 0 or round_index % self.params.sync_period != 0:
            return {}
        message = Message("theta", {"theta": self.current.x})
        return broadcast(message, self.ctx.spec.out_peers())

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        if phase != 1:
            return
        x, p, grads, grad_round, at_round, staleness = self.current
        grads, grad_round, at_round = grads.copy(), grad_round.copy(), at_round.copy()
        for sender, message in inbox.items():
            k = self._workers.index(sender)
            if message.round > grad_round[k]:
                grads[k] = message["grad"]
                grad_round[k] = float(message.round)
                at_round[k] = float(message["at_round"][0])
        heard = grad_round >= 0
        if heard.any():
            # On the network a worker may be ahead of the server: its message is then 0
            # rounds stale, not negative. θ̃ was sent by the server, so never ahead of it.
            age = round_index - at_round[heard]
            message_age = np.maximum(round_index - grad_round[heard], 0.0)
            staleness = staleness + np.array([age.mean(), message_age.mean(), 1.0, 0.0])
            staleness[3] = max(staleness[3], float(age.max()))
        eps, mass, friction = self.params.eps, self.params.mass, self.params.friction
        gradient = grads.sum(axis=0)  # workers never heard from hold zeros
        p = sghmc_momentum(p, gradient, eps, friction, mass, rng)  # [001] eq. 4
        x = sghmc_position(x, p, eps, mass)
        self.current = AsyncServerState(x, p, grads, grad_round, at_round, staleness)

    def sample(self) -> np.ndarray:
        return self.current.x

    def metrics(self) -> dict[str, float]:
        total, message_total, count, worst = (float(v) for v in self.current.staleness)
        if not count:
            return {}
        return {
            "gradient_staleness_mean": total / count,
            "gradient_staleness_max": worst,
            "message_staleness_mean": message_total / count,
        }


class AsyncWorker(Program[AsyncWorkerState]):
    """A worker: the gradient of its own potential at its latest copy of θ."""

    synchronous = False
    phases = 2

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        self.params: AsyncSGHMCParams = ctx.hyper
        shape = (ctx.chains, ctx.dim)
        self.current = AsyncWorkerState(
            np.zeros(shape), np.array(-1.0), np.zeros(shape), new_tally()
        )

    def message_shapes(self, kind: str) -> dict[str, tuple[int, ...]]:
        if kind != "theta":
            raise ValueError("expected 'theta'")
        return {"theta": (self.ctx.chains, self.ctx.dim)}

    def expected_senders(self, round_index: int, phase: int) -> tuple[str, ...]:
        return self.ctx.spec.in_peers() if phase == 0 else ()

    def max_staleness(self, round_index: int, phase: int) -> int | None:
        """θ is sent every s rounds and used from the next one: at most s rounds old."""
        return self.params.sync_period if phase == 0 else None

    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        theta_round = float(self.current.theta_round)
        if phase != 1 or theta_round < 0:
            return {}
        message = Message("grad", {"grad": self.current.grad, "at_round": np.array([theta_round])})
        return broadcast(message, self.ctx.spec.out_peers())

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        if phase != 0:
            return
        theta, theta_round, grad, staleness = self.current
        for message in inbox.values():
            if message.round > theta_round:
                theta = np.array(message["theta"], copy=True)
                theta_round = np.array(float(message.round))
        if theta_round < 0:
            self.current = AsyncWorkerState(theta, theta_round, grad, staleness)
            return
        age = max(round_index - float(theta_round), 0.0)  # the server may be ahead
        staleness = tally(staleness, np.array([age]))
        grad = self.ctx.local_potential.grad(theta, rng)
        self.current = AsyncWorkerState(theta, theta_round, grad, staleness)

    def metrics(self) -> dict[str, float]:
        return tally_metrics(self.current.staleness, "theta")


ALGORITHMS = (
    AlgorithmInfo(
        name="async-sghmc",
        summary="Parameter-server SGHMC on stale worker gradients (naive parallelisation)",
        source="[001] §2 (approach I), eq. 4",
        graph="star",
        params=AsyncSGHMCParams,
        programs={"server": AsyncServer, "worker": AsyncWorker},
        data_roles=("worker",),
        synchronous=False,
        hub_role="server",
        batching=True,
    ),
)
