"""DG-LMC, Distributed Gibbs using Langevin Monte Carlo ([003] Algorithm 1): master/workers.

The target is the augmented law of [003] eq. 2,
``Π_ρ(θ, z_1:b) ∝ Π_i exp(−U_i(z_i) − ‖z_i − A_i θ‖² / (2ρ_i))``, sampled by Gibbs:

* worker i holds ``z_i`` and its private data, and approximates the draw from
  ``Π_ρ(z_i | θ)`` (eq. 4) by ``N_i`` steps of LMC started at its current ``z_i``::

      u ← (1 − γ_i/ρ_i) u + (γ_i/ρ_i) A_i θ − γ_i ∇U_i(u) + √(2γ_i) w ,   w ~ N(0, I)

* the master holds ``θ`` and draws it exactly from eq. 5,
  ``θ ~ N(μ, Q⁻¹)``, ``Q = Σ_i A_iᵀA_i/ρ_i``, ``μ = Q⁻¹ Σ_i A_iᵀ z_i/ρ_i``.

The samples are the master's θ. ``U_i`` is the worker's local potential
``f_i = −log p(D_i|x) − (1/b) log p(x)``, so Σ_i U_i is the exact negative log posterior, and
``A_i = I``: every model here is defined on the parameter space itself (another ``A_i`` would
need a potential on another space), so ``Q = (Σ_i 1/ρ_i) I`` and μ is the 1/ρ_i-weighted
average of the z_i.

**One round, two phases.** Phase 0: each worker sends ``z_i`` to the master, which draws θ
(eq. 5); phase 1: the master sends θ to each worker, which runs its ``N_i`` LMC steps. The
master's sample of round t is the θ drawn in round t. Algorithm 1's loop is the same
sequence read from another starting point; this order makes round 0 draw
``θ⁽⁰⁾ ~ Π_ρ(· | z⁽⁰⁾)`` from the workers' initial ``z⁽⁰⁾``, which is the initial law
``μ*_ρ = δ_z* ⊗ Π_ρ(·|z*)`` of [003] eq. 7.

**Initialisation** (Algorithm 1 leaves it open; eq. 7 is the one the analysis uses).
eq. 7 puts every ``z_i⁽⁰⁾`` at ``A_i θ*``, θ* the posterior mode, which no single node can
compute without a round of optimisation over the network. ``init: mode`` (default) uses
what each worker can compute alone: the mode of its own ``U_i`` (the model's prox with an
unbounded step, as D-ADMMS's no-edge case does), the same point for every chain; the chains
separate at the master's first draw. ``init: normal`` draws ``z_i⁽⁰⁾ ~ N(0, I)`` per chain.

**Hyperparameters** ([003] §3.2), per worker (per-node overrides in the experiment file):
``ρ_i`` defaults to ``1/(5 M_i)`` — the value of §5.1, within §3.2.1's "of the order of
1/M_i" — with ``M_i`` the potential's curvature bound (``lipschitz()``); ``γ_i`` to
``0.25 ρ_i/(ρ_i M_i + 1)`` (§5.1, inside §3.2.1's [0.1, 0.5] range), and a given γ_i must
respect Algorithm 1's ``γ_i ≤ ρ_i/(ρ_i M_i + 1)``. ``N_i`` is the worker's ``local_steps``
if given, else §3.2.2's ``N_avg = ⌈(1/b) Σ_k ρ_k/(γ_k(ρ_k M_k + 1))⌉`` over the workers
without one (4 with the default γ); the straggler-aware rule of §3.2.2 (after
Ahn et al. 2014) applies when every worker gives its ``step_time`` τ_i:
``N_i = q_i N̄ b``, ``q_i = τ_i⁻¹ / Σ_k τ_k⁻¹``, N̄ the mean of the N_k the workers would use
otherwise, rounded half up to an integer ≥ 1 (the paper does not say how to round).
Both rules need every worker's figures, so each worker reports ``(ρ_i, its local_steps,
its §3.2.2 term, τ_i)`` with its z_i and the master sends each worker its N_i with θ
(:func:`plan_local_steps`); all of it is program state, so a networked run equals the
simulation bit for bit.

**Missing messages.** A round's deadline must not stall anyone. When ``z_i`` does not
arrive, the master reuses the last ``z_i`` it received (counted in ``stale_inputs``); a
worker never heard from yet is left out of eq. 5 for that round (``missing_inputs``): Q and
μ run over the workers heard so far. A report that cannot be right (ρ_i ≤ 0 ...) counts as
not received (``rejected_inputs``): that includes a report no worker's own settings could
give (a §3.2.2 term or ``local_steps`` beyond what a worker accepts, a step time below
:data:`MIN_STEP_TIME`), which would hand every worker a plan of more steps than any round
can end in. A worker likewise refuses a θ whose plan exceeds what the master can plan
(``rejected_inputs``, then as if θ did not arrive). When θ does not arrive, the worker runs
its LMC steps against the last θ it received (``stale_inputs``); if it never received one it
keeps ``z_i`` as is (``missing_inputs``), since eq. 4 has no θ to condition on. The counts
are the program's :meth:`metrics`, kept since the process (re)started — not sampler state.

**N and the invariant law.** [003] remarks after Prop. 2 that with equal ``N_i = N`` the
invariant law does not depend on N. As γ → 0 every N gives Π_ρ, but at a fixed γ the exact
stationary law of the Gaussian recursion does move slightly with N:
in the §5.1 setting (examples/dglmc-conjugate-gaussian.yaml) θ's covariance is 1.216 × the
posterior's (trace) at N = 1 and 1.173 × at N = 10, W2 0.00106 and 0.00087. The sampler is
checked against those exact laws in tests/node/samplers/test_dglmc.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from starling.node.messages import Message
from starling.node.models.base import LocalPotential
from starling.node.params import ConfigError
from starling.node.samplers.base import Inbox, NodeContext, Program
from starling.node.samplers.kernels import langevin_step
from starling.node.samplers.registry import AlgorithmInfo

__all__ = [
    "ALGORITHMS",
    "DGLMCParams",
    "Master",
    "MasterState",
    "Worker",
    "WorkerState",
    "draw_theta",
    "lmc_steps",
    "plan_local_steps",
    "worker_constants",
]

INITS = ("mode", "normal")

_MODE_STEP = 1e12
"""A prox step this long makes ``prox_{U_i}`` the minimiser of U_i (see D-ADMMS)."""


@dataclass(frozen=True)
class DGLMCParams:
    rho: float = 0.0
    """Tolerance ρ_i > 0 of the augmented target ([003] eq. 2): the smaller, the closer
    π_ρ is to the posterior (Prop. 3) and the slower the mixing. 0: 1/(5 M_i) (§5.1)."""
    gamma: float = 0.0
    """LMC step γ_i, at most ρ_i/(ρ_i M_i + 1) ([003] Algorithm 1).
    0: 0.25 ρ_i/(ρ_i M_i + 1) (§3.2.1, §5.1)."""
    local_steps: int = 0
    """N_i, LMC steps per round on this worker. 0: §3.2.2's
    N_avg = ⌈(1/b) Σ_k ρ_k/(γ_k(ρ_k M_k + 1))⌉ over the workers that leave it at 0."""
    step_time: float = 0.0
    """τ_i, seconds one LMC step takes on this worker (measured on the device). When every
    worker gives one, N_i = q_i N̄ b with q_i ∝ 1/τ_i ([003] §3.2.2). 0: not given."""
    init: str = "mode"
    """``mode``: z_i(0) = argmin U_i, the local stand-in for [003] eq. 7's z*;
    ``normal``: z_i(0) ~ N(0, I) per chain."""

    def validate(self) -> None:
        for name in ("rho", "gamma", "step_time"):
            value = getattr(self, name)
            if not (0.0 <= value < math.inf):
                raise ValueError(f"{name}: must be a positive number (or 0 for the default)")
        if self.rho > 0 and self.gamma > self.rho:
            raise ValueError(
                f"gamma: {self.gamma:g} exceeds rho = {self.rho:g}; [003] Algorithm 1 needs "
                "gamma <= rho/(rho M + 1) < rho"
            )
        if self.local_steps < 0:
            raise ValueError("local_steps: must be a positive integer (or 0 for the default)")
        if self.local_steps > MAX_LOCAL_STEPS:
            raise ValueError(
                f"local_steps: at most {MAX_LOCAL_STEPS:,} LMC steps a round, "
                f"got {self.local_steps:,}"
            )
        if 0 < self.step_time < MIN_STEP_TIME:
            raise ValueError(
                f"step_time: at least {MIN_STEP_TIME:g} s (or 0: not given), got {self.step_time:g}"
            )
        if self.init not in INITS:
            raise ValueError(f"init: must be one of {', '.join(INITS)}, got {self.init!r}")


# ----------------------------------------------------------------------------------------
# The hyperparameter rules of [003] §3.2: each worker's ρ_i and γ_i, and the plan of N_i.


MAX_DEFAULT_STEPS = 100_000
"""The most LMC steps a round may take by §3.2.2's default ``ρ_i/(γ_i(ρ_i M_i + 1))``
(4 with the default γ_i): a γ_i given far below its bound makes that millions of steps a
round, a run that looks hung. Beyond it the worker refuses and asks for ``local_steps``."""

MAX_LOCAL_STEPS = 1_000_000
"""The most LMC steps a round may take by a worker's own ``local_steps``. A master's plan
redistributes the workers' steps by speed and may give one worker up to every worker's
share, so a worker takes a plan of up to this many times the number of workers; a report
or a plan beyond it is refused: a hostile peer's 1e300, received as a count, hung every
worker it reached for ever."""

MIN_STEP_TIME = 1e-9
"""The shortest ``step_time`` (seconds) a worker may report: the straggler rule divides by
it, and a report of 5e-324 made the speeds overflow and the master's round loop fail."""

# Columns of the report a worker sends with z_i (the ``profile`` tensor).
RHO, LOCAL_STEPS, GUIDELINE, STEP_TIME = range(4)
PROFILE_SIZE = 4


def ceil_steps(value: float) -> int:
    # ρ/(γ(ρM+1)) with γ = 0.25ρ/(ρM+1) comes out as 4.000000000000001: that is 4, not 5.
    return max(1, math.ceil(round(value, 9)))


def _round_half_up(value: float) -> int:
    return max(1, math.floor(value + 0.5))


def plan_local_steps(profiles: Mapping[str, np.ndarray]) -> dict[str, int]:
    """``N_i`` for every worker that reported, from the reports (``profile`` rows).

    A worker's own ``local_steps`` wins; the others share §3.2.2's
    ``N_avg = ⌈mean of their ρ_k/(γ_k(ρ_k M_k + 1))⌉``. If every worker gave a step time,
    the resulting N_k are redistributed by speed: ``N_i = q_i N̄ b``, ``q_i ∝ 1/τ_i``,
    ``N̄ = ⌈mean N_k⌉`` ([003] §3.2.2, Ahn et al. 2014).
    """
    if not profiles:
        return {}
    defaults = [p[GUIDELINE] for p in profiles.values() if p[LOCAL_STEPS] <= 0]
    n_avg = ceil_steps(math.fsum(defaults) / len(defaults)) if defaults else 1
    plain = {
        worker: int(p[LOCAL_STEPS]) if p[LOCAL_STEPS] > 0 else n_avg
        for worker, p in profiles.items()
    }
    if not all(p[STEP_TIME] > 0 for p in profiles.values()):
        return plain
    b = len(profiles)
    n_bar = ceil_steps(math.fsum(plain.values()) / b)
    speed = {worker: 1.0 / p[STEP_TIME] for worker, p in profiles.items()}
    total = math.fsum(speed.values())
    return {worker: _round_half_up(speed[worker] / total * n_bar * b) for worker in profiles}


def worker_constants(
    hyper: DGLMCParams, potential: LocalPotential, node_id: str
) -> tuple[float, float, float]:
    """``(ρ_i, γ_i, ρ_i/(γ_i(ρ_i M_i + 1)))`` with [003] §3.2's defaults filled in from
    ``M_i = potential.lipschitz()``; a γ_i above Algorithm 1's bound is a ConfigError."""
    curvature = potential.lipschitz()
    if curvature is None:
        if hyper.rho <= 0 or hyper.gamma <= 0:
            field = "rho" if hyper.rho <= 0 else "gamma"
            raise ConfigError(
                f"hyperparameters.{field}: node {node_id!r}'s model gives no curvature bound "
                "M_i for [003] §3.2's default; set rho and gamma"
            )
        rho = bound = hyper.rho  # params.validate() already holds gamma <= rho
    else:
        rho = hyper.rho if hyper.rho > 0 else 1.0 / (5.0 * curvature)
        bound = rho / (rho * curvature + 1.0)
    gamma = hyper.gamma if hyper.gamma > 0 else 0.25 * bound
    if gamma > bound * (1.0 + 1e-12):
        raise ConfigError(
            f"hyperparameters.gamma: {gamma:g} on node {node_id!r} exceeds "
            f"rho/(rho M + 1) = {bound:g} (M = {curvature:g}), [003] Algorithm 1's bound"
        )
    guideline = bound / gamma  # ρ/(γ(ρM+1)) of §3.2.2
    if hyper.local_steps <= 0 and guideline > MAX_DEFAULT_STEPS:
        raise ConfigError(
            f"hyperparameters.local_steps: gamma = {gamma:g} on node {node_id!r} makes "
            f"[003] §3.2.2's default rho/(gamma(rho M + 1)) = {guideline:.3g} LMC steps a "
            f"round (at most {MAX_DEFAULT_STEPS:,} by default); set local_steps, or a larger "
            "gamma"
        )
    return rho, gamma, guideline


# ----------------------------------------------------------------------------------------
# The two conditional updates, as plain functions.


def lmc_steps(
    potential: LocalPotential,
    z: np.ndarray,
    theta: np.ndarray,
    rho: float,
    gamma: float,
    steps: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``N_i`` LMC steps on ``Π_ρ(z_i | θ)`` ([003] eq. 4, Algorithm 1's inner loop), A_i = I:
    Langevin steps on U_i from the point pulled towards θ, ``(1 − γ/ρ) u + (γ/ρ) θ``."""
    pull = gamma / rho
    u = z
    for _ in range(steps):
        gradient = potential.grad(u, rng)
        u = langevin_step((1.0 - pull) * u + pull * theta, gradient, gamma, rng)
    return u


def draw_theta(z: np.ndarray, rho: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """θ ~ N(μ, Q⁻¹) ([003] eq. 5) with A_i = I: ``Q = q I``, ``q = Σ_i 1/ρ_i``,
    ``μ = Σ_i (z_i/ρ_i) / q``. ``z`` is (workers, chains, d), ``rho`` (workers,)."""
    weights = 1.0 / rho
    precision = float(np.sum(weights))
    total = np.zeros(z.shape[1:])
    for weight, z_i in zip(weights, z, strict=True):  # a fixed order: bit-reproducible
        total = total + weight * z_i
    mean = total / precision
    return mean + rng.standard_normal(mean.shape) / math.sqrt(precision)


# ----------------------------------------------------------------------------------------
# The two roles.


class MasterState(NamedTuple):
    theta: np.ndarray
    """θ, the master's sample, (chains, d); zeros until a first worker is heard."""
    z: np.ndarray
    """The last z_i received from the k-th worker, (workers, chains, d)."""
    profile: np.ndarray
    """The last report received from the k-th worker, (workers, PROFILE_SIZE)."""
    heard: np.ndarray
    """1 once the k-th worker has been heard at all, (workers,)."""


class WorkerState(NamedTuple):
    z: np.ndarray
    """z_i, (chains, d)."""
    theta: np.ndarray
    """The last θ received from the master, (chains, d)."""
    has_theta: np.ndarray
    """1 once a θ has been received (a scalar array)."""
    steps: np.ndarray
    """N_i, LMC steps per round (a scalar array): the master's plan once received."""


class Master(Program[MasterState]):
    """Holds θ; draws it from the workers' latest z_i (eq. 5); records θ as the sample."""

    phases = 2

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        self.workers = ctx.neighbourhood(0).in_peers
        if not self.workers:
            raise ConfigError(f"node {ctx.node_id!r}: a DG-LMC master needs workers")
        shape, k = (ctx.chains, ctx.dim), len(self.workers)
        self.current = MasterState(
            np.zeros(shape), np.zeros((k, *shape)), np.zeros((k, PROFILE_SIZE)), np.zeros(k)
        )
        self.stale_inputs = 0
        self.missing_inputs = 0
        self.rejected_inputs = 0

    def message_shapes(self, kind: str) -> dict[str, tuple[int, ...]]:
        if kind != "z":
            raise ValueError(f"a DG-LMC master receives z, not {kind!r}")
        return {"z": (self.ctx.chains, self.ctx.dim), "profile": (PROFILE_SIZE,)}

    def screened_tensors(self, kind: str) -> dict[str, float]:
        """The worker's z; its profile is timings and counts."""
        self.message_shapes(kind)
        return {"z": 1.0}

    def expected_senders(self, round_index: int, phase: int) -> tuple[str, ...]:
        return self.workers if phase == 0 else ()

    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        if phase != 1:
            return {}
        steps = self.local_steps()
        theta = self.current.theta
        return {
            worker: Message(
                "theta", {"theta": theta, "steps": np.array([float(steps.get(worker, 0))])}
            )
            for worker in self.workers
        }

    def local_steps(self) -> dict[str, int]:
        """N_i for each worker heard so far (0 = not known yet: the worker decides)."""
        profile, heard = self.current.profile, self.current.heard
        return plan_local_steps({w: profile[k] for k, w in enumerate(self.workers) if heard[k]})

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        if phase != 0:
            return
        theta = self.current.theta
        z, profile, heard = (a.copy() for a in self.current[1:])
        for k, worker in enumerate(self.workers):
            message = inbox.get(worker)
            if message is not None and not _sound(message["profile"]):
                self.rejected_inputs += 1  # a finite but impossible report (ρ ≤ 0 ...)
                message = None
            if message is not None:
                z[k], profile[k], heard[k] = message["z"], message["profile"], 1.0
            elif heard[k]:
                self.stale_inputs += 1
            else:
                self.missing_inputs += 1
        known = heard > 0
        if known.any():
            theta = draw_theta(z[known], profile[known, RHO], rng)
        self.current = MasterState(theta, z, profile, heard)

    def sample(self) -> np.ndarray:
        return self.current.theta

    def metrics(self) -> dict[str, float]:
        return {
            "stale_inputs": float(self.stale_inputs),
            "missing_inputs": float(self.missing_inputs),
            "rejected_inputs": float(self.rejected_inputs),
        }


def _sound(profile: np.ndarray) -> bool:
    """A worker's report can be used: ρ_i > 0, a positive §3.2.2 term, the rest ≥ 0 (the
    transport already checked its shape and that it is finite), and figures a worker's own
    settings could give (:class:`DGLMCParams`, :func:`worker_constants`): ``local_steps`` up
    to :data:`MAX_LOCAL_STEPS`, a §3.2.2 term it would use up to :data:`MAX_DEFAULT_STEPS`,
    a step time of 0 or at least :data:`MIN_STEP_TIME`."""
    if not (profile[RHO] > 0 and profile[GUIDELINE] > 0 and np.all(profile >= 0)):
        return False
    if profile[LOCAL_STEPS] > MAX_LOCAL_STEPS:
        return False
    if profile[LOCAL_STEPS] <= 0 and profile[GUIDELINE] > MAX_DEFAULT_STEPS:
        return False
    return bool(profile[STEP_TIME] == 0 or profile[STEP_TIME] >= MIN_STEP_TIME)


class Worker(Program[WorkerState]):
    """Holds z_i and the data; runs N_i LMC steps on eq. 4 against the master's θ."""

    phases = 2

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        peers = ctx.neighbourhood(0).out_peers
        if len(peers) != 1:
            raise ConfigError(
                f"node {ctx.node_id!r}: a DG-LMC worker talks to exactly one master, "
                f"not {len(peers)} peers"
            )
        self.master = peers[0]
        hyper: DGLMCParams = ctx.hyper
        potential = ctx.local_potential
        self.rho, self.gamma, guideline = worker_constants(hyper, potential, ctx.node_id)
        self.profile = np.zeros(PROFILE_SIZE)
        self.profile[[RHO, LOCAL_STEPS, GUIDELINE, STEP_TIME]] = (
            self.rho,
            hyper.local_steps,
            guideline,
            hyper.step_time,
        )
        shape = (ctx.chains, ctx.dim)
        if hyper.init == "mode":
            mode = potential.prox(np.zeros((1, ctx.dim)), _MODE_STEP, np.zeros((1, ctx.dim)))
            z = np.repeat(mode, ctx.chains, axis=0)
        else:
            z = rng.standard_normal(shape)
        # Until the master's plan arrives: the worker's own local_steps or §3.2.2 term.
        steps = np.array(float(hyper.local_steps or ceil_steps(guideline)))
        self.current = WorkerState(z, np.zeros(shape), np.zeros(()), steps)
        self.stale_inputs = 0
        self.missing_inputs = 0
        self.rejected_inputs = 0
        self.most_steps = MAX_LOCAL_STEPS * max(ctx.spec.num_nodes - 1, 1)
        """The largest plan a master of this run can send (one worker's share of all)."""

    def message_shapes(self, kind: str) -> dict[str, tuple[int, ...]]:
        if kind != "theta":
            raise ValueError(f"a DG-LMC worker receives theta, not {kind!r}")
        return {"theta": (self.ctx.chains, self.ctx.dim), "steps": (1,)}

    def screened_tensors(self, kind: str) -> dict[str, float]:
        """The master's θ; ``steps`` is a count."""
        self.message_shapes(kind)
        return {"theta": 1.0}

    def expected_senders(self, round_index: int, phase: int) -> tuple[str, ...]:
        return (self.master,) if phase == 1 else ()

    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        if phase != 0:
            return {}
        return {self.master: Message("z", {"z": self.current.z, "profile": self.profile})}

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        if phase != 1:
            return
        z, theta, has_theta, steps = self.current
        message = inbox.get(self.master)
        if message is not None and message["steps"][0] > self.most_steps:
            self.rejected_inputs += 1  # a plan no master can make: as if θ did not come
            message = None
        if message is not None:
            theta, has_theta = message["theta"], np.ones(())
            if message["steps"][0] >= 1:
                steps = np.array(float(message["steps"][0]))
        elif has_theta:
            self.stale_inputs += 1
        else:
            self.missing_inputs += 1
            return  # no θ yet: eq. 4 has nothing to condition on, z_i stays
        z = lmc_steps(self.ctx.local_potential, z, theta, self.rho, self.gamma, int(steps), rng)
        self.current = WorkerState(z, theta, has_theta, steps)

    def metrics(self) -> dict[str, float]:
        return {
            "stale_inputs": float(self.stale_inputs),
            "missing_inputs": float(self.missing_inputs),
            "rejected_inputs": float(self.rejected_inputs),
            "local_steps": float(self.current.steps),
        }


ALGORITHMS = (
    AlgorithmInfo(
        name="dg-lmc",
        summary="Distributed Gibbs with local LMC: workers sample z_i | θ, the master θ | z",
        source="[003] Algorithm 1",
        graph="star",
        params=DGLMCParams,
        programs={"master": Master, "worker": Worker},
        data_roles=("worker",),
        hub_role="master",
    ),
)
