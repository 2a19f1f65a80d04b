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

import numpy as np

from node.messages import Message
from node.samplers.base import Inbox, NodeContext, NodeProgram, broadcast
from node.samplers.registry import AlgorithmInfo
from node.samplers.schedules import PolynomialDecay

__all__ = ["ALGORITHMS", "PushSum", "PushSumParams", "PushSumRunningSums"]

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


class PushSum(NodeProgram):
    """Plain push-sum Langevin ([002] eq. 5)."""

    state_fields = ("x", "y", "z")

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        shape = (ctx.chains, ctx.dim)
        self.x = np.zeros(shape) if ctx.hyper.init == "zero" else rng.standard_normal(shape)
        # One weight per chain, kept as a column so it broadcasts over the d coordinates.
        self.y = np.ones((ctx.chains, 1))
        self.z = self.x / self.y
        self._alpha = ctx.hyper.step()

    def _degree(self, round_index: int) -> int:
        return len(self.ctx.neighbourhood(round_index).out_peers) + 1

    def message_shapes(self, kind: str) -> dict[str, tuple[int, ...]]:
        return {"x": (self.ctx.chains, self.ctx.dim), "y": (self.ctx.chains, 1)}

    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        d = self._degree(round_index)
        share = Message("share", {"x": self.x / d, "y": self.y / d})
        return broadcast(share, self.ctx.neighbourhood(round_index).out_peers)

    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        d = self._degree(round_index)
        w, y = self.x / d, self.y / d  # the share the node keeps
        for message in inbox.values():
            w = w + message["x"]
            y = y + message["y"]
        self._langevin(round_index, w, y, rng)

    def _langevin(
        self, round_index: int, w: np.ndarray, y: np.ndarray, rng: np.random.Generator
    ) -> None:
        alpha = self._alpha(round_index)
        z = w / y
        gradient = self.ctx.potential.grad(z, rng)
        noise = rng.standard_normal(w.shape)
        self.x = w - alpha * gradient + np.sqrt(2.0 * alpha) * noise
        self.y = y
        self.z = z

    def sample(self) -> np.ndarray:
        return self.z

    def metrics(self) -> dict[str, float]:
        """The node's push-sum weight y (mean and minimum over chains). Σ_i y_i = m on a
        lossless network; a plain push-sum node whose y falls has lost mass for good, and
        Z = W / y then blows up as y → 0."""
        return {"weight_mean": float(np.mean(self.y)), "weight_min": float(np.min(self.y))}


class PushSumRunningSums(PushSum):
    """Push-sum Langevin exchanging running sums, robust to lost messages.

    ``sent_x[k]``, ``sent_y[k]``: σ and τ towards the k-th out-peer (of the whole
    schedule); ``heard_x[k]``, ``heard_y[k]``: the last σ, τ received from the k-th in-peer.
    """

    state_fields = ("x", "y", "z", "sent_x", "sent_y", "heard_x", "heard_y")

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        super().__init__(ctx, rng)
        self._out = {peer: k for k, peer in enumerate(ctx.schedule_peers("out_peers"))}
        self._in = {peer: k for k, peer in enumerate(ctx.schedule_peers("in_peers"))}
        c, d = ctx.chains, ctx.dim
        self.sent_x = np.zeros((len(self._out), c, d))
        self.sent_y = np.zeros((len(self._out), c, 1))
        self.heard_x = np.zeros((len(self._in), c, d))
        self.heard_y = np.zeros((len(self._in), c, 1))

    def message_shapes(self, kind: str) -> dict[str, tuple[int, ...]]:
        return {"sigma": (self.ctx.chains, self.ctx.dim), "tau": (self.ctx.chains, 1)}

    def _sums(self, round_index: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Out-peer -> (σ, τ) including this round's share: what is sent this round."""
        d = self._degree(round_index)
        share_x, share_y = self.x / d, self.y / d
        return {
            peer: (self.sent_x[self._out[peer]] + share_x, self.sent_y[self._out[peer]] + share_y)
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
        sums = self._sums(round_index)
        if sums:
            sent_x, sent_y = self.sent_x.copy(), self.sent_y.copy()
            for peer, (sigma, tau) in sums.items():
                sent_x[self._out[peer]] = sigma
                sent_y[self._out[peer]] = tau
            self.sent_x, self.sent_y = sent_x, sent_y
        d = self._degree(round_index)
        w, y = self.x / d, self.y / d
        heard_x, heard_y = self.heard_x.copy(), self.heard_y.copy()
        for sender, message in inbox.items():
            k = self._in[sender]
            w = w + (message["sigma"] - heard_x[k])
            y = y + (message["tau"] - heard_y[k])
            heard_x[k] = message["sigma"]
            heard_y[k] = message["tau"]
        self.heard_x, self.heard_y = heard_x, heard_y
        self._langevin(round_index, w, y, rng)


ALGORITHMS = (
    AlgorithmInfo(
        name="push-sum",
        summary="Push-sum Langevin on a directed, time-varying graph",
        source="[002] eq. 5",
        graph="directed",
        params=PushSumParams,
        programs={"peer": PushSum},
    ),
    AlgorithmInfo(
        name="push-sum-rs",
        summary="Push-sum Langevin with running sums: lost messages are recovered",
        source="[002] eq. 5; Hadjicostis et al. 2016",
        graph="directed",
        params=PushSumParams,
        programs={"peer": PushSumRunningSums},
    ),
)
