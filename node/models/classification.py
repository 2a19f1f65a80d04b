"""Scoring classifiers on held-out data, for evaluation code (orchestrator side).

A classifier model (logistic regression, the MLP) provides

* ``num_classes`` — ``K``;
* ``class_labels(y) -> int array`` — the file's raw targets (``±1``, ``0/1``, ``0..K-1``)
  as class indices ``0..K-1``, raising ConfigError on anything else;
* ``predict_proba(samples, X) -> (S, n, K)`` — ``p(class | X, x_s)`` for every posterior
  sample ``x_s`` (rows of ``samples``, shape (S, d)) and every row of ``X`` (raw features,
  as in the data file: the model adds its own intercept column).

Two uses: per-sample scores (the accuracy of each agent's iterate, [000] §6.3.3 Fig. 6) and
posterior-predictive scores from the average of the sampled probabilities ([002] §5.4 AUC,
[004] §5.2 accuracy). :func:`classification_scores` returns both.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from scipy.stats import rankdata

from starling.node.params import ConfigError

__all__ = [
    "accuracy",
    "binary_labels",
    "class_indices",
    "classification_scores",
    "log_loss",
    "roc_auc",
]


def binary_labels(y: np.ndarray) -> np.ndarray:
    """Targets ``±1`` or ``0/1`` as class indices 0/1 (``-1`` and ``0`` both mean class 0).

    A file mixing ``-1`` and ``0``, or holding any other value, is rejected: the coding is
    then ambiguous. The error names ``data.path`` because the labels come from the file.
    """
    y = np.asarray(y, dtype=float)
    values = set(np.unique(y).tolist())
    if not values <= {-1.0, 0.0, 1.0} or {-1.0, 0.0} <= values:
        shown = ", ".join(f"{v:g}" for v in sorted(values)[:5])
        raise ConfigError(f"data.path: binary labels must be ±1 or 0/1, found {shown}")
    return (y > 0).astype(np.int64)


def class_indices(y: np.ndarray, num_classes: int) -> np.ndarray:
    """Targets that are whole numbers ``0..K-1`` as integer class indices."""
    y = np.asarray(y, dtype=float)
    bad = (y != np.round(y)) | (y < 0) | (y >= num_classes)
    if bad.any():
        raise ConfigError(
            f"data.path: class labels must be integers 0..{num_classes - 1}, found {y[bad][0]:g}"
        )
    return y.astype(np.int64)


def accuracy(proba: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Fraction of rows whose most probable class is the label; ``proba`` is (..., n, K).

    Returns shape ``proba.shape[:-2]`` (a float for one (n, K) table).
    """
    predicted = np.argmax(proba, axis=-1)
    return np.mean(predicted == labels, axis=-1)


def log_loss(proba: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Mean negative log-probability of the true label, per leading index."""
    index = np.broadcast_to(np.asarray(labels, dtype=np.int64), proba.shape[:-1])
    picked = np.take_along_axis(proba, index[..., None], axis=-1)[..., 0]
    return -np.mean(np.log(np.clip(picked, 1e-300, None)), axis=-1)


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve of binary ``labels`` (0/1) ranked by ``scores``.

    The Mann–Whitney form: the probability that a random positive scores above a random
    negative, ties counting one half (average ranks).
    """
    labels = np.asarray(labels).astype(bool)
    positives = int(labels.sum())
    negatives = labels.size - positives
    if positives == 0 or negatives == 0:
        raise ValueError("roc_auc needs both classes among the labels")
    ranks = rankdata(scores)
    return float((ranks[labels].sum() - positives * (positives + 1) / 2) / (positives * negatives))


class Classifier(Protocol):
    """What :func:`classification_scores` needs of a classification model."""

    num_classes: int

    def class_labels(self, y: np.ndarray) -> np.ndarray: ...

    def predict_proba(self, samples: np.ndarray, X: np.ndarray) -> np.ndarray: ...


def classification_scores(
    model: Classifier, samples: np.ndarray, X: np.ndarray, y: np.ndarray
) -> dict[str, float]:
    """Accuracy (and AUC for two classes) of ``samples`` (S, d) on held-out rows ``X, y``.

    ``predictive_*`` use the posterior-predictive probabilities (mean over samples);
    ``sample_accuracy_*`` summarise the accuracy of the samples taken one by one.
    """
    labels = model.class_labels(y)
    proba = model.predict_proba(np.atleast_2d(samples), X)
    predictive = proba.mean(axis=0)
    per_sample = accuracy(proba, labels)
    scores = {
        "predictive_accuracy": float(accuracy(predictive, labels)),
        "predictive_log_loss": float(log_loss(predictive, labels)),
        "sample_accuracy_mean": float(per_sample.mean()),
        "sample_accuracy_std": float(per_sample.std()),
    }
    if model.num_classes == 2 and 0 < labels.sum() < labels.size:
        scores["predictive_auc"] = roc_auc(predictive[:, 1], labels)
    return scores
