"""Push-sum Langevin on directed, time-varying graphs ([002] eq. 5), and its running-sum
variant for lossy links (Hadjicostis, Domínguez-García & Charalambous 2016).

Node i holds ``X_i`` and a weight ``y_i`` (one per chain). At round t, with out-degree
``d_i(t) = |out-peers(t)| + 1`` (the node counts itself, [002] eq. 2), it keeps one share
``(X_i/d_i, y_i/d_i)`` and sends one to each out-peer; then ([002] eq. 5)

    W_i = Σ_{j ∈ N_i^in(t)} X_j/d_j ,   y_i = Σ_{j ∈ N_i^in(t)} y_j/d_j ,   Z_i = W_i / y_i
    X_i = W_i − α_t ∇f_i(Z_i) + √(2α_t) w ,        w ~ N(0, I)

(sums include the node's own share). The sample is ``Z_i``. The mixing matrix is column
stochastic, so Σ_i X_i and Σ_i y_i are conserved by the mixing; the average
``X̄ = Σ X_i / m`` then moves by ``−(α_t/m) Σ_i ∇f_i + √(2α_t/m) w̄`` ([002] eq. 7): a
Langevin step of size α_t/m on F = Σ f_i, so the consensus value Z_i ≈ X̄ targets
exp(−F). Only the out-degree is needed; one-way links are the normal case.

Step ``α_t = a / (b + t)^γ`` with t the round index (eq. 5 writes α(t+1) for the update
that produces X(t+1); counting rounds from 0 gives the same sequence). Defaults follow
[002] §5.3: γ = 0.65 with α falling from 0.01 (a = 0.01, b = 1); a9a (§5.4) uses
a = 0.008, b = 12, γ = 0.45. ``X_i(0) = 0``, ``y_i(0) = 1`` ([002] §3); ``init: normal``
draws X_i(0) ~ N(0, I) instead.

**Lost messages.** Plain push-sum (``push-sum``) cannot tell a lost message from a
delivered one: the sender has already divided its mass by d_i, so the lost share of X and
y is gone for good. Σ y then falls below m and the consensus step no longer conserves the
sum; with a constant step the network afterwards samples a tempered target (wider by about
m / Σ y) — measured in ``tests/node/samplers/test_push_sum.py``.

``push-sum-rs`` sends running sums instead ([Hadjicostis et al. 2016]): for each
out-peer j the sender keeps ``σ_ij(t) = Σ_{s ≤ t, j ∈ out(s)} X_i(s)/d_i(s)`` and
``τ_ij(t)``, the same for y, and transmits them; the receiver remembers the last σ_ij, τ_ij
it got and adds the *difference*. A share lost at round s is therefore delivered with the
next message that gets through, and Σ_i X_i + (mass in flight) is conserved. Without
losses the two variants compute the same numbers (up to the rounding of a difference of
sums: the sums grow linearly in t, so after T rounds shares carry an absolute error of
order T · 1e-16 · |X|, negligible for any run length this project uses).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol, TypeVar

import numpy as np

from starling.node.messages import Message
from starling.node.models.base import LocalPotential
from starling.node.samplers.base import Inbox, NodeContext, Program, ProgramState, broadcast
from starling.node.samplers.kernels import langevin_step
from starling.node.samplers.registry import AlgorithmInfo
from starling.node.samplers.schedules import PolynomialDecay

__all__ = [
    "ALGORITHMS",
    "PushSum",
    "PushSumParams",
    "PushSumRunningSums",
    "PushSumState",
    "RunningSumsState",
]

INITS = ("zero", "normal")


@dataclass(frozen=True)
class PushSumParams:
    a: float = 0.01
    """Scale a of α_t = a/(b + t)^γ ([002] §5.3: α from 1e-2 down to 1e-4)."""
    b: float = 1.0
    """Offset b of the step schedule ([002] §5.4 uses 12)."""
    gamma: float = 0.65
    """Decay γ of the step schedule ([002] §5.3: 0.65; §5.4: 0.45); 0 keeps α constant."""
    init: str = "zero"
    """``zero``: X_i(0) = 0 as in [002] §3; ``normal``: X_i(0) ~ N(0, I)."""
    batch_size: int = 0
    """Mini-batch size for the stochastic gradient ([002] §5.2 uses 1); 0: full batch."""

    def validate(self) -> None:
        if not self.a > 0:
            raise ValueError("a: must be positive")
        if not self.b > 0:
            raise ValueError("b: must be positive")
        if not self.gamma >= 0:
            raise ValueError("gamma: must be non-negative")
        if self.init not in INITS:
            raise ValueError(f"init: must be one of {', '.join(INITS)}, got {self.init!r}")
        if self.batch_size < 0:
            raise ValueError("batch_size: must be zero (full batch) or positive")

    def step(self) -> PolynomialDecay:
        return PolynomialDecay(self.a, self.b, self.gamma)


class PushSumState(NamedTuple):
    x: np.ndarray
    """X_i, (chains, d)."""
    y: np.ndarray
    """The push-sum weight y_i per chain, (chains, 1): a column, to broadcast over d."""
    z: np.ndarray
    """The sample Z_i = W_i / y_i, (chains, d)."""


class RunningSumsState(NamedTuple):
    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    sent_x: np.ndarray
    """σ towards the k-th out-peer of the whole schedule, (out-peers, chains, d)."""
    sent_y: np.ndarray
    """τ towards the k-th out-peer, (out-peers, chains, 1)."""
    heard_x: np.ndarray
    """The last σ received from the k-th in-peer, (in-peers, chains, d)."""
    heard_y: np.ndarray
    """The last τ received from the k-th in-peer, (in-peers, chains, 1)."""


def push_sum_langevin(
    w: np.ndarray,
    y: np.ndarray,
    alpha: float,
    potential: LocalPotential,
    rng: np.random.Generator,
) -> PushSumState:
    """[002] eq. 5 after the mixing: ``Z = W / y``, ``X = W − α ∇f_i(Z) + √(2α) w``."""
    z = w / y
    gradient = potential.grad(z, rng)
    return PushSumState(langevin_step(w, gradient, alpha, rng), y, z)


class _Mass(ProgramState, Protocol):
    """What both push-sum states hold: X_i, y_i and the sample Z_i."""

    @property
    def x(self) -> np.ndarray: ...
    @property
    def y(self) -> np.ndarray: ...
    @property
    def z(self) -> np.ndarray: ...


M = TypeVar("M", bound=_Mass)


class _PushSumBase(Program[M]):
    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        params: PushSumParams = ctx.hyper
        shape = (ctx.chains, ctx.dim)
        x = np.zeros(shape) if params.init == "zero" else rng.standard_normal(shape)
        y = np.ones((ctx.chains, 1))
        self._start = PushSumState(x, y, x / y)
        self._alpha = params.step()

    def _degree(self, round_index: int) -> int:
        return len(self.ctx.neighbourhood(round_index).out_peers) + 1

    def _kept(self, round_index: int) -> tuple[np.ndarray, np.ndarray]:
        """The share ``(X_i/d_i, y_i/d_i)`` the node keeps (and sends to each out-peer)."""
        d = self._degree(round_index)
        return self.current.x / d, self.current.y / d

    def _step(
        self, round_index: int, w: np.ndarray, y: np.ndarray, rng: np.random.Generator
    ) -> PushSumState:
        return push_sum_langevin(w, y, self._alpha(round_index), self.ctx.local_potential, rng)

    def sample(self) -> np.ndarray:
        return self.current.z

    def metrics(self) -> dict[str, float]:
        """The node's push-sum weight y (mean and minimum over chains). Σ_i y_i = m on a
        lossless network; a plain push-sum node whose y falls has lost mass for good, and
        Z = W / y then blows up as y → 0."""
        y = self.current.y
        return {"weight_mean": float(np.mean(y)), "weight_min": float(np.min(y))}


class PushSum(_PushSumBase[PushSumState]):
    """Plain push-sum Langevin ([002] eq. 5)."""

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        self.current = self._start

    def message_shapes(self, kind: str) -> dict[str, tuple[int, ...]]:
        if kind != "share":
            raise ValueError("expected 'share'")
        return {"x": (self.ctx.chains, self.ctx.dim), "y": (self.ctx.chains, 1)}

    def screened_tensors(self, kind: str) -> dict[str, float]:
        """A share of a node's mass, which can gather up to all ``num_nodes`` of it."""
        scale = float(max(self.ctx.spec.num_nodes, 1))
        return dict.fromkeys(self.message_shapes(kind), scale)

    def positive_tensors(self, kind: str) -> tuple[str, ...]:
        """A share of a weight y_j/d_j: positive, as every y_i is ([002] §3, y_i(0) = 1)."""
        self.message_shapes(kind)
        return ("y",)

    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        share_x, share_y = self._kept(round_index)
        share = Message("share", {"x": share_x, "y": share_y})
        return broadcast(share, self.ctx.neighbourhood(round_index).out_peers)

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        w, y = self._kept(round_index)
        for message in inbox.values():
            w = w + message["x"]
            y = y + message["y"]
        self.current = self._step(round_index, w, y, rng)


class PushSumRunningSums(_PushSumBase[RunningSumsState]):
    """Push-sum Langevin exchanging running sums, robust to lost messages."""

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        self._out = {peer: k for k, peer in enumerate(ctx.spec.out_peers())}
        self._in = {peer: k for k, peer in enumerate(ctx.spec.in_peers())}
        c, d = ctx.chains, ctx.dim
        self.current = RunningSumsState(
            *self._start,
            sent_x=np.zeros((len(self._out), c, d)),
            sent_y=np.zeros((len(self._out), c, 1)),
            heard_x=np.zeros((len(self._in), c, d)),
            heard_y=np.zeros((len(self._in), c, 1)),
        )

    def message_shapes(self, kind: str) -> dict[str, tuple[int, ...]]:
        if kind != "sums":
            raise ValueError("expected 'sums'")
        return {"sigma": (self.ctx.chains, self.ctx.dim), "tau": (self.ctx.chains, 1)}

    def screened_tensors(self, kind: str) -> dict[str, float]:
        """Running sums: at most one share (up to the whole mass) added a round."""
        scale = float(max(self.ctx.spec.num_nodes, 1) * (self.ctx.spec.rounds + 1))
        return dict.fromkeys(self.message_shapes(kind), scale)

    def positive_tensors(self, kind: str) -> tuple[str, ...]:
        """τ, a running sum of positive weight shares, the one sent this round among them.
        (A hostile sender's τ below the last one heard is positive and still lowers the
        receiver's weight: screening bounds values, it does not make push-sum Byzantine
        robust.)"""
        self.message_shapes(kind)
        return ("tau",)

    def _sums(self, round_index: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Out-peer -> (σ, τ) including this round's share: what is sent this round."""
        share_x, share_y = self._kept(round_index)
        sent_x, sent_y = self.current.sent_x, self.current.sent_y
        return {
            peer: (sent_x[self._out[peer]] + share_x, sent_y[self._out[peer]] + share_y)
            for peer in self.ctx.neighbourhood(round_index).out_peers
        }

    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        return {
            peer: Message("sums", {"sigma": sigma, "tau": tau})
            for peer, (sigma, tau) in self._sums(round_index).items()
        }

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        # The sums advance when a share is sent, whether or not it arrives: that is what
        # lets the next message that does arrive carry the lost one.
        state = self.current
        sent_x, sent_y = state.sent_x.copy(), state.sent_y.copy()
        for peer, (sigma, tau) in self._sums(round_index).items():
            sent_x[self._out[peer]] = sigma
            sent_y[self._out[peer]] = tau
        w, y = self._kept(round_index)
        heard_x, heard_y = state.heard_x.copy(), state.heard_y.copy()
        for sender, message in inbox.items():
            k = self._in[sender]
            w = w + (message["sigma"] - heard_x[k])
            y = y + (message["tau"] - heard_y[k])
            heard_x[k] = message["sigma"]
            heard_y[k] = message["tau"]
        mixed = self._step(round_index, w, y, rng)
        self.current = RunningSumsState(*mixed, sent_x, sent_y, heard_x, heard_y)


ALGORITHMS = (
    AlgorithmInfo(
        name="push-sum",
        summary="Push-sum Langevin on a directed, time-varying graph",
        source="[002] eq. 5",
        graph="directed",
        params=PushSumParams,
        programs={"peer": PushSum},
        batching=True,
    ),
    AlgorithmInfo(
        name="push-sum-rs",
        summary="Push-sum Langevin with running sums: lost messages are recovered",
        source="[002] eq. 5; Hadjicostis et al. 2016",
        graph="directed",
        params=PushSumParams,
        programs={"peer": PushSumRunningSums},
        batching=True,
    ),
)
