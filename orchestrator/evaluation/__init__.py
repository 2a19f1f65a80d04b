"""Scores of collected samples: W2 to the ground truth, distances, diagnostics, predictive metrics,
HPD."""
