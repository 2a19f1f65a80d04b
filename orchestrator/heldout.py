"""The held-out rows a classifier's predictive metrics are scored on (``evaluation.test``).

Read by the orchestrator only from what the experiment declares, never from a node:

* ``test: {path: FILE}`` — the user's own test file (a9a.t), read whole here;
* ``test: {split: f, seed: s}`` with file data — the rows :func:`starling.node.split.held_out`
  picks from ``data.path``; the nodes drop the same rows from their shards
  (:func:`held_out_split` puts ``f`` and ``s`` in every node's data spec), so no held-out
  row is ever trained on;
* ``test: {split: f, seed: s}`` with synthetic data — a fresh draw from the model's own
  generator on a stream of its own (no shard's), sized so the test rows are the fraction
  ``f`` of training plus test rows: ``round(f / (1 − f) · n)`` for the ``n`` points the
  nodes hold together. Held out by construction: no node ever draws them.

A split applies to the shared ``data.path``; a node's own file (``nodes[i].data.path``) is
not split.
"""

from __future__ import annotations

import numpy as np

from starling.node.data.files import load_file
from starling.node.data.split import held_out
from starling.node.models.base import Dataset
from starling.node.params import ConfigError
from starling.orchestrator.experiment import Experiment

__all__ = ["check_test", "held_out_data", "held_out_split"]

_SYNTHETIC_STREAM = 0x7E57


def check_test(experiment_test, data, model) -> None:
    """One-line errors for an ``evaluation.test`` that cannot work (at parse time)."""
    if experiment_test is None:
        return
    if not hasattr(model, "predict_proba"):
        raise ConfigError(
            f"evaluation.test: model {type(model).__name__} is not a classifier "
            "(predictive metrics need logistic_regression or mlp)"
        )
    if bool(experiment_test.path) == (experiment_test.split is not None):
        raise ConfigError("evaluation.test: give exactly one of path (a test file) or split")
    if experiment_test.split is not None and data.source not in ("synthetic", "file"):
        raise ConfigError(
            f"evaluation.test.split: needs data.source synthetic or file, not {data.source!r} "
            "(the orchestrator cannot split data the nodes bring); give a test path"
        )


def held_out_split(experiment: Experiment) -> dict:
    """The ``test_fraction`` / ``test_seed`` of every node's DataSpec (file data only)."""
    test = experiment.evaluation.test
    if test is None or test.split is None or experiment.data.source != "file":
        return {}
    return {"test_fraction": float(test.split), "test_seed": int(test.seed)}


def held_out_data(experiment: Experiment, model) -> tuple[Dataset, dict] | None:
    """The held-out rows and a description of them for ``metrics.json``; None without a
    ``test`` section."""
    test = experiment.evaluation.test
    if test is None:
        return None
    if test.path:
        table = load_file(test.path, test.format, model, field="evaluation.test")
        return table, {"path": test.path, "rows": len(table)}
    d = experiment.data
    split = float(test.split or 0.0)  # not None: check_test allows only path or split
    described = {"split": split, "seed": int(test.seed)}
    if d.source == "file":
        full = load_file(d.path, d.format, model)
        mask = held_out(len(full), split, int(test.seed))
        table = Dataset(X=full.X[mask], y=full.y[mask])
    else:
        from starling.orchestrator.data_plan import data_specs  # it imports this module

        specs = data_specs(experiment).values()
        train = d.total or sum(s.shard_size(k) for s in specs for k in s.held_shards())
        count = max(1, int(round(split / (1.0 - split) * train)))
        seq = np.random.SeedSequence([d.seed, test.seed, _SYNTHETIC_STREAM])
        table = model.synthesize(np.random.default_rng(seq), count)
    return table, {**described, "rows": len(table)}
