"""What the evaluation reports beside W2: predictive metrics on held-out data (classifiers,
:mod:`orchestrator.predictive`), transport distances to reference samples (posteriors with
no closed form, :mod:`orchestrator.transport`) and ArviZ's ESS and R-hat per node
(:mod:`orchestrator.diagnostics`).

Each is computed once per evaluation on the samples already in memory; the heavy libraries
(POT, ArviZ) are imported only when their figure is asked for, so ``starling run`` starts as
fast as before.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from node.models import build_model
from node.spec import DataSpec
from orchestrator.experiment import Experiment
from orchestrator.heldout import held_out_data

__all__ = ["score_beyond_w2"]


def score_beyond_w2(
    experiment: Experiment,
    series: Mapping[str, np.ndarray],
    metrics: dict,
    tables: dict[str, list[dict]],
    node_data: Mapping[str, DataSpec] | None = None,
) -> None:
    """Add ``predictive`` (and its curve) to ``metrics`` and ``tables``.

    ``series``: ``"average"`` (the network-average iterate, when every node finished) and
    every node id -> samples (rounds, chains, d).
    """
    model = build_model(experiment.model)
    evaluation = experiment.evaluation
    test = held_out_data(experiment, model)
    if test is not None:
        from orchestrator.predictive import predictive_section

        section, rows = predictive_section(
            model, test, series, evaluation.window, evaluation.curve_points
        )
        metrics["predictive"] = section
        tables["predictive_curve"] = rows
