"""Centralised references: one node, no peers, holding all the data.

They run inside the same framework as the decentralised samplers — one node on topology
``none`` whose shard is the pooled data set (``data.size`` is per node, so it is the whole
data set here) and whose prior share is 1 — so ground truth and baselines go through the
same specs, simulator and runtime.

* ``ula``   — unadjusted Langevin, ``x ← x − h_t ∇F(x) + √(2h_t) w`` ([004] eq. 5 / 13).
* ``sgld``  — the same with a mini-batch gradient (Welling & Teh 2011).
* ``sghmc`` — stochastic-gradient HMC with friction V and mass M ([001] eq. 4;
  Chen, Fox & Guestrin 2014, Algorithm 2).
* ``mala``  — Metropolis-adjusted Langevin: the ULA move as a proposal, then accept/reject;
  its invariant law is the posterior exactly (Roberts & Tweedie 1996).

Step schedule for ULA and SGLD: ``h_t = eta / (k0 + t + 1)^decay`` (``decay = 0``: constant),
the form [004] uses for its centralised ULA baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from node.messages import Message
from node.params import ConfigError
from node.samplers.base import Inbox, NodeContext, NodeProgram
from node.samplers.registry import AlgorithmInfo
from node.samplers.schedules import PolynomialDecay

__all__ = [
    "ALGORITHMS",
    "MALA",
    "MALAParams",
    "SGHMC",
    "SGHMCParams",
    "SGLDParams",
    "ULA",
    "ULAParams",
]


def _check_step_schedule(eta: float, decay: float, k0: int) -> None:
    if not eta > 0:
        raise ValueError("eta: must be positive")
    if not decay >= 0:
        raise ValueError("decay: must be non-negative")
    if k0 < 0:
        raise ValueError("k0: must be non-negative")


@dataclass(frozen=True)
class ULAParams:
    eta: float = 1e-3
    """Step scale h_0."""
    decay: float = 0.0
    """Exponent of the step decay; 0 keeps the step constant (and a bias of order eta)."""
    k0: int = 0
    """Offset of the decaying schedule (see :mod:`node.samplers.dula`)."""

    def validate(self) -> None:
        _check_step_schedule(self.eta, self.decay, self.k0)


@dataclass(frozen=True)
class SGLDParams:
    eta: float = 1e-3
    """Step scale h_0."""
    decay: float = 0.0
    """Exponent of the step decay; 0 keeps the step constant."""
    k0: int = 0
    """Offset of the decaying schedule."""
    batch_size: int = 10
    """Mini-batch size; the gradient is ``(n/b) Σ_batch`` plus the prior's ([000] §2)."""

    def validate(self) -> None:
        _check_step_schedule(self.eta, self.decay, self.k0)
        if self.batch_size < 0:
            raise ValueError("batch_size: must be zero (full batch) or positive")


def check_friction(name: str, friction: float, eps: float, mass: float) -> None:
    """A friction must be positive, and the momentum's own recursion
    ``p ← (1 − ε friction / M) p + …`` diverges once ``ε friction / M ≥ 2``."""
    if not friction > 0:
        raise ValueError(f"{name}: must be positive")
    if eps * friction / mass >= 2:
        raise ValueError(
            f"{name}: eps * {name} / mass must stay below 2 for the momentum recursion to be "
            f"stable (got {eps * friction / mass:g})"
        )


@dataclass(frozen=True)
class SGHMCParams:
    eps: float = 0.01
    """Step ε ([001] §4: 1e-2)."""
    friction: float = 1.0
    """Friction V, a scalar times I ([001] §4: V = I)."""
    mass: float = 1.0
    """Mass M, a scalar times I."""
    batch_size: int = 10
    """Mini-batch size; 0 means the full gradient."""

    def validate(self) -> None:
        if not self.eps > 0:
            raise ValueError("eps: must be positive")
        if not self.mass > 0:
            raise ValueError("mass: must be positive")
        check_friction("friction", self.friction, self.eps, self.mass)
        if self.batch_size < 0:
            raise ValueError("batch_size: must be zero (full batch) or positive")


@dataclass(frozen=True)
class MALAParams:
    step: float = 0.01
    """Proposal step h: ``y = x − h ∇F(x) + √(2h) w``."""

    def validate(self) -> None:
        if not self.step > 0:
            raise ValueError("step: must be positive")


class _SingleNode(NodeProgram):
    """A program that talks to nobody and insists on holding all the data."""

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        spec = ctx.spec
        hood = ctx.neighbourhood(0)
        if spec.num_nodes != 1 or hood.in_peers or hood.out_peers:
            raise ConfigError(
                f"algorithm: {spec.algorithm} is a centralised reference; run it on a single "
                f"node holding all the data (topology kind none, nodes: 1), not on "
                f"{spec.num_nodes} nodes"
            )
        self.x = rng.standard_normal((ctx.chains, ctx.dim))

    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        return {}

    def expected_senders(self, round_index: int, phase: int) -> tuple[str, ...]:
        return ()

    def sample(self) -> np.ndarray:
        return self.x


class ULA(_SingleNode):
    """``x ← x − h_t ∇F(x) + √(2 h_t) w`` ([004] eq. 13); SGLD when the gradient is a
    mini-batch estimate (``batch_size`` in the parameters; ULA always uses all the data)."""

    state_fields = ("x",)

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        hyper = ctx.hyper
        self._step = PolynomialDecay(hyper.eta, hyper.k0 + 1.0, hyper.decay)

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        h = self._step(round_index)
        gradient = self.ctx.potential.grad(self.x, rng)
        noise = rng.standard_normal(self.x.shape)
        self.x = self.x - h * gradient + np.sqrt(2.0 * h) * noise


class SGHMC(_SingleNode):
    """SGHMC ([001] eq. 4) in the order of Chen et al. 2014, Algorithm 2:

        θ ← θ + ε M⁻¹ p
        p ← p − ε ∇Ũ(θ) − ε V M⁻¹ p + N(0, 2εV)

    The gradient is taken at the freshly moved θ (symplectic Euler; [001] eq. 4 prints
    ∇Ũ(θ_t), which has the same continuous limit but a larger bias). The injected noise has
    variance 2εV — the Euler discretisation of dp = −∇U dt − V M⁻¹ p dt + √(2V) dB, whose
    invariant law is π(θ) N(p; 0, M); the gradient-noise estimate B̂ of Chen et al. is
    taken as 0, as [001] does. Momentum starts at p ~ N(0, M).
    """

    state_fields = ("x", "p")

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        self.p = np.sqrt(ctx.hyper.mass) * rng.standard_normal((ctx.chains, ctx.dim))

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        eps, friction, mass = self.ctx.hyper.eps, self.ctx.hyper.friction, self.ctx.hyper.mass
        self.x = self.x + (eps / mass) * self.p
        gradient = self.ctx.potential.grad(self.x, rng)
        noise = rng.standard_normal(self.p.shape)
        self.p = (
            self.p
            - eps * gradient
            - (eps * friction / mass) * self.p
            + np.sqrt(2.0 * eps * friction) * noise
        )


class MALA(_SingleNode):
    """Metropolis-adjusted Langevin (Roberts & Tweedie 1996), every chain on its own.

    Proposal ``y = x − h ∇F(x) + √(2h) w``; accept with probability
    ``min(1, exp(F(x) − F(y) + log q(x|y) − log q(y|x)))``,
    ``log q(y|x) = −‖y − x + h ∇F(x)‖² / (4h)``. The counts of accepted moves per chain and
    of proposals are part of the state, so the acceptance rate survives a restart.
    """

    state_fields = ("x", "accepted", "proposed")

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        self.accepted = np.zeros(ctx.chains)
        self.proposed = np.zeros(())

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        h = self.ctx.hyper.step
        potential = self.ctx.potential
        x = self.x
        grad_x = potential.grad(x)
        y = x - h * grad_x + np.sqrt(2.0 * h) * rng.standard_normal(x.shape)
        grad_y = potential.grad(y)
        forward = np.sum((y - x + h * grad_x) ** 2, axis=1) / (4.0 * h)
        backward = np.sum((x - y + h * grad_y) ** 2, axis=1) / (4.0 * h)
        log_ratio = potential.value(x) - potential.value(y) - backward + forward
        # log u ≤ 0, so a ratio ≥ 0 always accepts; NaN (overflow) always rejects.
        accept = np.log(rng.random(x.shape[0])) < log_ratio
        self.x = np.where(accept[:, None], y, x)
        self.accepted = self.accepted + accept
        self.proposed = self.proposed + 1.0

    def acceptance_rate(self) -> np.ndarray:
        """Fraction of accepted proposals so far, per chain."""
        return self.accepted / max(float(self.proposed), 1.0)

    def metrics(self) -> dict[str, float]:
        return {"acceptance_rate": float(np.mean(self.acceptance_rate()))}


def _info(name: str, summary: str, source: str, params: type, program: type) -> AlgorithmInfo:
    return AlgorithmInfo(
        name=name,
        summary=summary,
        source=source,
        graph="none",
        params=params,
        programs={"peer": program},
    )


ALGORITHMS = (
    _info(
        "ula", "Centralised unadjusted Langevin on the pooled data", "[004] eq. 13", ULAParams, ULA
    ),
    _info(
        "sgld",
        "Centralised SGLD (mini-batch Langevin) on the pooled data",
        "Welling & Teh 2011; [000] §2",
        SGLDParams,
        ULA,
    ),
    _info(
        "sghmc",
        "Centralised SGHMC, one chain per run, on the pooled data",
        "[001] eq. 4; Chen et al. 2014 Alg. 2",
        SGHMCParams,
        SGHMC,
    ),
    _info(
        "mala",
        "Metropolis-adjusted Langevin on the pooled data: exact reference",
        "Roberts & Tweedie 1996",
        MALAParams,
        MALA,
    ),
)
