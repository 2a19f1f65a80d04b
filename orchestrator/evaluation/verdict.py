"""A verdict for every node and for the run: ``converged``, ``not converged`` or ``diverged``.

A node's verdict is read on its draws after burn-in (``evaluation.burn_in``, default the
second half of the run: the window ESS and R-hat are computed on, so the two agree). A node
**diverged** when its samples left the floats or escaped the posterior's scale
(:mod:`starling.orchestrator.evaluation.evaluate`). Otherwise it **converged** when every
check below holds, and **did not converge** when any fails; each failure is a reason, in
words, in ``metrics.json`` (``verdict.per_node.<id>.reasons``) and in ``summary.txt``:

* **R-hat** (rank-normalised split R-hat, the larger of bulk and folded, worst coordinate;
  ArviZ's, :mod:`starling.orchestrator.evaluation.diagnostics`) at most :func:`rhat_limit`.
  Vehtari, Gelman, Simpson, Carpenter and Bürkner (2021), *Rank-normalization, folding, and
  localization: an improved R-hat for assessing convergence of MCMC*, Bayesian Analysis
  16(2), recommend R-hat < 1.01 with four chains and an ESS above 400. At stationarity
  split R-hat over ``m`` half-chains is ``R̂² ≈ 1 + m / ESS`` (Vats and Knudson 2021,
  *Revisiting the Gelman–Rubin diagnostic*, Statistical Science 36(4)): with four chains
  (``m`` = 8) and ESS 400 that is 1.00995, their 1.01. Starling runs many short chains
  (100 chains of 50 draws is [000]'s design), where a stationary run sits well above 1.01
  (the quickstart: 1.08 after 100 rounds, 1.01 only after 1,000): its limit keeps the same
  relation, ``sqrt(1 + 2C / 400)`` for ``C`` chains, never below 1.01 and never above 1.1,
  the older limit (Gelman et al., *Bayesian Data Analysis*, 3rd ed. 2013, §11.4) past which
  chains plainly disagree however many there are. With one chain there is no R-hat (ArviZ
  gives none); the stationarity check below then stands in for it.
* **ESS**: bulk and tail ESS (worst coordinate) at least :data:`ESS_MIN` = 400, the ESS
  Vehtari et al. (2021) ask for before R-hat and the MC errors of quantiles are reliable.
* **Stationarity** over the window: its first and second halves agree within their Monte
  Carlo errors, in the mean and in the variance of every diagnosed coordinate
  (:func:`stationarity`). A node's chains are independent, so each chain's change between
  the halves is one independent draw of it, and their mean over ``C`` chains has an exact
  Student-t interval with ``C − 1`` degrees of freedom (with one chain: batch means). A
  change counts when it is beyond the Bonferroni-corrected t at family-wise level
  :data:`ALPHA` = 1 % over every node, coordinate and moment tested (so a stationary run is
  flagged at most 1 % of the time) **and** it moves the mean by at least :data:`DRIFT_SD`
  = 0.1 of the coordinate's sd or the variance by 20 % (so a many-chain run is not flagged
  for a change too small to matter: a tenth of an sd is R-hat 1.01's between-chain spread,
  ``sqrt(0.02)`` sd, to a factor 1.4).
* **Independent chains**: no chain repeats another draw for draw over the window
  (:func:`distinct_chains`). ESS, R-hat and the stationarity test all take a node's chains
  for independent draws; copies of one chain (a sampler that seeds every chain alike) pass
  them with an ESS as many times too large as there are copies, so they are counted here.
* **Error**, where the exact posterior is known: the node's W2 (the Gaussian fitted to its
  final-window draws against the posterior) below the posterior's own scale ``sqrt(tr Σ)``
  — the W2 of a point mass at the posterior mean, a sampler that samples nothing. A W2
  within three sd of the estimator's floor (:mod:`starling.orchestrator.evaluation.w2_error`:
  what exact draws score at the same count) is never counted against a node, since with
  very few chains the floor itself approaches the scale. The ratio ``W2 / sqrt(tr Σ)`` is
  reported whatever its value.

The run's verdict is the worst over the nodes that recorded every round (``diverged`` before
``not converged`` before ``converged``); a node killed for good before the end is judged on
what it recorded and listed, but does not decide the run, whose samples it no longer
contributes to. No node recorded every round: the worst over all of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from starling.orchestrator.evaluation.diagnostics import MIN_DRAWS
from starling.orchestrator.evaluation.student_t import t_quantile

__all__ = [
    "ALPHA",
    "CONVERGED",
    "DIVERGED",
    "DRIFT_SD",
    "ERROR_MAX",
    "ESS_MIN",
    "NOT_CONVERGED",
    "RHAT_CEILING",
    "RHAT_TARGET",
    "distinct_chains",
    "rhat_limit",
    "stationarity",
    "verdict_line",
    "verdict_section",
]

CONVERGED = "converged"
NOT_CONVERGED = "not converged"
DIVERGED = "diverged"
_RANK = {CONVERGED: 0, NOT_CONVERGED: 1, DIVERGED: 2}

RHAT_TARGET = 1.01
"""Vehtari et al. (2021)'s recommended limit (module docstring)."""
RHAT_CEILING = 1.1
"""The older limit (Gelman et al. 2013): R-hat's limit never exceeds it."""
ESS_MIN = 400.0
"""Bulk and tail ESS at least this (Vehtari et al. 2021)."""
ALPHA = 0.01
"""Family-wise level of the stationarity tests of one run."""
DRIFT_SD = 0.1
"""A drift of the mean smaller than this many sds (or of the variance smaller than twice
this, relative) is not counted, however significant."""
ERROR_MAX = 1.0
"""W2 in units of the posterior's scale ``sqrt(tr Σ)`` from which a node is not converged."""
_BATCHES = 10
"""Batches per half-window for one chain's batch-means errors."""


def rhat_limit(chains: int) -> float:
    """R-hat's limit for ``chains`` chains: ``sqrt(1 + 2C / ESS_MIN)`` within [1.01, 1.1]."""
    return float(min(RHAT_CEILING, max(RHAT_TARGET, math.sqrt(1.0 + 2.0 * chains / ESS_MIN))))


def _halves(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first and second halves of ``draws`` (chains, n, p); the middle draw of an odd
    window is left out."""
    half = draws.shape[1] // 2
    return draws[:, :half], draws[:, draws.shape[1] - half :]


def _change(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Per coordinate the mean change between the halves (chains, h, p), its standard
    error, and the degrees of freedom of the t that divides them."""
    chains, h, _ = first.shape
    if chains >= 2:
        per_chain = second.mean(axis=1) - first.mean(axis=1)  # (C, p): C independent draws
        return per_chain.mean(axis=0), per_chain.std(axis=0, ddof=1) / math.sqrt(chains), chains - 1
    batches = min(_BATCHES, h // 5)
    if batches < 2:
        return np.full(first.shape[-1], np.nan), np.full(first.shape[-1], np.nan), 0
    cut = batches * (h // batches)

    def means_and_se(part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        batch_means = part[0, -cut:].reshape(batches, -1, part.shape[-1]).mean(axis=1)
        return batch_means.mean(axis=0), batch_means.std(axis=0, ddof=1) / math.sqrt(batches)

    m1, s1 = means_and_se(first)
    m2, s2 = means_and_se(second)
    return m2 - m1, np.sqrt(s1**2 + s2**2), 2 * (batches - 1)


def stationarity(draws: np.ndarray) -> dict:
    """How far apart the two halves of the window ``draws`` (chains, n, p) are.

    For each coordinate, the change of its mean and of its variance (``(x − x̄)²``, with
    ``x̄`` the window's mean) between the halves: ``t`` (the change over its standard
    error, the worst over coordinates and both moments), ``dof`` (its degrees of freedom),
    ``tests`` (how many t's), ``mean_shift_sd`` and ``variance_change`` (the largest
    change of a mean, in sds, and of a variance, relative). No test (``t`` None) with one
    chain of fewer than 20 draws.
    """
    draws = np.asarray(draws, dtype=float)
    centred = draws - draws.mean(axis=(0, 1), keepdims=True)
    var = np.mean(centred**2, axis=(0, 1))
    sd = np.sqrt(var)
    first, second = _halves(draws)
    d_mean, se_mean, dof = _change(first, second)
    c1, c2 = _halves(centred**2)
    d_var, se_var, _ = _change(c1, c2)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(np.concatenate([d_mean / se_mean, d_var / se_var]))
        # A coordinate that did not move at all (ADMM's collapsed chains): 0/0, no change.
        t = np.where(np.concatenate([d_mean, d_var]) == 0.0, 0.0, t)
        shift = np.where(sd > 0, np.abs(d_mean) / sd, np.where(d_mean == 0, 0.0, np.inf))
        change = np.where(var > 0, np.abs(d_var) / var, np.where(d_var == 0, 0.0, np.inf))
    if dof == 0:
        return {"t": None, "dof": 0, "tests": 0, "mean_shift_sd": None, "variance_change": None}
    t = np.where(np.isnan(t), np.inf, t)
    # Only changes large enough to matter are tested against the critical value.
    mattering = np.concatenate([shift >= DRIFT_SD, change >= 2 * DRIFT_SD])
    return {
        "t": float(np.max(t)),
        "t_mattering": float(np.max(t[mattering], initial=0.0)),
        "dof": int(dof),
        "tests": int(t.size),
        "mean_shift_sd": float(np.max(shift)),
        "variance_change": float(np.max(change)),
    }


def _critical(dof: int, tests: int) -> float:
    """The two-sided Bonferroni critical t at family-wise level :data:`ALPHA`."""
    return t_quantile(1.0 - ALPHA / (2.0 * max(tests, 1)), max(dof, 1))


def distinct_chains(window: np.ndarray) -> int:
    """How many of the chains of ``window`` (rounds, chains, p) differ from one another:
    chains equal draw for draw (``==``, so ``-0.0`` equals ``0.0``) count once.

    Chains are grouped by their first draw, and only chains of one group are compared whole,
    so independent chains of continuous draws (no two first draws alike) cost one sort of
    ``chains × p`` values and no loop over the chains."""
    chains = window.shape[1]
    if chains < 2 or window.shape[0] == 0:
        return chains
    _, groups, sizes = np.unique(window[0], axis=0, return_inverse=True, return_counts=True)
    groups = np.asarray(groups).reshape(-1)
    count = int(np.count_nonzero(sizes == 1))  # a chain alone in its group is distinct
    for group in np.flatnonzero(sizes > 1):
        kept: list[np.ndarray] = []  # one chain of each kind seen in this group
        for member in np.flatnonzero(groups == group):
            chain = window[:, member]
            if not any(np.array_equal(chain, other) for other in kept):
                kept.append(chain)
        count += len(kept)
    return count


def _node_checks(
    entry: Mapping | None,
    drift: dict | None,
    error: tuple[float | None, float | None],
    chain_counts: tuple[int, int],
    critical: float | None,
    draws: tuple[int, int],
) -> tuple[list[str], dict]:
    """The reasons a node did not converge (none: it did) and the figures checked;
    ``chain_counts``: how many chains it has, and how many of them are distinct
    (:func:`distinct_chains`); ``draws``: how many draws each chain has after burn-in, and
    the round burn-in ends at."""
    reasons: list[str] = []
    figures: dict = {}
    if entry is None or drift is None:
        kept, start = draws
        return [
            f"{kept} draw{'' if kept == 1 else 's'} per chain after burn-in (from round "
            f"{start}): too few to judge, {MIN_DRAWS} needed (run longer, or lower "
            "evaluation.burn_in)"
        ], figures
    chains, distinct = chain_counts
    rhat, bulk, tail = entry.get("rhat_max"), entry.get("ess_bulk_min"), entry.get("ess_tail_min")
    figures.update(rhat=rhat, ess_bulk=bulk, ess_tail=tail)
    limit = rhat_limit(chains)
    if chains >= 2:
        if rhat is None:
            reasons.append("R-hat undefined (chains constant: they sample nothing)")
        elif rhat > limit:
            reasons.append(
                f"R-hat {rhat:.3f} > {limit:.3f}: the chains have not mixed (run longer, or "
                "burn in more)"
            )
    if distinct < chains:
        figures["distinct_chains"] = distinct
        copied = (
            f"all {chains} chains are one chain's draws"
            if distinct == 1
            else f"{distinct} distinct chains of {chains}, the others repeating them draw for draw"
        )
        reasons.append(
            f"{copied}: ESS and R-hat count the copies as independent draws (each chain "
            "needs its own seed)"
        )
    for name, value in (("bulk", bulk), ("tail", tail)):
        if value is None or value < ESS_MIN:
            shown = "undefined" if value is None else f"{value:.0f}"
            reasons.append(f"{name} ESS {shown} < {ESS_MIN:.0f}: too few effective draws")
    figures.update(
        drift_t=drift["t"],
        mean_shift_sd=drift["mean_shift_sd"],
        variance_change=drift["variance_change"],
    )
    if drift["t"] is None or critical is None:
        reasons.append("one chain of under 20 draws: stationarity not testable")
    elif drift["t_mattering"] > critical:
        reasons.append(
            f"drifts over the window: halves differ by t = {drift['t_mattering']:.1f} > "
            f"{critical:.1f} (mean moved {drift['mean_shift_sd']:.2f} sd, variance "
            f"{100 * drift['variance_change']:.0f} %)"
        )
    ratio, floor_bound = error
    if ratio is not None:
        figures["w2_over_scale"] = ratio
        if ratio >= ERROR_MAX and not (floor_bound is not None and ratio <= floor_bound):
            reasons.append(
                f"W2 {ratio:.2f} × the posterior's scale sqrt(tr Σ): no closer than its mean"
            )
    return reasons, figures


def verdict_section(
    samples: Mapping[str, np.ndarray],
    diagnostics: Mapping | None,
    rounds: int,
    burn_in: int | None,
    diverged: Mapping[str, int],
    w2: Mapping | None = None,
    scale: float | None = None,
) -> dict:
    """``metrics.json``'s ``verdict``: the run's, every node's with its reasons, and the
    criteria used. ``diagnostics``: the section of
    :func:`~starling.orchestrator.evaluation.diagnostics.diagnostics_section` on the same
    window; ``w2``: ``metrics.json``'s ``w2`` (with ``floor``) and ``scale`` the posterior's
    ``sqrt(tr Σ)``, where the posterior is known."""
    start = rounds // 2 if burn_in is None else burn_in
    diagnosed = (diagnostics or {}).get("per_node") or {}
    params = (diagnostics or {}).get("params", "all")
    drifts: dict[str, dict | None] = {}
    distinct: dict[str, int] = {}
    for node, values in samples.items():
        if node in diverged or values.shape[0] - start < MIN_DRAWS:
            drifts[node] = None
            continue
        window = values[start:]
        if params != "all":
            window = window[..., list(params)]
        drifts[node] = stationarity(np.transpose(window, (1, 0, 2)))
        distinct[node] = distinct_chains(window)
    tested = [d for d in drifts.values() if d is not None and d["t"] is not None]
    tests = sum(d["tests"] for d in tested)
    dof = min((d["dof"] for d in tested), default=1)
    critical = _critical(dof, tests) if tested else None
    per_node_w2 = (w2 or {}).get("per_node") or {}
    floor = (w2 or {}).get("floor") or {}
    per_node: dict[str, dict] = {}
    for node, values in samples.items():
        chains = int(values.shape[1]) if values.ndim == 3 else 1
        if node in diverged:
            per_node[node] = {
                "verdict": DIVERGED,
                "reasons": [f"samples left the posterior's scale at round {diverged[node]}"],
            }
            continue
        error: tuple[float | None, float | None] = (None, None)
        value = per_node_w2.get(node)
        if scale and value is not None:
            mean, sd = floor.get("mean"), floor.get("sd")
            floor_bound = (mean + 3.0 * sd) / scale if mean is not None and sd is not None else None
            error = (value / scale, floor_bound)
        reasons, figures = _node_checks(
            diagnosed.get(node),
            drifts[node],
            error,
            (chains, distinct.get(node, chains)),
            critical,
            (max(int(values.shape[0]) - start, 0), start),
        )
        if values.shape[0] < rounds:
            figures["recorded_rounds"] = int(values.shape[0])
        per_node[node] = {
            "verdict": NOT_CONVERGED if reasons else CONVERGED,
            "reasons": reasons,
            **figures,
        }
    deciding = [n for n, v in samples.items() if v.shape[0] >= rounds] or list(samples)
    worst = max((per_node[n]["verdict"] for n in deciding), key=_RANK.__getitem__, default=None)
    chains = max((int(v.shape[1]) for v in samples.values() if v.ndim == 3), default=1)
    return {
        "run": worst or NOT_CONVERGED,
        "reasons": _run_reasons(per_node, deciding),
        "criteria": {
            "window": [start, rounds - 1],
            "rhat_max": rhat_limit(chains),
            "ess_min": ESS_MIN,
            "distinct_chains": chains > 1,
            "stationarity": {
                "alpha": ALPHA,
                "critical_t": critical,
                "tests": tests,
                "drift_sd": DRIFT_SD,
            },
            **({"w2_over_scale_max": ERROR_MAX} if scale else {}),
        },
        "per_node": per_node,
    }


def _run_reasons(per_node: Mapping[str, dict], deciding: list[str], shown: int = 3) -> list[str]:
    """The first reason of each node that did not converge (at most ``shown`` nodes, then a
    count): the nodes that decide the run first, the worst verdict (diverged) before the
    others, so that the first line explains the run's verdict; nodes that stopped early
    last."""
    lines = []
    failing = sorted(
        (n for n in per_node if per_node[n]["reasons"]),
        key=lambda n: (n not in deciding, -_RANK[per_node[n]["verdict"]]),
    )  # stable: nodes of one kind stay in node order
    for node in failing[:shown]:
        first = per_node[node]["reasons"][0]
        more = len(per_node[node]["reasons"]) - 1
        stopped = "" if node in deciding else " (stopped early: does not decide the run)"
        also = f" (+{more} more reason{'s' if more > 1 else ''})" if more else ""
        lines.append(f"node {node}: {first}{also}{stopped}")
    if len(failing) > shown:
        lines.append(f"and {len(failing) - shown} more node(s)")
    return lines


def verdict_line(verdict: Mapping | None, count_others: bool = True) -> str | None:
    """``verdict: <run's verdict>`` and its first reason, one line (None without one);
    ``count_others``: say how many more reasons there are (the summary lists them below)."""
    if not verdict:
        return None
    reasons = verdict.get("reasons") or []
    more = len(reasons) - 1
    why = f" — {reasons[0]}" if reasons else ""
    if count_others and more > 0:
        why += f"; {more} more line{'s' if more > 1 else ''} of reasons in metrics.json"
    return f"verdict: {verdict.get('run')}{why}"
