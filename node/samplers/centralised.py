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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

import numpy as np

from starling.node.messages import Message
from starling.node.params import ConfigError
from starling.node.samplers.base import Inbox, NodeContext, Program, ProgramState
from starling.node.samplers.kernels import langevin_step, mala_step, sghmc_momentum, sghmc_position
from starling.node.samplers.registry import AlgorithmInfo
from starling.node.samplers.schedules import PolynomialDecay

__all__ = [
    "ALGORITHMS",
    "MALA",
    "MALAParams",
    "MALAState",
    "SGHMC",
    "SGHMCParams",
    "SGHMCState",
    "SGLDParams",
    "ULA",
    "ULAParams",
    "ULAState",
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
    """Offset of the decaying schedule (see :mod:`starling.node.samplers.dula`)."""

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


class ULAState(NamedTuple):
    x: np.ndarray
    """The chains, (chains, d)."""


class SGHMCState(NamedTuple):
    x: np.ndarray
    """Positions θ, (chains, d)."""
    p: np.ndarray
    """Momenta, (chains, d)."""


class MALAState(NamedTuple):
    x: np.ndarray
    """The chains, (chains, d)."""
    accepted: np.ndarray
    """Accepted proposals per chain, (chains,)."""
    proposed: np.ndarray
    """Proposals made so far, a scalar array."""


class _Chains(ProgramState, Protocol):
    @property
    def x(self) -> np.ndarray: ...


C = TypeVar("C", bound=_Chains)


class _SingleNode(Program[C]):
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

    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        return {}

    def expected_senders(self, round_index: int, phase: int) -> tuple[str, ...]:
        return ()

    def sample(self) -> np.ndarray:
        return self.current.x


class ULA(_SingleNode[ULAState]):
    """``x ← x − h_t ∇F(x) + √(2 h_t) w`` ([004] eq. 13); SGLD when the gradient is a
    mini-batch estimate (``batch_size`` in the parameters; ULA always uses all the data)."""

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        self.current = ULAState(rng.standard_normal((ctx.chains, ctx.dim)))
        hyper = ctx.hyper
        self._step = PolynomialDecay(hyper.eta, hyper.k0 + 1.0, hyper.decay)

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        x = self.current.x
        gradient = self.ctx.local_potential.grad(x, rng)
        self.current = ULAState(langevin_step(x, gradient, self._step(round_index), rng))


class SGHMC(_SingleNode[SGHMCState]):
    """SGHMC ([001] eq. 4) in the order of Chen et al. 2014, Algorithm 2:

        θ ← θ + ε M⁻¹ p
        p ← p − ε ∇Ũ(θ) − ε V M⁻¹ p + N(0, 2εV)

    The gradient is taken at the freshly moved θ (symplectic Euler; [001] eq. 4 prints
    ∇Ũ(θ_t), which has the same continuous limit but a larger bias). The injected noise has
    variance 2εV — the Euler discretisation of dp = −∇U dt − V M⁻¹ p dt + √(2V) dB, whose
    invariant law is π(θ) N(p; 0, M); the gradient-noise estimate B̂ of Chen et al. is
    taken as 0, as [001] does. Momentum starts at p ~ N(0, M).
    """

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        self.params: SGHMCParams = ctx.hyper
        shape = (ctx.chains, ctx.dim)
        x = rng.standard_normal(shape)
        self.current = SGHMCState(x, np.sqrt(self.params.mass) * rng.standard_normal(shape))

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        eps, friction, mass = self.params.eps, self.params.friction, self.params.mass
        x = sghmc_position(self.current.x, self.current.p, eps, mass)
        gradient = self.ctx.local_potential.grad(x, rng)
        self.current = SGHMCState(
            x, sghmc_momentum(self.current.p, gradient, eps, friction, mass, rng)
        )


class MALA(_SingleNode[MALAState]):
    """Metropolis-adjusted Langevin (Roberts & Tweedie 1996), every chain on its own
    (:func:`~starling.node.samplers.kernels.mala_step`). The counts of accepted moves per chain and
    of proposals are part of the state, so the acceptance rate survives a restart.
    """

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        x = rng.standard_normal((ctx.chains, ctx.dim))
        self.current = MALAState(x, np.zeros(ctx.chains), np.zeros(()))

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        potential = self.ctx.local_potential
        x, accepted, proposed = self.current
        x, accept = mala_step(x, self.ctx.hyper.step, potential.value, potential.grad, rng)
        self.current = MALAState(x, accepted + accept, proposed + 1.0)

    def acceptance_rate(self) -> np.ndarray:
        """Fraction of accepted proposals so far, per chain."""
        return self.current.accepted / max(float(self.current.proposed), 1.0)

    def metrics(self) -> dict[str, float]:
        return {"acceptance_rate": float(np.mean(self.acceptance_rate()))}


def _info(
    name: str, summary: str, source: str, params: type, program: type, batching: bool
) -> AlgorithmInfo:
    return AlgorithmInfo(
        name=name,
        summary=summary,
        source=source,
        graph="none",
        params=params,
        programs={"peer": program},
        batching=batching,
        graph_check=_single_node,
    )


def _single_node(params: Sequence[Any], laplacian: np.ndarray) -> str | None:
    """The orchestrator's early form of ``_SingleNode``'s refusal, before any node starts."""
    if laplacian.shape[0] == 1:
        return None
    return (
        f"a centralised reference; run it on a single node holding all the data "
        f"(topology kind none, nodes: 1), not on {laplacian.shape[0]} nodes"
    )


ALGORITHMS = (
    _info(
        "ula",
        "Centralised unadjusted Langevin on the pooled data",
        "[004] eq. 13",
        ULAParams,
        ULA,
        False,
    ),
    _info(
        "sgld",
        "Centralised SGLD (mini-batch Langevin) on the pooled data",
        "Welling & Teh 2011; [000] §2",
        SGLDParams,
        ULA,
        True,
    ),
    _info(
        "sghmc",
        "Centralised SGHMC, one chain per run, on the pooled data",
        "[001] eq. 4; Chen et al. 2014 Alg. 2",
        SGHMCParams,
        SGHMC,
        True,
    ),
    _info(
        "mala",
        "Metropolis-adjusted Langevin on the pooled data: exact reference",
        "Roberts & Tweedie 1996",
        MALAParams,
        MALA,
        False,
    ),
)
