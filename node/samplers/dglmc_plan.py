"""DG-LMC's hyperparameter rules ([003] §3.2): each worker's ρ_i, γ_i, and the plan of N_i.

Split from :mod:`starling.node.samplers.dglmc` (which documents the rules in full); pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from starling.node.models.base import LocalPotential
from starling.node.params import ConfigError

if TYPE_CHECKING:
    from starling.node.samplers.dglmc import DGLMCParams

__all__ = [
    "GUIDELINE",
    "MAX_DEFAULT_STEPS",
    "LOCAL_STEPS",
    "PROFILE_SIZE",
    "RHO",
    "STEP_TIME",
    "ceil_steps",
    "plan_local_steps",
    "worker_constants",
]

MAX_DEFAULT_STEPS = 100_000
"""The most LMC steps a round may take by §3.2.2's default ``ρ_i/(γ_i(ρ_i M_i + 1))``
(4 with the default γ_i): a γ_i given far below its bound makes that millions of steps a
round, a run that looks hung. Beyond it the worker refuses and asks for ``local_steps``."""

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
