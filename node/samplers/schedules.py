"""Step-size schedules shared by the samplers.

A schedule maps the iteration counter ``t = 0, 1, 2, ...`` to a positive step. Two kinds
occur in the papers:

* constant steps (D-SGLD, D-SGHMC, ULA, SGLD, SGHMC),
* polynomial decay ``a / (b + t)^γ`` — push-sum Langevin ([002] §5.3: ``α_t = a/(b+t)^γ``,
  a9a uses ``0.008/(12+t)^0.45``) and D-ULA ([004] eq. 8 and 15:
  ``α_k = a/(k+1)^δ2``, ``β_k = b/(k+1)^δ1``, i.e. ``b = 1`` here; [000] §6.2 uses the offset
  ``b = 230``).

Schedules are frozen dataclasses: pure, hashable, cheap to call with a Python int.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Constant", "PolynomialDecay", "Schedule"]


class Schedule:
    """Base class: ``schedule(t) -> float`` for an integer ``t >= 0``."""

    def __call__(self, t: int) -> float:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True)
class Constant(Schedule):
    """The same step at every iteration."""

    value: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.value) and self.value > 0):
            raise ValueError(f"value: a step must be a positive finite number, got {self.value!r}")

    def __call__(self, t: int) -> float:
        return float(self.value)


@dataclass(frozen=True)
class PolynomialDecay(Schedule):
    """``a / (b + t)^gamma``.

    ``b > 0`` keeps the first step finite (``b = 1`` gives ``a/(t+1)^γ`` of [004] eq. 8);
    ``gamma = 0`` is a constant ``a``. ``gamma ∈ (1/2, 1]`` is the Robbins–Monro range in
    which Σ α_t = ∞ and Σ α_t² < ∞ — not enforced, since [002] and [000] use other values.
    """

    a: float
    b: float = 1.0
    gamma: float = 0.5

    def __post_init__(self) -> None:
        if not (math.isfinite(self.a) and self.a > 0):
            raise ValueError(f"a: must be a positive finite number, got {self.a!r}")
        if not (math.isfinite(self.b) and self.b > 0):
            raise ValueError(f"b: must be a positive finite number, got {self.b!r}")
        if not (math.isfinite(self.gamma) and self.gamma >= 0):
            raise ValueError(f"gamma: must be a non-negative finite number, got {self.gamma!r}")

    def __call__(self, t: int) -> float:
        if t < 0:
            raise ValueError(f"t: the iteration counter must be non-negative, got {t}")
        try:
            return float(self.a / (self.b + t) ** self.gamma)
        except OverflowError:  # (b + t)^gamma past the largest float: the step is below
            # a / 1.8e308, taken in logarithms (0.0 once that underflows) instead of a
            # node failing its round with OverflowError.
            return math.exp(math.log(self.a) - self.gamma * math.log(self.b + t))
