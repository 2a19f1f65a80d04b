"""Held-out predictive metrics of a classifier's samples: accuracy, AUC and log-loss.

Two readings of a set of posterior samples ``x_1..x_S`` (the papers use both):

* **posterior-predictive** — score ``p̂(y | z) = (1/S) Σ_s p(y | z, x_s)``, the Bayesian
  model average ([002] §5.4 reports its AUC, [004] §5.2 its accuracy);
* **per sample** — score each ``x_s`` on its own and average the scores (the accuracy of an
  agent's iterate, [000] §6.3.3 Fig. 6).

Final figures pool the last ``evaluation.window`` rounds of every chain; the curve scores
the chains at each of at most ``evaluation.curve_points`` evenly spaced rounds (the last
always among them). Samples are scored a block at a time (:data:`_BLOCK_BYTES` of
probabilities), so memory stays bounded whatever the number of samples or test rows.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from starling.node.models.classification import accuracy, log_loss, roc_auc

__all__ = ["curve_rounds", "predictive_section", "score_samples"]

_BLOCK_BYTES = 64 * 1024 * 1024

FIELDS = (
    "predictive_accuracy",
    "predictive_auc",
    "predictive_log_loss",
    "sample_accuracy",
    "sample_accuracy_std",
    "sample_auc",
    "sample_log_loss",
)


def score_samples(model, samples: np.ndarray, X: np.ndarray, labels: np.ndarray) -> dict:
    """Every figure of :data:`FIELDS` for ``samples`` (S, d) on rows ``X`` with class
    indices ``labels``; the AUCs only for two classes with both present (else absent)."""
    samples = np.atleast_2d(np.asarray(samples, dtype=float))
    classes = int(model.num_classes)
    binary = classes == 2 and 0 < int(labels.sum()) < labels.size
    per_row = max(1, len(X) * classes * 8)
    step = max(1, _BLOCK_BYTES // per_row)
    total = np.zeros((len(X), classes))
    acc: list[np.ndarray] = []
    loss: list[np.ndarray] = []
    auc: list[float] = []
    for start in range(0, len(samples), step):
        proba = model.predict_proba(samples[start : start + step], X)  # (s, n, K)
        total += proba.sum(axis=0)
        acc.append(accuracy(proba, labels))
        loss.append(log_loss(proba, labels))
        if binary:
            auc.extend(roc_auc(p[:, 1], labels) for p in proba)
    predictive = total / len(samples)
    per_sample = np.concatenate(acc)
    scores = {
        "predictive_accuracy": float(accuracy(predictive, labels)),
        "predictive_log_loss": float(log_loss(predictive, labels)),
        "sample_accuracy": float(per_sample.mean()),
        "sample_accuracy_std": float(per_sample.std()),
        "sample_log_loss": float(np.concatenate(loss).mean()),
    }
    if binary:
        scores["predictive_auc"] = roc_auc(predictive[:, 1], labels)
        scores["sample_auc"] = float(np.mean(auc))
    return {name: scores[name] for name in FIELDS if name in scores}


def curve_rounds(rounds: int, points: int) -> np.ndarray:
    """At most ``points`` round indices spread evenly over ``0..rounds-1``, the last included."""
    if rounds <= 0:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.linspace(0, rounds - 1, min(points, rounds)).round().astype(np.int64))


def _finite(values: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(values)))


def predictive_section(
    model,
    test: tuple,
    series: Mapping[str, np.ndarray],
    window: int,
    curve_points: int,
) -> tuple[dict, list[dict]]:
    """``metrics.json``'s ``predictive`` section and the curve's rows.

    ``test`` is ``(Dataset, description)`` from
    :func:`starling.orchestrator.evaluation.heldout.held_out_data`;
    ``series`` maps ``"average"`` (the network-average iterate) and every node id to its
    samples (rounds, chains, d). A series that left the floats scores None.
    """
    table, described = test
    labels = model.class_labels(table.y)
    X = np.asarray(table.X, dtype=float)
    final: dict[str, dict | None] = {}
    rows: list[dict] = []
    for name, values in series.items():
        pooled = values[-window:].reshape(-1, values.shape[-1])
        final[name] = score_samples(model, pooled, X, labels) if _finite(pooled) else None
        for t in curve_rounds(values.shape[0], curve_points):
            if not _finite(values[t]):
                continue
            rows.append(
                {"round": int(t), "node": name, **score_samples(model, values[t], X, labels)}
            )
    nodes = {n: v for n, v in final.items() if n != "average"}
    section = {
        "test": described,
        "window": window,
        "average": final.get("average"),
        "per_node": nodes,
        "node_mean": _mean(nodes),
    }
    return section, rows


def _mean(scores: Mapping[str, dict | None]) -> dict | None:
    """Per figure, the mean over nodes; None if any node has none (diverged)."""
    known: list[dict] = [s for s in scores.values() if s is not None]
    if not known or len(known) < len(scores):
        return None
    shared = [k for k in known[0] if all(k in s for s in known)]
    return {k: float(np.mean([s[k] for s in known])) for k in shared}
