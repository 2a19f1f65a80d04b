"""The default proximal operator: ``argmin_x f(x) + ||x - v||² / (2 step)`` per chain.

D-ADMMS needs this sub-problem solved at every round for models without a closed form
(ALGORITHMS.md, D-ADMMS; [000] eq. 40). The sub-problem is ``φ(x) = f(x) + ||x||²/(2 step)
- xᵀv/step`` (the constant ``||v||²/(2 step)`` is dropped: with the "no-edge" step of 1e12
and ``v = -p·step`` it would swamp ``f`` in floating point). It is strongly convex when
``f`` is convex, and for every chain it is solved by

* damped Newton with an Armijo backtracking line search when the potential has a
  ``hessian`` (exact second-order steps: quadratic convergence near the solution);
* proximal Newton when ``f`` has an ``l1_weight · ||x||_1`` term (Laplace prior; Lee, Sun
  & Saunders 2014): the quadratic model plus the L1 term is minimised exactly by
  feature-sign search, then the same line search on ``φ + c||x||_1``;
* L-BFGS (scipy) chain by chain otherwise (the MLP, the Gaussian mixture). On a
  non-convex ``f`` it returns a local minimiser near the warm start.

Stopping rule, for every chain: ``||r(x)|| ≤ tol · (1 + ||x - v|| / step)`` where ``r`` is
the gradient of the sub-problem (the minimum-norm subgradient with an L1 term). At the
solution ``∇f(x) = -(x - v)/step``, so the right-hand side scales with the terms that cancel
and the test is attainable in floating point whatever the data size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = ["ProxInfo", "Smooth", "solve_prox", "subproblem_residual"]

_ARMIJO = 1e-4
_MAX_HALVINGS = 60
_LBFGS_RESTARTS = 4
_DAMPING = 1e-3


@dataclass(frozen=True)
class ProxInfo:
    """How a proximal solve ended: Newton (or L-BFGS) iterations, worst residual, success."""

    iterations: int
    residual: float
    converged: bool
    method: str


class Smooth(Protocol):
    """What the solver asks of ``f``: a :class:`~starling.node.models.base.LocalPotential`
    meets it (the potential's default ``prox`` calls :func:`solve_prox` on itself)."""

    @property
    def l1_weight(self) -> float:
        """``c`` of a non-smooth term ``c ||x||_1`` included in ``value`` and ``grad``."""
        ...

    @property
    def has_hessian(self) -> bool: ...

    @property
    def prox_tol(self) -> float: ...

    @property
    def prox_max_iter(self) -> int: ...

    def value(self, x: np.ndarray) -> np.ndarray: ...

    def grad(self, x: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray: ...

    def value_and_grad(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def hessian(self, x: np.ndarray) -> np.ndarray: ...


class _Subproblem:
    """``φ`` and its pieces for a subset of chains (``rows``)."""

    def __init__(self, potential: Smooth, v: np.ndarray, step: float):
        self.potential = potential
        self.inv_step = 1.0 / step
        self.v_over_step = v / step
        self.c = float(potential.l1_weight)

    def l1(self, x: np.ndarray) -> np.ndarray:
        return self.c * np.sum(np.abs(x), axis=1)

    def smooth_value(self, x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return self._value_from(self.potential.value(x), x, rows)

    def smooth_grad(self, x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return self._grad_from(self.potential.grad(x), x, rows)

    def smooth_value_and_grad(
        self, x: np.ndarray, rows: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`smooth_value` and :meth:`smooth_grad` at once (the same floats), through
        the potential's ``value_and_grad``."""
        f, g = self.potential.value_and_grad(x)
        return self._value_from(f, x, rows), self._grad_from(g, x, rows)

    def _value_from(self, f: np.ndarray, x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``φ`` without its L1 term, given ``f(x)``."""
        return (
            f
            - self.l1(x)
            + 0.5 * self.inv_step * np.sum(x * x, axis=1)
            - np.sum(x * self.v_over_step[rows], axis=1)
        )

    def _grad_from(self, g: np.ndarray, x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``∇φ`` without its L1 term, given ``∇f(x)``."""
        if self.c:
            g = g - self.c * np.sign(x)
        return g + self.inv_step * x - self.v_over_step[rows]

    def scale(self, x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return 1.0 + np.linalg.norm(self.inv_step * x - self.v_over_step[rows], axis=1)

    def residual(self, x: np.ndarray, g: np.ndarray) -> np.ndarray:
        """Norm of the minimum-norm (sub)gradient of ``φ + c||x||_1`` per chain."""
        if not self.c:
            return np.linalg.norm(g, axis=1)
        at_zero = x == 0.0
        r = np.where(
            at_zero,
            np.sign(g) * np.maximum(np.abs(g) - self.c, 0.0),
            g + self.c * np.sign(x),
        )
        return np.linalg.norm(r, axis=1)


def subproblem_residual(potential: Smooth, x: np.ndarray, v: np.ndarray, step: float) -> np.ndarray:
    """The relative residual ``||r(x)|| / (1 + ||x - v||/step)`` per chain (0 at the solution)."""
    sub = _Subproblem(potential, v, step)
    rows = np.arange(x.shape[0])
    g = sub.smooth_grad(x, rows)
    return sub.residual(x, g) / sub.scale(x, rows)


def solve_prox(
    potential: Smooth, v: np.ndarray, step: float, warm_start: np.ndarray
) -> tuple[np.ndarray, ProxInfo]:
    """Solve the prox sub-problem for every chain; see the module docstring."""
    if not step > 0:
        raise ValueError(f"prox step must be positive, got {step}")
    v = np.asarray(v, dtype=float)
    x = np.array(warm_start, dtype=float, copy=True)
    if x.shape != v.shape:
        x = np.broadcast_to(x, v.shape).copy()
    sub = _Subproblem(potential, v, step)
    if potential.has_hessian:
        return _newton(sub, x, potential.prox_tol, potential.prox_max_iter)
    if sub.c:
        raise NotImplementedError(
            f"{type(potential).__name__}: an L1 term needs a Hessian for the proximal Newton solve"
        )
    return _lbfgs(sub, x, potential.prox_tol, 20 * potential.prox_max_iter)


def _newton(
    sub: _Subproblem, x: np.ndarray, tol: float, max_iter: int
) -> tuple[np.ndarray, ProxInfo]:
    chains, d = x.shape
    active = np.arange(chains)
    relative = np.full(chains, np.inf)
    eye = np.eye(d)
    iterations = 0
    while active.size and iterations <= max_iter:
        xa = x[active]
        g = sub.smooth_grad(xa, active)
        relative[active] = sub.residual(xa, g) / sub.scale(xa, active)
        keep = relative[active] > tol
        if iterations == max_iter or not keep.any():
            break
        active, xa, g = active[keep], xa[keep], g[keep]
        iterations += 1
        # Levenberg–Marquardt damping μ = 10⁻³||r||: bounded steps along nearly flat
        # directions (a small prior share with the no-edge step of 1e12), fading at the
        # solution so the final convergence stays quadratic. On an a9a shard with a Laplace
        # prior, 10⁻³ needed 9 iterations where μ = ||r|| needed 28.
        damping = _DAMPING * sub.residual(xa, g)
        H = sub.potential.hessian(xa) + (sub.inv_step + damping)[:, None, None] * eye
        if sub.c:
            z = _l1_quadratic_minimiser(H, g, xa, sub.c)
            direction = z - xa
            decrease = np.sum(g * direction, axis=1) + sub.l1(z) - sub.l1(xa)
        else:
            direction = -_solve_spd(H, g)
            decrease = np.sum(g * direction, axis=1)
        moved = _line_search(sub, xa, active, direction, decrease)
        stalled = np.all(moved == xa, axis=1)
        x[active] = moved
        # A chain whose line search cannot decrease φ is at the solution to machine
        # precision (or the model is broken): stop iterating it, its residual says which.
        if stalled.any():
            g_stalled = sub.smooth_grad(moved[stalled], active[stalled])
            relative[active[stalled]] = sub.residual(moved[stalled], g_stalled) / sub.scale(
                moved[stalled], active[stalled]
            )
            active = active[~stalled]
    worst = float(np.max(relative)) if chains else 0.0
    method = "proximal-newton" if sub.c else "newton"
    return x, ProxInfo(iterations, worst, worst <= tol, method)


def _solve_spd(H: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``H⁻¹ g`` per chain; a chain whose ``H`` is not positive definite gets ``H + μI``."""
    try:
        np.linalg.cholesky(H)
    except np.linalg.LinAlgError:
        H = H.copy()
        eye = np.eye(H.shape[-1])
        for k in range(H.shape[0]):
            mu = 1e-8 * (1.0 + np.max(np.abs(np.diag(H[k]))))
            while True:
                try:
                    np.linalg.cholesky(H[k])
                    break
                except np.linalg.LinAlgError:
                    H[k] = H[k] + mu * eye
                    mu *= 10.0
    return np.linalg.solve(H, g[..., None])[..., 0]


def _l1_quadratic_minimiser(H: np.ndarray, g: np.ndarray, x: np.ndarray, c: float) -> np.ndarray:
    """``argmin_z gᵀ(z-x) + ½(z-x)ᵀH(z-x) + c||z||_1`` per chain (``H`` positive definite).

    Rewritten as ``½zᵀHz - bᵀz + c||z||_1`` with ``b = Hx - g`` and solved exactly by
    feature-sign search, warm-started from the sign pattern of ``x`` (the previous
    proximal-Newton iterate, whose pattern is usually already the right one).
    """
    b = np.einsum("cjk,ck->cj", H, x) - g
    return np.stack([_feature_sign(H[k], b[k], c, x[k]) for k in range(x.shape[0])])


def _feature_sign(H: np.ndarray, b: np.ndarray, c: float, start: np.ndarray) -> np.ndarray:
    """Feature-sign search (Lee, Battle, Raina & Ng 2007) for ``½zᵀHz - bᵀz + c||z||_1``.

    Keeps an active set with signs ``θ``; solves the quadratic on it with ``c θ`` fixed,
    moves to the best of that solution and the points where a coefficient crosses zero
    (the objective is convex along the segment and smooth between them), drops zeros,
    and activates the zero coefficient that most violates ``|(Hz - b)_j| ≤ c``. Each move
    lowers the objective, so no active set repeats: the loop ends at the exact minimiser.
    """
    d = b.size
    z = start.copy()
    theta = np.sign(z)

    def objective(w: np.ndarray) -> float:
        return float(0.5 * w @ H @ w - b @ w + c * np.abs(w).sum())

    slack = 1e-12 * (c + np.max(np.abs(b)) + 1.0)
    for _ in range(20 * d + 20):
        active = np.flatnonzero(theta)
        if active.size:
            target = np.zeros(d)
            sub_H = H[np.ix_(active, active)]
            target[active] = np.linalg.solve(sub_H, b[active] - c * theta[active])
            delta = target - z
            crossing = active[(np.sign(target[active]) != theta[active]) & (delta[active] != 0)]
            steps = [1.0] + [t for t in (-z[crossing] / delta[crossing]) if 0.0 < t < 1.0]
            candidates = []
            for t in steps:
                point = z + t * delta
                if t < 1.0:
                    # The coefficient that reaches zero at t is set exactly to zero.
                    point[crossing[np.isclose(-z[crossing] / delta[crossing], t)]] = 0.0
                candidates.append(point)
            values = [objective(p) for p in candidates]
            best = int(np.argmin(values))
            z = candidates[best]
            theta = np.sign(z)
            if best != 0 or np.any(np.sign(target[active]) != np.sign(z[active])):
                continue  # stopped at a zero crossing: re-solve on the smaller active set
        gradient = H @ z - b
        violation = np.where(theta == 0, np.abs(gradient) - c, -np.inf)
        j = int(np.argmax(violation))
        if violation[j] <= slack:
            return z
        theta[j] = -np.sign(gradient[j])
    return z


def _line_search(
    sub: _Subproblem,
    x: np.ndarray,
    rows: np.ndarray,
    direction: np.ndarray,
    decrease: np.ndarray,
) -> np.ndarray:
    """Armijo backtracking on ``φ + c||x||_1``, per chain; returns the accepted points."""
    base = sub.smooth_value(x, rows) + sub.l1(x)
    result = x.copy()
    # A predicted decrease below the rounding of φ cannot be checked by comparing values:
    # that close to the solution the (quadratically convergent) full step is taken.
    negligible = (decrease < 0) & (-decrease <= 1e-13 * (1.0 + np.abs(base)))
    result[negligible] = x[negligible] + direction[negligible]
    pending = np.flatnonzero((decrease < 0) & ~negligible)
    t = 1.0
    for _ in range(_MAX_HALVINGS):
        if not pending.size:
            break
        trial = x[pending] + t * direction[pending]
        value = sub.smooth_value(trial, rows[pending]) + sub.l1(trial)
        ok = value <= base[pending] + _ARMIJO * t * decrease[pending]
        result[pending[ok]] = trial[ok]
        pending = pending[~ok]
        t *= 0.5
    return result


def _lbfgs(
    sub: _Subproblem, x: np.ndarray, tol: float, max_iter: int
) -> tuple[np.ndarray, ProxInfo]:
    # Imported here, not with the module: every model imports this one (through its base),
    # and a node whose potential has a Hessian never needs scipy.
    from scipy.optimize import minimize

    chains = x.shape[0]
    relative = np.zeros(chains)
    iterations = 0
    for k in range(chains):
        row = np.array([k])

        def objective(z: np.ndarray, row: np.ndarray = row) -> tuple[float, np.ndarray]:
            value, grad = sub.smooth_value_and_grad(z[None, :], row)
            return float(value[0]), grad[0]

        used = 0
        # gtol bounds the largest gradient component, so ||r|| ≤ √d·gtol meets the rule
        # above at the current scale; the scale moves with x, hence a few restarts.
        # ftol = 0 leaves the decision to the gradient test.
        for _ in range(_LBFGS_RESTARTS):
            scale = float(sub.scale(x[row], row)[0])
            gtol = tol * scale / np.sqrt(x.shape[1])
            result = minimize(
                objective,
                x[k],
                jac=True,
                method="L-BFGS-B",
                options={"maxiter": max_iter - used, "gtol": gtol, "ftol": 0.0, "maxcor": 20},
            )
            x[k] = result.x
            used += int(result.nit)
            g = sub.smooth_grad(x[row], row)
            relative[k] = sub.residual(x[row], g)[0] / sub.scale(x[row], row)[0]
            if relative[k] <= tol or used >= max_iter or result.nit == 0:
                break
        iterations = max(iterations, used)
    unsettled = np.flatnonzero(relative > tol)
    if unsettled.size:
        x[unsettled], relative[unsettled] = _polish(sub, x[unsettled], unsettled, tol)
    worst = float(np.max(relative)) if chains else 0.0
    return x, ProxInfo(iterations, worst, worst <= tol, "l-bfgs")


def _polish(
    sub: _Subproblem, x: np.ndarray, rows: np.ndarray, tol: float, steps: int = 10
) -> tuple[np.ndarray, np.ndarray]:
    """Newton–CG steps that need gradients only, for the last digits L-BFGS cannot reach.

    L-BFGS's line search compares values of ``φ``; once the decrease is below the rounding
    of ``φ`` it stops, which for a relative gradient tolerance of 1e-8 can be too early.
    Here Hessian-vector products are central differences of the gradient and a step is
    kept when it shrinks the residual, so no function value is needed.
    """
    x = x.copy()
    g = sub.smooth_grad(x, rows)
    relative = sub.residual(x, g) / sub.scale(x, rows)
    for _ in range(steps):
        todo = relative > tol
        if not todo.any():
            break
        idx = np.flatnonzero(todo)
        direction = _cg_direction(sub, x[idx], rows[idx], g[idx])
        trial = x[idx] + direction
        g_trial = sub.smooth_grad(trial, rows[idx])
        r_trial = sub.residual(trial, g_trial) / sub.scale(trial, rows[idx])
        better = r_trial < relative[idx]
        if not better.any():
            break
        keep = idx[better]
        x[keep], g[keep], relative[keep] = trial[better], g_trial[better], r_trial[better]
    return x, relative


def _cg_direction(
    sub: _Subproblem, x: np.ndarray, rows: np.ndarray, g: np.ndarray, max_iter: int = 50
) -> np.ndarray:
    """Approximately solve ``∇²φ · p = -g`` per chain by conjugate gradients (truncated at
    negative curvature), with ``∇²φ · q`` from central differences of ``∇φ``."""

    def hess_vec(q: np.ndarray) -> np.ndarray:
        norm = np.linalg.norm(q, axis=1, keepdims=True)
        norm[norm == 0] = 1.0
        h = 1e-5 * (1.0 + np.linalg.norm(x, axis=1, keepdims=True)) / norm
        return (sub.smooth_grad(x + h * q, rows) - sub.smooth_grad(x - h * q, rows)) / (2 * h)

    p = np.zeros_like(x)
    r = -g.copy()
    d = r.copy()
    rr = np.sum(r * r, axis=1)
    target = 1e-6 * rr
    live = rr > 0
    for _ in range(max_iter):
        if not live.any():
            break
        Hd = hess_vec(d)
        curvature = np.sum(d * Hd, axis=1)
        live &= curvature > 0
        alpha = np.where(live, rr / np.where(curvature > 0, curvature, 1.0), 0.0)
        p = p + alpha[:, None] * d
        r = r - alpha[:, None] * Hd
        rr_new = np.sum(r * r, axis=1)
        live &= rr_new > target
        beta = np.where(live, rr_new / np.where(rr > 0, rr, 1.0), 0.0)
        d = r + beta[:, None] * d
        rr = rr_new
    return np.where(np.any(p != 0, axis=1, keepdims=True), p, -g)
