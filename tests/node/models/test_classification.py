"""Scores for classifiers on held-out data."""

from __future__ import annotations

import numpy as np
import pytest

from starling.node.models.classification import accuracy, binary_labels, log_loss, roc_auc
from starling.node.params import ConfigError


def test_roc_auc_equals_the_pairwise_count():
    rng = np.random.default_rng(0)
    labels = rng.random(300) < 0.3
    scores = np.round(rng.random(300) + 0.3 * labels, 1)  # rounding makes ties
    pos, neg = scores[labels], scores[~labels]
    brute = np.mean((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :]))
    assert roc_auc(scores, labels) == pytest.approx(brute, abs=1e-12)
    assert roc_auc(labels.astype(float), labels) == 1.0
    with pytest.raises(ValueError):
        roc_auc(scores, np.ones(300))


def test_accuracy_and_log_loss_per_sample():
    proba = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.4, 0.6], [0.7, 0.3]]])  # (S=2, n=2, K=2)
    labels = np.array([0, 1])
    np.testing.assert_allclose(accuracy(proba, labels), [1.0, 0.0])
    np.testing.assert_allclose(
        log_loss(proba, labels),
        [-(np.log(0.9) + np.log(0.8)) / 2, -(np.log(0.4) + np.log(0.3)) / 2],
    )


def test_binary_label_codings():
    np.testing.assert_array_equal(binary_labels(np.array([1.0, -1.0, 1.0])), [1, 0, 1])
    np.testing.assert_array_equal(binary_labels(np.array([0.0, 1.0])), [0, 1])
    for bad in ([-1.0, 0.0, 1.0], [2.0, 1.0]):
        with pytest.raises(ConfigError, match="data.path"):
            binary_labels(np.array(bad))
