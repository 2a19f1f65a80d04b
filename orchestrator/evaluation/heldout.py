"""The held-out rows a classifier's predictive metrics are scored on (``evaluation.test``).

Read by the orchestrator only from what the experiment declares, never from a node:

* ``test: {path: FILE}`` — the user's own test file (a9a.t), read whole here;
* ``test: {split: f, seed: s}`` with file data — the rows :func:`starling.node.split.held_out`
  picks from ``data.path``; the nodes drop the same rows from their shards
  (:func:`~starling.orchestrator.planning.data_plan.held_out_split` puts ``f`` and ``s`` in
  every node's data spec), so no held-out row is ever trained on;
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
from starling.orchestrator.planning.plan import EvaluationPlan

__all__ = ["held_out_data"]

_SYNTHETIC_STREAM = 0x7E57


def held_out_data(plan: EvaluationPlan, model) -> tuple[Dataset, dict] | None:
    """The held-out rows and a description of them for ``metrics.json``; None without a
    ``test`` section."""
    test = plan.evaluation.test
    if test is None:
        return None
    if test.path:
        table = load_file(test.path, test.format, model, field="evaluation.test")
        return table, {"path": test.path, "rows": len(table)}
    d = plan.data
    split = float(test.split or 0.0)  # not None: the parser allows only path or split
    described = {"split": split, "seed": int(test.seed)}
    if d.source == "file":
        full = load_file(d.path, d.format, model)
        mask = held_out(len(full), split, int(test.seed))
        table = Dataset(X=full.X[mask], y=full.y[mask])
    else:
        specs = plan.data_specs.values()
        train = d.total or sum(s.shard_size(k) for s in specs for k in s.held_shards())
        count = max(1, int(round(split / (1.0 - split) * train)))
        seq = np.random.SeedSequence([d.seed, test.seed, _SYNTHETIC_STREAM])
        table = model.synthesize(np.random.default_rng(seq), count)
    return table, {**described, "rows": len(table)}
