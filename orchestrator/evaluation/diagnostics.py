"""MCMC diagnostics per node: bulk and tail ESS and rank-normalised split R-hat.

Computed once per evaluation, never per round, on each node's draws after burn-in
(``evaluation.burn_in`` rounds, default the first half): a node's chains are the chains,
its rounds the draws, its coordinates the parameters (Vehtari et al. 2021, computed by
:mod:`~starling.orchestrator.evaluation.chain_stats`, which gives ArviZ's figures). A
high-dimensional model is diagnosed on at most :data:`MAX_PARAMS` evenly spaced coordinates
(their indices are in ``params``); per-coordinate lists are written only up to
:data:`LISTED` coordinates, the worst values always.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from starling.orchestrator.evaluation import chain_stats

__all__ = [
    "LISTED",
    "MAX_PARAMS",
    "MIN_DRAWS",
    "chain_diagnostics",
    "diagnostics_section",
]

MAX_PARAMS = 32
LISTED = 10
MIN_DRAWS = 4
"""Fewer draws after burn-in than this: no diagnostics (split R-hat halves each chain)."""


def chain_diagnostics(draws: np.ndarray) -> dict[str, np.ndarray]:
    """``ess_bulk``, ``ess_tail`` and ``rhat`` per parameter of ``draws`` (chains, draws,
    params); ``rhat`` is NaN (reported as no value) with a single chain, and so is any
    figure of a coordinate whose chains are constant where it has none."""
    draws = np.asarray(draws, dtype=float)
    with np.errstate(all="ignore"):
        return chain_stats.diagnose(draws)


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _worst(values: np.ndarray, pick) -> float | None:
    """The smallest / largest finite value (a constant chain has no ESS or R-hat: NaN)."""
    known = values[np.isfinite(values)]
    return float(pick(known)) if known.size else None


def _diagnosed(draws: Mapping[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """:func:`chain_diagnostics` of every node's (chains, draws, params), nodes of one shape
    side by side in one call: every figure is a coordinate's own (its ranks, its chains'
    autocovariances), so a node's figures are those it gets alone, for one call's overhead
    instead of one per node. Equal to rounding, not always to the last bit: numpy may sum
    a wider array's chains in another order."""
    by_shape: dict[tuple[int, ...], list[str]] = {}
    for node, values in draws.items():
        by_shape.setdefault(values.shape, []).append(node)
    out: dict[str, dict[str, np.ndarray]] = {}
    for shape, nodes in by_shape.items():
        together = chain_diagnostics(np.concatenate([draws[n] for n in nodes], axis=2))
        for index, node in enumerate(nodes):
            columns = slice(index * shape[2], (index + 1) * shape[2])
            out[node] = {key: values[columns] for key, values in together.items()}
    return out


def diagnostics_section(samples: Mapping[str, np.ndarray], burn_in: int | None) -> dict | None:
    """``metrics.json``'s ``diagnostics``: per node the worst ESS and R-hat (and the lists
    for small models); None when no node has :data:`MIN_DRAWS` draws after burn-in."""
    if not samples:
        return None
    rounds = max(s.shape[0] for s in samples.values())
    start = rounds // 2 if burn_in is None else burn_in
    dim = next(iter(samples.values())).shape[-1]
    params = np.unique(np.linspace(0, dim - 1, min(dim, MAX_PARAMS)).round().astype(np.int64))
    kept = {}
    for node, values in samples.items():
        draws = values[start:, :, params]
        if draws.shape[0] >= MIN_DRAWS and np.all(np.isfinite(draws)):
            kept[node] = np.transpose(draws, (1, 0, 2))
    found_by_node = _diagnosed(kept)
    per_node: dict[str, dict | None] = {}
    for node in samples:
        found = found_by_node.get(node)
        if found is None:
            per_node[node] = None
            continue
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
