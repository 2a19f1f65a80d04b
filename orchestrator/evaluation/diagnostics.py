"""MCMC diagnostics per node from ArviZ: bulk and tail ESS and rank-normalised split R-hat.

Computed once per evaluation, never per round, on each node's draws after burn-in
(``evaluation.burn_in`` rounds, default the first half): a node's chains are ArviZ's chains,
its rounds the draws, its coordinates the parameters (Vehtari et al. 2021, as ArviZ
implements them; nothing here re-derives them). ArviZ loops over parameters in Python, so a
high-dimensional model is diagnosed on at most :data:`MAX_PARAMS` evenly spaced coordinates
(their indices are in ``params``); per-coordinate lists are written only up to
:data:`LISTED` coordinates, the worst values always.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np

__all__ = [
    "LISTED",
    "MAX_PARAMS",
    "MIN_DRAWS",
    "chain_diagnostics",
    "diagnostics_section",
    "import_arviz",
]

MAX_PARAMS = 32
LISTED = 10
MIN_DRAWS = 4
"""Fewer draws after burn-in than this: no diagnostics (split R-hat halves each chain)."""


def import_arviz():
    """ArviZ (seconds to import: only when needed), without the FutureWarning about its
    coming refactor that it prints once a day per user cache: every run in a fresh
    container (the compose testbed's orchestrator) printed those five lines amid the
    summary, about a library the user never called."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing", category=FutureWarning)
        import arviz

    return arviz


def chain_diagnostics(draws: np.ndarray) -> dict[str, np.ndarray]:
    """``ess_bulk``, ``ess_tail`` and ``rhat`` per parameter of ``draws`` (chains, draws,
    params), from ArviZ; ``rhat`` is NaN (reported as no value) with a single chain."""
    az = import_arviz()

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        # "More chains than draws": our layout is (chain, draw, param) on purpose; a run of
        # many short chains is the papers' design, not a transposed array. A coordinate whose
        # chains are constant (ADMM collapses to a point) divides 0 by 0: its NaN is reported
        # as no value, without a warning.
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        draws = np.asarray(draws, dtype=float)
        dataset = az.convert_to_dataset(draws)
        found = {
            "ess_bulk": np.asarray(az.ess(dataset, method="bulk")["x"].values, dtype=float),
            "ess_tail": np.asarray(az.ess(dataset, method="tail")["x"].values, dtype=float),
        }
        # R-hat compares chains: ArviZ refuses one (a log line, then NaN); so do we, quietly.
        found["rhat"] = (
            np.asarray(az.rhat(dataset)["x"].values, dtype=float)
            if draws.shape[0] >= 2
            else np.full(draws.shape[-1], np.nan)
        )
        return found


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _worst(values: np.ndarray, pick) -> float | None:
    """The smallest / largest finite value (a constant chain has no ESS or R-hat: NaN)."""
    known = values[np.isfinite(values)]
    return float(pick(known)) if known.size else None


def diagnostics_section(samples: Mapping[str, np.ndarray], burn_in: int | None) -> dict | None:
    """``metrics.json``'s ``diagnostics``: per node the worst ESS and R-hat (and the lists
    for small models); None when no node has :data:`MIN_DRAWS` draws after burn-in."""
    if not samples:
        return None
    rounds = max(s.shape[0] for s in samples.values())
    start = rounds // 2 if burn_in is None else burn_in
    dim = next(iter(samples.values())).shape[-1]
    params = np.unique(np.linspace(0, dim - 1, min(dim, MAX_PARAMS)).round().astype(np.int64))
    per_node: dict[str, dict | None] = {}
    for node, values in samples.items():
        draws = values[start:, :, params]
        if draws.shape[0] < MIN_DRAWS or not np.all(np.isfinite(draws)):
            per_node[node] = None
            continue
        found = chain_diagnostics(np.transpose(draws, (1, 0, 2)))
        entry: dict = {
            "ess_bulk_min": _worst(found["ess_bulk"], np.min),
            "ess_tail_min": _worst(found["ess_tail"], np.min),
            "rhat_max": _worst(found["rhat"], np.max),
        }
        if len(params) <= LISTED:
            entry.update({k: [_finite(v) for v in found[k]] for k in found})
        per_node[node] = entry
    if all(v is None for v in per_node.values()):
        return None
    return {
        "burn_in": start,
        "draws_from": start,
        "rounds": rounds,
        "params": params.tolist() if len(params) < dim else "all",
        "per_node": per_node,
    }
