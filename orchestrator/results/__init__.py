"""The results folder: the run's account, metrics.json, samples, summary, manifest, and a study's
tables."""
