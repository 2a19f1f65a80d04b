"""The integrators every sampler calls: one update of one paper equation each.

Pure numpy, the way BlackJAX writes its kernels: a kernel takes the current arrays, the
force the caller computed and the step, draws its noise from the generator it is passed,
and returns new arrays (it never mutates its inputs). The programs in this package only
gather their inbox into a starting point and a force, then call one of these.

**Order of the random draws.** The caller computes its gradient first (a mini-batch
gradient draws its rows from the same generator), then the kernel draws its Gaussian
noise. The floating-point expressions are written in the order the samplers have always
used, so a sampler's samples are bit-for-bit those of its earlier versions and of the other
transport (``tests/node/test_runtime.py``).

* :func:`langevin_step` — overdamped Langevin, Euler–Maruyama ([004] eq. 5/13; the
  Langevin half of [000] eq. 22, [002] eq. 5, [003] eq. 4 and [004] eq. 8).
* :func:`sghmc_position`, :func:`sghmc_momentum` — SGHMC's underdamped step ([001] eq. 4,
  and eq. 6 with the elastic force); :func:`friction_velocity` — [000] eq. 23's form.
* :func:`mala_log_ratio`, :func:`metropolis_accept`, :func:`mala_step` — the Metropolis
  correction of MALA (Roberts & Tweedie 1996).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = [
    "friction_velocity",
    "langevin_step",
    "mala_log_ratio",
    "mala_step",
    "metropolis_accept",
    "sghmc_momentum",
    "sghmc_position",
]


def langevin_step(
    base: np.ndarray,
    gradient: np.ndarray,
    step: float,
    rng: np.random.Generator,
    scale: float = 1.0,
) -> np.ndarray:
    """One overdamped Langevin step from ``base``: ``base − h s ∇ + √(2h) √s ξ``, ξ ~ N(0, I).

    ``base`` is where the step starts: the iterate itself for ULA ([004] eq. 13), the gossip
    average Σ_j S_ij x_j for D-SGLD ([000] eq. 22), push-sum's W_i ([002] eq. 5), D-ULA's
    ``x_i − β_k Σ_j (x_i − x_j)`` ([004] eq. 8) and DG-LMC's ``(1 − γ/ρ) u + (γ/ρ) θ``
    ([003] eq. 4). ``gradient`` is ∇f at the point the sampler's equation names.

    ``scale`` s multiplies the drift and the noise variance: D-ULA's N, which steps on
    N f_i with noise N(0, N I) so that the network average follows ULA ([004] eq. 8, 16).
    """
    noise = rng.standard_normal(np.shape(base))
    moved: np.ndarray
    if scale != 1.0:
        moved = base - step * scale * gradient + np.sqrt(2.0 * step) * (np.sqrt(scale) * noise)
    else:
        moved = base - step * gradient + np.sqrt(2.0 * step) * noise
    return moved


def sghmc_position(x: np.ndarray, momentum: np.ndarray, eps: float, mass: float) -> np.ndarray:
    """SGHMC's position update ``θ ← θ + ε M⁻¹ p`` ([001] eq. 4; [000] eq. 24 with M = 1 and
    the gossip average in place of θ)."""
    return x + (eps / mass) * momentum


def sghmc_momentum(
    momentum: np.ndarray,
    force: np.ndarray,
    eps: float,
    friction: float,
    mass: float,
    rng: np.random.Generator,
    noise_var: float | None = None,
) -> np.ndarray:
    """SGHMC's momentum update ``p ← p − ε F − ε V M⁻¹ p + N(0, σ²)`` ([001] eq. 4; eq. 6 for
    EC-SGHMC, where F adds the spring α(θ − c) and the centre uses friction C).

    ``force`` F is ∇Ũ at the freshly moved position (symplectic Euler, Chen et al. 2014,
    Algorithm 2). ``noise_var`` σ² defaults to 2εV, the fluctuation–dissipation pair of the
    friction V whose invariant law is π(θ) N(p; 0, M); EC-SGHMC passes its own variants.
    """
    variance = 2.0 * eps * friction if noise_var is None else noise_var
    noise = rng.standard_normal(np.shape(momentum))
    moved: np.ndarray = (
        momentum - eps * force - (eps * friction / mass) * momentum + np.sqrt(variance) * noise
    )
    return moved


def friction_velocity(
    velocity: np.ndarray,
    gradient: np.ndarray,
    eta: float,
    gamma: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """D-SGHMC's velocity update ``v ← v − η (γ v + ∇f) + √(2γη) w`` ([000] eq. 23).

    The same underdamped step as :func:`sghmc_momentum` with M = 1, written with the friction
    inside the bracket as [000] does (its floating-point order is kept, so samples stay
    bit-identical across versions).
    """
    noise = rng.standard_normal(np.shape(velocity))
    moved: np.ndarray = (
        velocity - eta * (gamma * velocity + gradient) + np.sqrt(2.0 * gamma * eta) * noise
    )
    return moved


def mala_log_ratio(
    x: np.ndarray,
    y: np.ndarray,
    grad_x: np.ndarray,
    grad_y: np.ndarray,
    value_x: np.ndarray,
    value_y: np.ndarray,
    step: float,
) -> np.ndarray:
    """Per chain, ``log[π(y) q(x|y) / (π(x) q(y|x))]`` for the Langevin proposal
    ``q(y|x) ∝ exp(−‖y − x + h ∇F(x)‖² / (4h))`` (Roberts & Tweedie 1996), with
    ``π ∝ exp(−F)``; rows of ``x`` and ``y`` are chains."""
    forward = np.sum((y - x + step * grad_x) ** 2, axis=1) / (4.0 * step)
    backward = np.sum((x - y + step * grad_y) ** 2, axis=1) / (4.0 * step)
    ratio: np.ndarray = value_x - value_y - backward + forward
    return ratio


def metropolis_accept(
    x: np.ndarray, y: np.ndarray, log_ratio: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Accept each chain's proposal with probability ``min(1, exp(log_ratio))``.

    Returns the new rows and the boolean acceptance per chain. ``log u ≤ 0``, so a ratio
    ≥ 0 always accepts; a NaN ratio (overflow) always rejects.
    """
    accept = np.log(rng.random(x.shape[0])) < log_ratio
    return np.where(accept[:, None], y, x), accept


def mala_step(
    x: np.ndarray,
    step: float,
    value: Callable[[np.ndarray], np.ndarray],
    grad: Callable[[np.ndarray], np.ndarray],
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """One MALA move: the Langevin proposal ``y = x − h ∇F(x) + √(2h) w`` then the
    Metropolis correction. ``value`` is F per chain, ``grad`` its exact gradient."""
    grad_x = grad(x)
    y = langevin_step(x, grad_x, step, rng)
    log_ratio = mala_log_ratio(x, y, grad_x, grad(y), value(x), value(y), step)
    return metropolis_accept(x, y, log_ratio, rng)
