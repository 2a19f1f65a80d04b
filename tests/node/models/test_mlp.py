"""The Bayesian MLP: layout of the parameter vector, gradients, data, prediction."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax

from starling.node.data.files import read_table
from starling.node.models.base import Dataset
from starling.node.models.classification import classification_scores
from starling.node.models.mlp import MLP
from starling.node.params import ConfigError


def _reference_logits(model: MLP, x: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """The network written out weight by weight from the documented layout."""
    p, h, k = model.features, model.hidden, model.classes
    W1 = x[: p * h].reshape(p, h)
    b1 = x[p * h : p * h + h]
    W2 = x[p * h + h : p * h + h + h * k].reshape(h, k)
    b2 = x[p * h + h + h * k :]
    act = np.tanh if model.activation == "tanh" else (lambda t: 1 / (1 + np.exp(-t)))
    return act(Z @ W1 + b1) @ W2 + b2


@pytest.mark.parametrize("activation", ["tanh", "sigmoid"])
def test_value_follows_the_documented_layout(activation):
    model = MLP(features=4, hidden=3, classes=5, activation=activation, prior_var=2.0)
    assert model.dim == 4 * 3 + 3 + 3 * 5 + 5
    data = model.synthesize(np.random.default_rng(0), 30)
    x = np.random.default_rng(1).standard_normal((2, model.dim))
    potential = model.local_potential(data, 0.5)
    labels = data.y.astype(int)
    expected = []
    for xc in x:
        proba = softmax(_reference_logits(model, xc, data.X), axis=1)
        nll = -np.sum(np.log(proba[np.arange(30), labels]))
        expected.append(nll + 0.5 * 0.5 * xc @ xc / 2.0)
    np.testing.assert_allclose(potential.value(x), expected, rtol=1e-12)
    np.testing.assert_allclose(
        model.predict_proba(x, data.X)[1], softmax(_reference_logits(model, x[1], data.X), 1)
    )


def test_gradient_on_digits_sized_network_matches_finite_differences():
    """The full 64-16-10 network on real rows, checked along random directions."""
    model = MLP()
    digits = read_table("builtin:digits")
    potential = model.local_potential(Dataset(digits.X[:60], digits.y[:60]), 0.1)
    rng = np.random.default_rng(2)
    x = 0.3 * rng.standard_normal((2, model.dim))
    g = potential.grad(x)
    for _ in range(5):
        u = rng.standard_normal(model.dim)
        u /= np.linalg.norm(u)
        eps = 1e-5
        fd = (potential.value(x + eps * u) - potential.value(x - eps * u)) / (2 * eps)
        # Central difference error ~ eps²·f''' ≈ 1e-8 on values of order 100.
        np.testing.assert_allclose(g @ u, fd, rtol=1e-6, atol=1e-6)


def test_teacher_data_is_learnable_and_shared_by_nodes():
    model = MLP(features=5, hidden=8, classes=3)
    np.testing.assert_array_equal(model.teacher(), MLP(features=5, hidden=8, classes=3).teacher())
    data = model.synthesize(np.random.default_rng(3), 3000)
    assert set(np.unique(data.y)) == {0.0, 1.0, 2.0}
    # Labels are drawn from the teacher, so the teacher predicts them far above chance (1/3).
    scores = classification_scores(model, model.teacher(), data.X, data.y)
    assert scores["predictive_accuracy"] > 0.6


def test_map_on_digits_generalises():
    """A prior-regularised fit on 300 digits classifies 300 other digits well: the gradient,
    the prox and the packaged data work together (L-BFGS from the no-edge prox)."""
    model = MLP(hidden=16)
    digits = read_table("builtin:digits")
    train = Dataset(digits.X[:300], digits.y[:300])
    potential = model.local_potential(train, 1.0)
    start = 0.1 * np.random.default_rng(4).standard_normal((1, model.dim))
    potential.prox_max_iter = 15  # 300 L-BFGS iterations: enough for a good fit, not a proof
    fitted = potential.prox(np.zeros_like(start), 1e12, warm_start=start)
    scores = classification_scores(model, fitted, digits.X[1000:1300], digits.y[1000:1300])
    assert scores["predictive_accuracy"] > 0.85, scores


def test_bad_labels_are_rejected():
    model = MLP(features=2, hidden=2, classes=3)
    with pytest.raises(ConfigError, match=r"data\.path: class labels must be integers 0\.\.2"):
        model.local_potential(Dataset(X=np.zeros((2, 2)), y=np.array([0.0, 3.0])), 1.0)
