"""The batched W2 (one projection per point set, a chains × chains Gram when chains < dim,
the factor's zero triangle skipped from dim 129 on) equals the direct formula of Givens &
Shortt, ``‖m1 − m2‖² + tr(S1 + S2 − 2 (S2^½ S1 S2^½)^½)`` with ``d × d`` square roots.

Tolerances. Both sides are exact in real arithmetic. With a full-rank fitted covariance
(chains > dim) they agree to 1e-9 relative: the trace term cancels (W2² is a small
difference of traces of order ``d``), so rounding of order 1e-16 reaches ~1e-12 in W2;
1e-9 leaves room and still fails for any wrong term (a missing centring or factor moves
W2 by far more than 1e-3). With chains ≤ dim the fitted covariance is singular and the
direct formula itself is off by ~√ε: its ``d × d`` square root turns the d − chains + 1
zero eigenvalues, computed as ±1e-16, into ~1e-8 each; it is then held to 1e-7, and the
batched path to 1e-9 against the same formula computed another way (the singular values
of ``(X − x̄) S2^½ / √(n − 1)``, the symmetric root and an SVD: no Cholesky, no Gram).
"""

from __future__ import annotations

import numpy as np
import pytest

from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.evaluation.evaluate import evaluate, ground_truth
from starling.orchestrator.evaluation.metrics import GaussianTarget, gaussian_w2
from starling.orchestrator.planning.plan import plan_run

RTOL = 1e-9
SINGULAR_RTOL = 1e-7


def _direct(points: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> float:
    """W2 of the Gaussian fitted to ``points`` (n, d), by the textbook formula."""
    fitted = np.atleast_2d(np.cov(points.T, ddof=1)) if len(points) > 1 else np.zeros_like(cov)
    return gaussian_w2(points.mean(axis=0), fitted, mean, cov)


def _by_svd(points: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> float:
    """The same W2: ``tr (S2^½ S1 S2^½)^½`` as the sum of the singular values of
    ``(X − x̄) S2^½ / √(n − 1)``, exact for a singular ``S1`` too."""
    values, vectors = np.linalg.eigh(cov)
    root = (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T
    n = len(points)
    centred = (points - points.mean(axis=0)) / np.sqrt(max(n - 1, 1))
    cross = np.linalg.svd(centred @ root, compute_uv=False).sum() if n > 1 else 0.0
    squared = np.sum((points.mean(axis=0) - mean) ** 2) + np.sum(centred**2) + np.trace(cov)
    return float(np.sqrt(max(squared - 2.0 * cross, 0.0)))


def _check(got: np.ndarray, sets: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> None:
    """``got`` against both references, each at its tolerance (module docstring)."""
    np.testing.assert_allclose(got, [_by_svd(p, mean, cov) for p in sets], rtol=RTOL)
    singular = sets.shape[1] <= sets.shape[2]
    np.testing.assert_allclose(
        got, [_direct(p, mean, cov) for p in sets], rtol=SINGULAR_RTOL if singular else RTOL
    )


def _target(rng: np.random.Generator, d: int, rank: int | None = None):
    a = rng.standard_normal((d, rank or d))
    cov = a @ a.T / d + (0.0 if rank else 0.5) * np.eye(d)
    return rng.standard_normal(d), (cov + cov.T) / 2


@pytest.mark.parametrize(
    ("d", "chains"),
    [(2, 100), (3, 1), (3, 2), (40, 10), (80, 30), (80, 200), (120, 120), (257, 40), (300, 90)],
)
def test_batched_w2_equals_the_direct_formula(d, chains):
    rng = np.random.default_rng([d, chains])
    mean, cov = _target(rng, d)
    target = GaussianTarget(mean, cov)
    assert target.triangular  # positive definite: the Cholesky factor
    points = 0.7 * rng.standard_normal((4, chains, d)) @ rng.standard_normal((d, d)) + 1.5
    _check(target.w2(points), points, mean, cov)
    # The projection given, as the evaluation passes it: the same figures.
    _check(target.w2(points, target.project(points)), points, mean, cov)


def test_semidefinite_target_uses_the_symmetric_root():
    rng = np.random.default_rng(5)
    mean, cov = _target(rng, 70, rank=20)  # singular: Cholesky fails
    target = GaussianTarget(mean, cov)
    assert not target.triangular
    points = rng.standard_normal((3, 25, 70))
    _check(target.w2(points, target.project(points)), points, mean, cov)


def test_projection_is_the_product_with_the_factor():
    rng = np.random.default_rng(6)
    mean, cov = _target(rng, 301)  # halves 150 / 151, then 75 / 75 and 75 / 76: odd splits
    target = GaussianTarget(mean, cov)
    points = rng.standard_normal((2, 7, 301))
    np.testing.assert_allclose(target.project(points), points @ target.root, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(target.root @ target.root.T, cov, rtol=1e-10, atol=1e-12)


def _experiment(dim: int, chains: int, rounds: int, window: int):
    return parse_experiment(
        {
            "name": "w2-batched",
            "algorithm": "d-sgld",
            "hyperparameters": {"eta": 1e-3},
            "model": {"name": "linear_regression", "params": {"dim": dim, "prior_var": 10.0}},
            "data": {"source": "synthetic", "size": 60, "seed": 3},
            "topology": {"kind": "ring", "nodes": 3},
            "rounds": rounds,
            "chains": chains,
            "evaluation": {"window": window, "diagnostics": False},
        }
    )


@pytest.mark.parametrize(("dim", "chains", "window"), [(70, 12, 1), (70, 12, 3), (3, 50, 2)])
def test_evaluation_scores_every_set_as_the_direct_formula(dim, chains, window):
    """Every node's curve and final-window figure, the average's (from the nodes'
    projections), a node that diverged at round 3 and one that stopped after 4 rounds."""
    rounds = 6
    experiment = _experiment(dim, chains, rounds, window)
    truth = ground_truth(plan_run(experiment).evaluation)
    assert truth is not None
    rng = np.random.default_rng([dim, chains, window])
    samples = {n: truth.mean + rng.standard_normal((rounds, chains, dim)) for n in ("0", "1")}
    samples["2"] = truth.mean + rng.standard_normal((4, chains, dim))  # stopped early
    got = evaluate(plan_run(experiment).evaluation, samples)
    w2 = got.metrics["w2"]
    average = (samples["0"] + samples["1"]) / 2  # "2" did not finish: not in the average
    for name, values in (
        ("0", samples["0"]),
        ("1", samples["1"]),
        ("2", samples["2"]),
        ("average", average),
    ):
        _check(got.curves[name], values, truth.mean, truth.cov)
        figure = w2["average"] if name == "average" else w2["per_node"][name]
        _check(np.array([figure]), values[-window:].reshape(1, -1, dim), truth.mean, truth.cov)

    samples["1"] = samples["1"].copy()
    samples["1"][3, 0, 0] = np.inf  # round 3 left the floats: no W2 there, nor for the average
    got = evaluate(plan_run(experiment).evaluation, samples)
    assert got.metrics["diverged"] == {"1": 3}
    assert np.isnan(got.curves["1"][3]) and np.isnan(got.curves["average"][3])
    in_window = rounds - window <= 3
    for name, values in (("1", samples["1"]), ("average", (samples["0"] + samples["1"]) / 2)):
        scored = [t for t in range(rounds) if t != 3]  # the other rounds: scored as before
        _check(got.curves[name][scored], values[scored], truth.mean, truth.cov)
        found = got.metrics["w2"]
        figure = found["average"] if name == "average" else found["per_node"]["1"]
        if in_window:
            assert figure is None
        else:
            pooled = values[-window:].reshape(1, -1, dim)
            _check(np.array([figure]), pooled, truth.mean, truth.cov)


def test_samples_far_beyond_the_posteriors_scale_count_as_diverged():
    """Below 1e150 but a million posterior scales away (a step too large for the curvature
    grows the chains geometrically): diverged from the first such round, with no W2 and no
    consensus, instead of a complete run with a W2 of 1e12. Just inside the bound, as a slow
    chain far from the posterior could never be, still scored."""
    from starling.orchestrator.evaluation.evaluate import divergence_bound

    experiment = _experiment(3, 20, 6, 2)
    truth = ground_truth(plan_run(experiment).evaluation)
    assert truth is not None
    bound = divergence_bound(truth)
    scale = np.max(np.abs(truth.mean)) + np.max(np.sqrt(np.diag(truth.cov))) + 1.0
    assert bound == pytest.approx(1e6 * scale)
    rng = np.random.default_rng(4)
    samples = {n: truth.mean + rng.standard_normal((6, 20, 3)) for n in ("0", "1")}
    samples["1"] = samples["1"] * np.array([1, 1, 1, 1, 1e12, 1e13])[:, None, None]
    got = evaluate(plan_run(experiment).evaluation, samples)
    assert got.metrics["diverged"] == {"1": 4}
    assert got.metrics["w2"]["per_node"]["1"] is None and got.metrics["consensus_error"] is None
    assert np.isnan(got.curves["1"][4:]).all() and np.isfinite(got.curves["1"][:4]).all()
    assert got.metrics["w2"]["per_node"]["0"] is not None

    samples["1"][4:] = 0.5 * bound  # far, but within the bound: scored, not diverged
    assert "diverged" not in evaluate(plan_run(experiment).evaluation, samples).metrics


def test_a_runaway_run_exits_3_not_complete(tmp_path, capsys):
    """D-SGLD with η = 1 on a ring of 3 (the posterior's std is 0.5): its samples reach
    1e80 in 300 rounds, never 1e150; the run used to end complete, exit 0, W2 1e81."""
    from starling.orchestrator.cli.main import main

    path = tmp_path / "runaway.yaml"
    path.write_text(
        "name: runaway\nalgorithm: d-sgld\nhyperparameters: {eta: 1.0}\n"
        "model: {name: linear_regression, params: {dim: 2}}\n"
        "data: {source: synthetic, size: 20, seed: 1}\n"
        "topology: {kind: ring, nodes: 3}\nrounds: 300\nchains: 10\nseed: 1\n"
    )
    assert main(["simulate", str(path), "--out", str(tmp_path / "out")]) == 3
    assert "diverged at round" in capsys.readouterr().out
