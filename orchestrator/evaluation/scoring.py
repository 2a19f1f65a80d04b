"""What the evaluation reports beside W2: predictive metrics on held-out data (classifiers,
:mod:`starling.orchestrator.evaluation.predictive`), transport distances to reference samples
(posteriors with no closed form, :mod:`starling.orchestrator.evaluation.optimal_transport`), and
[003] §5.2's HPD error with its level ``η_α`` taken from those reference samples
(:mod:`starling.orchestrator.evaluation.hpd`). The ESS and R-hat per node are computed
beside them and the W2 figures, on a thread of their own
(:func:`starling.orchestrator.evaluation.evaluate.evaluate`).

Each is computed once per evaluation on the samples already in memory; the heavy library
(POT) is imported only when its figure is asked for, so ``starling run`` starts as fast as
before, and the network average's every round is built only for a figure that reads them."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from starling.node.models import build_model
from starling.node.models.base import Dataset
from starling.orchestrator.evaluation.heldout import held_out_data
from starling.orchestrator.planning.plan import EvaluationPlan

__all__ = ["score_beyond_w2"]


def score_beyond_w2(
    plan: EvaluationPlan,
    series: Callable[[], Mapping[str, np.ndarray]],
    metrics: dict,
    tables: dict[str, list[dict]],
    shards: Callable[[], list[Dataset]],
) -> None:
    """Add ``predictive``, ``distances`` and ``hpd`` to ``metrics`` (and the curves to
    ``tables``) where they apply.

    ``series``: returns every node id -> samples (rounds, chains, d) and
    ``"average"`` (the network-average iterate, when a node finished), asked only by the
    figures that score the average; ``shards``: the data the nodes hold together, as the
    evaluation knows it (asked only when a reference is needed).
    """
    model = build_model(plan.model)
    evaluation = plan.evaluation
    test = held_out_data(plan, model)
    if test is not None:
        from starling.orchestrator.evaluation.predictive import predictive_section

        section, rows = predictive_section(
            model, test, series(), evaluation.window, evaluation.curve_points
        )
        metrics["predictive"] = section
        tables["predictive_curve"] = rows
    if evaluation.reference.method != "none":
        from starling.orchestrator.evaluation.reference import reference_samples

        reference = reference_samples(model, plan.model, shards(), evaluation.reference)
        if reference is not None:
            from starling.orchestrator.evaluation.distances import distance_section

            section, rows = distance_section(
                series(), reference, evaluation.window, evaluation.transport, plan.seed
            )
            metrics["distances"] = section
            tables["distance_curve"] = rows
            if evaluation.hpd is not None and not hasattr(model, "exact_posterior"):
                from starling.orchestrator.evaluation.hpd import hpd_section  # η from the reference

                metrics["hpd"], tables["hpd_curve"] = hpd_section(
                    model,
                    shards(),
                    None,
                    series(),
                    evaluation.window,
                    evaluation.hpd,
                    reference,
                    evaluation.curve_points,
                )
