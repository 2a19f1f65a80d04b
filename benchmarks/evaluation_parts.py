"""Where an evaluation's time goes, and what scoring one point set costs alone.

:func:`timed_evaluation` runs the orchestrator's evaluation of collected samples
(:func:`starling.orchestrator.evaluation.evaluate.evaluate`) with its parts timed: the same
functions, wrapped by :func:`timed_calls` for the duration of the call and put back after.
The parts timed one after another are the exact posterior (computed on a second thread
while the first reads each round's extremes for the divergence checks, which its seconds
therefore include), the W2 curve with its final figures, and the scores beyond W2
(held-out, transport; none for a Gaussian model). What is left is the rest (the rest of
the divergence checks, consensus error, the network average, the verdict, and waiting for
the parts beside if they end last). Beside them, on threads of their own,
run the floor of the W2 estimator and the figures' standard errors (beside the curve) and
the diagnostics (ESS and R-hat, beside everything after the posterior): their seconds are
timed too but overlap the others' (:data:`BESIDE`).

:func:`one_set_ms` times one W2 of one node's round alone, on one thread: the unit the
curve is made of. Beside the sampler's own CPU for that node-round
(:func:`benchmarks.in_process.sampler_ms`), it says what the curve can cost at the
least: a round scored costs about one such set for every node and one for the network
average, and no schedule that keeps a point per doubling of the rounds scores fewer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["BESIDE", "PARTS", "one_set_ms", "timed_calls", "timed_evaluation"]

PARTS = {
    "ground_truth": "the exact posterior",
    "w2_scores": "the W2 curve and final figures",
    "score_beyond_w2": "held-out and transport scores",
}
"""The parts :func:`timed_evaluation` times one after another: a function of the evaluate
module -> what it computes."""
BESIDE = {
    "w2_floor": "the W2 estimator's floor, on a thread beside the curve",
    "bootstrap_se": "the figures' standard errors, after the floor on that thread",
    "diagnostics_section": "diagnostics (ESS, R-hat), on a thread of their own beside all",
}
"""The parts computed on another thread while the others run: timed, but not taken from
the rest."""


@contextmanager
def timed_calls(targets: list[tuple[object, str, str]], spent: dict) -> Iterator[None]:
    """While inside, every ``(module, name, key)`` of ``targets`` has ``module.name``
    replaced by the same function timed: its wall seconds are added to ``spent[key]``.
    The originals are put back on the way out, whatever happens."""
    originals = [(module, name, getattr(module, name)) for module, name, _key in targets]

    def timing(function: Callable, key: str) -> Callable:
        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[key] = spent.get(key, 0.0) + time.perf_counter() - began

        return timed

    for (module, name, original), (_m, _n, key) in zip(originals, targets, strict=True):
        setattr(module, name, timing(original, key))
    try:
        yield
    finally:
        for module, name, original in originals:
            setattr(module, name, original)


def timed_evaluation(plan, samples) -> dict:
    """``{"evaluate_s", "evaluate_scored", "evaluate_parts"}``: the evaluation of
    ``samples`` under ``plan`` (an EvaluationPlan), its rounds scored, and seconds per part
    (:data:`PARTS`, ``rest``, and :data:`BESIDE`)."""
    from starling.orchestrator.evaluation import evaluate as module

    parts = {name: 0.0 for name in [*PARTS, *BESIDE]}
    with timed_calls([(module, name, name) for name in parts], parts):
        began = time.perf_counter()
        scored = module.evaluate(plan, samples).metrics.get("w2", {})
        total = time.perf_counter() - began
    parts["rest"] = max(total - sum(parts[name] for name in PARTS), 0.0)
    return {
        "evaluate_s": total,
        "evaluate_scored": scored.get("rounds_scored"),
        "evaluate_parts": parts,
    }


def one_set_ms(plan, points, repeats: int = 3) -> float:
    """Milliseconds of one W2 of the point set ``points`` (chains, dim) to ``plan``'s exact
    posterior, projection included, on this thread: the best of ``repeats``."""
    from starling.orchestrator.evaluation.evaluate import ground_truth
    from starling.orchestrator.evaluation.metrics import GaussianTarget

    posterior = ground_truth(plan)
    if posterior is None:
        raise ValueError("one_set_ms needs a model with an exact posterior")
    target = GaussianTarget(posterior.mean, posterior.cov)
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        target.w2(points[None])
        best = min(best, time.perf_counter() - began)
    return 1e3 * best
