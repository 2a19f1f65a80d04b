"""Bayesian logistic regression ([000] §6.3; [004] §5.2): data, priors, prox, prediction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.special import expit

from starling.node.data.files import load_file
from starling.node.models.base import Dataset
from starling.node.models.classification import classification_scores
from starling.node.models.logistic_regression import LogisticRegression
from starling.node.models.prox import subproblem_residual
from starling.node.params import ConfigError, parse_params

A9A = Path("/work/shared/data/a9a.gz")
A9A_TEST = Path("/work/shared/data/a9a.t.gz")


def test_synthetic_data_follow_the_paper_setting():
    model = LogisticRegression()  # d = 3, λ = 10, z ~ N(0, 20 I)
    assert model.dim == 3
    data = model.synthesize(np.random.default_rng(0), 20000)
    # Feature variance 20: the sample variance of 20000 normals has relative sd √(2/n) = 1%;
    # 5% is five of those.
    np.testing.assert_allclose(data.X.var(axis=0), 20.0, rtol=0.05)
    # Labels drawn from the model: their mean matches E σ(xᵀz) at the true x within
    # 5 binomial standard errors (sd ≤ 0.5/√n).
    expected = expit(data.X @ model.truth()).mean()
    assert abs(data.y.mean() - expected) < 5 * 0.5 / np.sqrt(len(data))
    assert set(np.unique(data.y)) == {0.0, 1.0}


def test_every_node_shares_one_true_parameter():
    a, b = LogisticRegression(truth_seed=3), LogisticRegression(truth_seed=3)
    np.testing.assert_array_equal(a.truth(), b.truth())
    assert not np.allclose(a.truth(), LogisticRegression(truth_seed=4).truth())
    np.testing.assert_array_equal(LogisticRegression(true_x=(1, 2, 3)).truth(), [1, 2, 3])


def test_value_is_the_papers_eq30():
    model = LogisticRegression(features=2, intercept=True)
    data = model.synthesize(np.random.default_rng(1), 25)
    share, lam = 0.2, model.prior_var
    potential = model.local_potential(data, share)
    x = np.random.default_rng(2).standard_normal((3, 3))
    Z = np.hstack([data.X, np.ones((25, 1))])
    psi = np.where(data.y == 1, -1.0, 1.0)  # ψ_l = −1 for label 1 ([000] eq. 30)
    expected = [np.sum(np.log1p(np.exp(psi * (Z @ xc)))) + share * xc @ xc / (2 * lam) for xc in x]
    np.testing.assert_allclose(potential.value(x), expected, rtol=1e-12)


def test_laplace_prior_value_and_subgradient():
    model = LogisticRegression(prior="laplace", prior_scale=2.0)
    data = Dataset(X=np.zeros((0, 3)), y=np.zeros(0))  # prior only
    potential = model.local_potential(data, 0.5)
    x = np.array([[1.5, -2.0, 0.0]])
    assert potential.l1_weight == pytest.approx(0.25)
    np.testing.assert_allclose(potential.value(x), 0.25 * 3.5)
    np.testing.assert_allclose(potential.grad(x), [[0.25, -0.25, 0.0]])  # sign(0) = 0


def test_labels_pm1_and_01_give_the_same_potential():
    model = LogisticRegression()
    data = model.synthesize(np.random.default_rng(3), 30)
    pm = Dataset(X=data.X, y=2 * data.y - 1)
    x = np.random.default_rng(4).standard_normal((2, 3))
    np.testing.assert_allclose(
        model.local_potential(data, 0.5).value(x), model.local_potential(pm, 0.5).value(x)
    )
    with pytest.raises(ConfigError, match="data.path"):
        model.local_potential(Dataset(X=data.X, y=data.y + 1), 0.5)


def _a9a_like(seed: int, n: int = 400, p: int = 40) -> Dataset:
    """Sparse binary features with a few rare columns, as in a9a's one-hot encoding."""
    rng = np.random.default_rng(seed)
    X = (rng.random((n, p)) < rng.uniform(0.002, 0.4, p)).astype(float)
    w = rng.standard_normal(p)
    y = (rng.random(n) < expit(X @ w - 1.0)).astype(float)
    return Dataset(X=X, y=2 * y - 1)


@pytest.mark.parametrize("prior", ["gaussian", "laplace"])
def test_prox_reaches_the_stated_tolerance_on_sparse_binary_data(prior):
    model = LogisticRegression(features=40, intercept=True, prior=prior)
    potential = model.local_potential(_a9a_like(5), 0.2)
    rng = np.random.default_rng(6)
    x0 = 0.1 * rng.standard_normal((3, model.dim))
    for step, v in [(0.05, x0 + rng.standard_normal(x0.shape)), (1e12, np.zeros_like(x0))]:
        x = potential.prox(v, step, warm_start=x0)
        assert potential.last_prox.converged, potential.last_prox
        assert np.all(subproblem_residual(potential, x, v, step) <= 1e-8)
    if prior == "laplace":
        assert np.any(x == 0.0)  # the L1 term produces exact zeros (rare features)


def test_laplace_prox_is_optimal_against_perturbations():
    """Independent of the residual formula: no nearby point does better."""
    model = LogisticRegression(features=40, prior="laplace")
    potential = model.local_potential(_a9a_like(7), 0.2)
    v = np.random.default_rng(8).standard_normal((1, 40))
    step = 0.1
    x = potential.prox(v, step, warm_start=np.zeros((1, 40)))

    def objective(z):
        return potential.value(z) + np.sum((z - v) ** 2, axis=1) / (2 * step)

    trials = x + 1e-4 * np.random.default_rng(9).standard_normal((500, 40))
    trials[:250] *= np.abs(x) > 0  # half the trials keep the zeros exactly at zero
    assert np.all(objective(trials) >= objective(x)[0] - 1e-10)


def test_predict_proba_and_scores_on_held_out_synthetic_data():
    model = LogisticRegression()
    train = model.synthesize(np.random.default_rng(10), 500)
    test = model.synthesize(np.random.default_rng(11), 2000)
    proba = model.predict_proba(np.vstack([model.truth(), -model.truth()]), test.X)
    assert proba.shape == (2, 2000, 2)
    np.testing.assert_allclose(proba.sum(axis=-1), 1.0)
    # The MAP from the training data (no-edge prox) classifies held-out data about as well
    # as the true parameter (Bayes rate); the negated parameter does worse than chance.
    potential = model.local_potential(train, 1.0)
    map_x = potential.prox(np.zeros((1, 3)), 1e12, warm_start=np.zeros((1, 3)))
    truth = classification_scores(model, model.truth()[None], test.X, test.y)
    fitted = classification_scores(model, map_x, test.X, test.y)
    flipped = classification_scores(model, -model.truth()[None], test.X, test.y)
    assert fitted["predictive_accuracy"] > truth["predictive_accuracy"] - 0.03
    assert flipped["predictive_accuracy"] < 0.5 < fitted["predictive_auc"]


@pytest.mark.skipif(not A9A.is_file(), reason="a9a not available")
def test_a9a_map_accuracy_is_in_the_papers_range():
    """[004] §5.2 reports ≈ 84 % test accuracy for Bayesian logistic regression on a9a."""
    model = LogisticRegression(features=123, intercept=True, prior="laplace", prior_scale=1.0)
    train = load_file(str(A9A), "libsvm", model)
    assert train.X.shape == (32561, 123) and int((train.y > 0).sum()) == 7841
    rows = np.arange(0, len(train), 4)  # a quarter of the rows keeps the test quick
    potential = model.local_potential(Dataset(train.X[rows], train.y[rows]), 1.0)
    start = np.zeros((1, model.dim))
    map_x = potential.prox(start, 1e12, warm_start=start)
    assert potential.last_prox.converged
    if A9A_TEST.is_file():
        test = load_file(str(A9A_TEST), "", model)
        scores = classification_scores(model, map_x, test.X, test.y)
        assert 0.83 < scores["predictive_accuracy"] < 0.86
        assert scores["predictive_auc"] > 0.88


def test_hessian_of_a_sparse_design_is_the_dense_formula():
    """A one-hot design sparse enough for the CSR path (a9a's kind, 10 % non-zero): the
    Hessian agrees with ``Zᵀ diag(σ(1-σ)) Z`` computed densely, to rounding, and is exactly
    symmetric (Cholesky and the Newton solve read one triangle)."""
    rng = np.random.default_rng(7)
    X = (rng.random((300, 40)) < 0.1).astype(float)
    model = LogisticRegression(features=40, intercept=True, prior="laplace", prior_scale=1.0)
    data = Dataset(X=X, y=(rng.random(300) < 0.4).astype(float))
    potential = model.local_potential(data, 0.2)
    assert potential._sparse is not None  # the path under test
    x = rng.standard_normal((3, model.dim)) * 0.3
    Z = np.hstack([X, np.ones((300, 1))])
    weights = expit(x @ Z.T) * (1.0 - expit(x @ Z.T))
    expected = np.stack([(Z * w[:, None]).T @ Z for w in weights])
    H = potential.hessian(x)
    np.testing.assert_allclose(H, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(H, np.swapaxes(H, 1, 2))


@pytest.mark.parametrize(
    ("params", "field", "reads"),
    [
        (
            {"prior": "gaussian", "prior_scale": 2.0},
            "prior_scale",
            "the gaussian prior reads prior_var",
        ),
        (
            {"prior": "laplace", "prior_var": 1.0},
            "prior_var",
            "the laplace prior reads prior_scale",
        ),
    ],
)
def test_the_other_priors_scale_is_refused_not_ignored(params, field, reads):
    """A laplace prior given ``prior_var: 1.0`` (meant as its scale) ran at the default
    scale, the variance read by nothing."""
    with pytest.raises(ConfigError, match=rf"^model\.params\.{field}: {reads}, not {field}"):
        parse_params(LogisticRegression, params, "model.params")
