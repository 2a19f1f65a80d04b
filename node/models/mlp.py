"""A small Bayesian neural network: one hidden layer, softmax output ([001] §4, [003] §5.3).

``p(y = k | z, x) = softmax(W2ᵀ a(W1ᵀ z + b1) + b2)_k`` with ``a = tanh`` (or the sigmoid of
[003] §5.3), Gaussian prior ``N(0, prior_var I)`` on every weight and bias ([001] §4 and
[003] §5.3 put Gaussian priors on the weights). The papers' networks are larger (MNIST,
784-128-10 in [003], 2×800 in [001]); this one keeps the same structure at a size that
runs on an edge device in numpy.

The parameter vector ``x`` (dimension ``d = p·h + h + h·K + K``) is the concatenation of
``W1`` (p × h, row-major), ``b1`` (h), ``W2`` (h × K, row-major), ``b2`` (K).

Data: any file with integer labels ``0..K-1``; the built-in ``builtin:digits`` (UCI optical
digits, 1797 rows, 64 features scaled to [0, 1], 10 classes; see ``datasets/README.md``),
which fits the defaults; or synthetic data from a fixed random *teacher* network of the same
shape (``z ~ N(0, I)``, labels drawn from the teacher's softmax), the same on every node.

The potential is not convex; it has no cheap Hessian, so the default prox uses L-BFGS.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit, softmax

from starling.node.models.base import Dataset, LocalPotential, check_scales, minibatch_rows
from starling.node.models.classification import class_indices

__all__ = ["MLP", "MLPPotential"]

_ACTIVATIONS = ("tanh", "sigmoid")


@dataclass(frozen=True)
class MLP:
    features: int = 64
    """Inputs ``p`` (64 for the built-in digits)."""
    hidden: int = 16
    """Hidden units ``h``."""
    classes: int = 10
    """Output classes ``K``."""
    activation: str = "tanh"
    """``tanh`` or ``sigmoid`` ([003] §5.3 uses the sigmoid)."""
    prior_var: float = 1.0
    """Variance of the Gaussian prior on every weight and bias."""
    teacher_seed: int = 0
    """Seed of the synthetic data's teacher network (shared by all nodes)."""
    teacher_scale: float = 5.0
    """Scale of the teacher's output weights: larger means less label noise."""

    supervised = True

    @property
    def dim(self) -> int:
        p, h, k = self.features, self.hidden, self.classes
        return p * h + h + h * k + k

    @property
    def num_features(self) -> int:
        return self.features

    @property
    def num_classes(self) -> int:
        return self.classes

    def validate(self) -> None:
        if self.features < 1:
            raise ValueError("features: must be at least 1")
        if self.hidden < 1:
            raise ValueError("hidden: must be at least 1")
        if self.classes < 2:
            raise ValueError("classes: must be at least 2")
        if self.activation not in _ACTIVATIONS:
            raise ValueError(
                f"activation: unknown activation {self.activation!r} (use tanh or sigmoid)"
            )
        check_scales(self, "prior_var", "teacher_scale")

    # -- the network, vectorised over chains -------------------------------------------------

    def unpack(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Views ``W1 (C, p, h)``, ``b1 (C, h)``, ``W2 (C, h, K)``, ``b2 (C, K)`` of ``x``."""
        p, h, k = self.features, self.hidden, self.classes
        c = x.shape[0]
        ends = np.cumsum([p * h, h, h * k])
        return (
            x[:, : ends[0]].reshape(c, p, h),
            x[:, ends[0] : ends[1]],
            x[:, ends[1] : ends[2]].reshape(c, h, k),
            x[:, ends[2] :],
        )

    def _activate(self, pre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The hidden activations and their derivatives."""
        if self.activation == "tanh":
            hidden = np.tanh(pre)
            return hidden, 1.0 - hidden**2
        hidden = expit(pre)
        return hidden, hidden * (1.0 - hidden)

    def forward(self, x: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Logits (C, m, K), hidden activations and their derivatives (C, m, h).

        ``Z`` is (m, p), shared by the chains, or (C, m, p), one batch per chain.
        """
        W1, b1, W2, b2 = self.unpack(x)
        hidden, slope = self._activate(Z @ W1 + b1[:, None, :])
        return hidden @ W2 + b2[:, None, :], hidden, slope

    def predict_proba(self, samples: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Class probabilities (S, n, K) for every sample (S, d) and row of ``X`` (n, p)."""
        samples = np.atleast_2d(samples)
        X = np.asarray(X, dtype=float)
        out = np.empty((samples.shape[0], X.shape[0], self.classes))
        for start in range(0, samples.shape[0], 64):  # bounded memory for long sample runs
            logits, _, _ = self.forward(samples[start : start + 64], X)
            out[start : start + 64] = softmax(logits, axis=-1)
        return out

    def class_labels(self, y: np.ndarray) -> np.ndarray:
        return class_indices(y, self.classes)

    # -- data --------------------------------------------------------------------------------

    def teacher(self) -> np.ndarray:
        """The synthetic data's generating weights, shape (1, d), from ``teacher_seed``."""
        rng = np.random.default_rng(np.random.SeedSequence([self.teacher_seed, 1]))
        p, h, k = self.features, self.hidden, self.classes
        parts = [
            rng.standard_normal(p * h) / np.sqrt(p),
            0.1 * rng.standard_normal(h),
            self.teacher_scale * rng.standard_normal(h * k) / np.sqrt(h),
            np.zeros(k),
        ]
        return np.concatenate(parts)[None, :]

    def synthesize(self, rng: np.random.Generator, size: int) -> Dataset:
        """``z ~ N(0, I_p)``, ``y`` drawn from the teacher network's softmax."""
        z = rng.standard_normal((size, self.features))
        proba = self.predict_proba(self.teacher(), z)[0]
        cumulative = np.cumsum(proba, axis=1)
        u = rng.random(size)[:, None]
        y = np.minimum((u > cumulative).sum(axis=1), self.classes - 1)
        return Dataset(X=z, y=y.astype(float))

    def local_potential(
        self, data: Dataset, prior_share: float, batch_size: int = 0
    ) -> MLPPotential:
        return MLPPotential(self, data, prior_share, batch_size)


class _Softmax:
    """The output layer's probabilities and their logarithms from the logits (C, m, K),
    sharing the exponentials: the value needs the logarithms, the gradient the
    probabilities, the prox's L-BFGS both at once (and they are the same floats whichever
    asks)."""

    def __init__(self, logits: np.ndarray):
        self._shifted = logits - logits.max(axis=-1, keepdims=True)
        self._exp = np.exp(self._shifted)
        self._total = self._exp.sum(axis=-1, keepdims=True)

    def log_p(self) -> np.ndarray:
        return self._shifted - np.log(self._total)

    def p(self) -> np.ndarray:
        return self._exp / self._total


class MLPPotential(LocalPotential):
    """``f_i(x) = -Σ_l log softmax(net(z_l; x))_{y_l} + s_i ||x||² / (2 prior_var)``."""

    def __init__(self, model: MLP, data: Dataset, prior_share: float, batch_size: int = 0):
        self.model = model
        self.dim = model.dim
        self._Z = np.asarray(data.X, dtype=float)
        self._labels = model.class_labels(data.y)
        self._onehot = np.eye(model.classes)[self._labels]
        self.num_points = len(self._labels)
        self.prior_share = prior_share
        self._prior_precision = prior_share / model.prior_var
        self._batch = batch_size if 0 < batch_size < self.num_points else 0

    def value(self, x: np.ndarray) -> np.ndarray:
        logits, _, _ = self.model.forward(x, self._Z)
        return self._value_from(x, _Softmax(logits))

    def grad(self, x: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        Z, onehot, scale = self._Z, self._onehot[None], 1.0
        if self._batch and rng is not None:
            rows = minibatch_rows(rng, self.num_points, self._batch, x.shape[0])
            Z, onehot = self._Z[rows], self._onehot[rows]
            scale = self.num_points / self._batch
        forward = self.model.forward(x, Z)
        return self._grad_from(x, Z, onehot, scale, forward, _Softmax(forward[0]))

    def value_and_grad(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Both from one forward pass over the data: the prox's L-BFGS asks for them
        together at every step (the same floats as :meth:`value` and :meth:`grad`)."""
        forward = self.model.forward(x, self._Z)
        output = _Softmax(forward[0])
        value = self._value_from(x, output)
        return value, self._grad_from(x, self._Z, self._onehot[None], 1.0, forward, output)

    def _value_from(self, x: np.ndarray, output: _Softmax) -> np.ndarray:
        nll = -np.sum(output.log_p() * self._onehot[None], axis=(1, 2))
        return nll + 0.5 * self._prior_precision * np.sum(x * x, axis=1)

    def _grad_from(
        self,
        x: np.ndarray,
        Z: np.ndarray,
        onehot: np.ndarray,
        scale: float,
        forward: tuple[np.ndarray, np.ndarray, np.ndarray],
        output: _Softmax,
    ) -> np.ndarray:
        """Backpropagation through the network, given its forward pass over ``Z``."""
        _, hidden, slope = forward
        d_logits = scale * (output.p() - onehot)  # (C, m, K)
        _, _, W2, _ = self.model.unpack(x)
        d_pre = (d_logits @ np.swapaxes(W2, 1, 2)) * slope  # (C, m, h)
        g_W1 = np.swapaxes(Z, -1, -2) @ d_pre  # (C, p, h)
        g_W2 = np.swapaxes(hidden, 1, 2) @ d_logits  # (C, h, K)
        grad = np.concatenate(
            [
                g_W1.reshape(x.shape[0], -1),
                d_pre.sum(axis=1),
                g_W2.reshape(x.shape[0], -1),
                d_logits.sum(axis=1),
            ],
            axis=1,
        )
        return grad + self._prior_precision * x
