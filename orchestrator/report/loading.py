"""What a report reads from a results folder, memory bounded.

Everything comes from the folder's own files (:mod:`orchestrator.results` describes them):
``metrics.json``, ``experiment.yaml``, every ``*_curve.csv`` (a metric per round: one
column per node and ``average``) and ``samples/node-<id>.npz``. Samples are read one node
at a time and only what a figure needs is kept: the pooled last window, subsampled to
:data:`MAX_POINTS` draws, and the running sum that makes the network-average iterate.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

__all__ = ["MAX_POINTS", "Curve", "RunData", "load_run", "node_samples", "truth_of"]

MAX_POINTS = 1000
"""Draws shown per node in a scatter plot or histogram (a uniform subsample, seeded)."""


@dataclass
class Curve:
    """One metric per round: ``series`` maps "average" or a node id to its values."""

    name: str
    rounds: np.ndarray
    series: dict[str, np.ndarray]


@dataclass
class RunData:
    folder: Path
    metrics: dict[str, Any]
    experiment_text: str
    experiment: dict[str, Any]
    curves: list[Curve] = field(default_factory=list)
    sample_files: dict[str, Path] = field(default_factory=dict)

    @property
    def nodes(self) -> list[str]:
        """Node ids in the run's order (experiment order where the metrics give it)."""
        known = list((self.metrics.get("samples_per_node") or {}).keys())
        return known or list(self.sample_files)


def load_run(folder: Path) -> RunData:
    folder = Path(folder)
    try:
        metrics = json.loads((folder / "metrics.json").read_text())
    except FileNotFoundError:
        metrics = {}
    try:
        text = (folder / "experiment.yaml").read_text()
        experiment = yaml.safe_load(text) or {}
    except FileNotFoundError:
        text, experiment = "", {}
    files = {
        path.stem[len("node-") :]: path for path in sorted((folder / "samples").glob("node-*.npz"))
    }
    data = RunData(folder, metrics, text, experiment if isinstance(experiment, dict) else {})
    data.sample_files = files
    data.curves = [c for c in (_read_curve(p) for p in sorted(folder.glob("*_curve.csv"))) if c]
    return data


def _read_curve(path: Path) -> Curve | None:
    """A ``round,<series>...`` file (``node-<id>`` columns are node ids); None if empty."""
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    if len(rows) < 2 or not rows[0] or rows[0][0] != "round":
        return None
    names = [n[len("node-") :] if n.startswith("node-") else n for n in rows[0][1:]]
    table = np.array(
        [[float(v) if v not in ("", "None", "nan") else np.nan for v in r] for r in rows[1:]]
    )
    series = {name: table[:, k + 1] for k, name in enumerate(names)}
    return Curve(path.stem[: -len("_curve")], table[:, 0], series)


def node_samples(data: RunData) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(node, samples (rounds, chains, d), rounds) one node at a time."""
    for node in data.nodes:
        path = data.sample_files.get(node)
        if path is None:
            continue
        with np.load(path) as stored:
            values = np.asarray(stored["samples"], dtype=float)
            rounds = np.asarray(stored["rounds"]) if "rounds" in stored else np.arange(len(values))
        yield node, values, rounds


def subsample(points: np.ndarray, limit: int = MAX_POINTS, seed: int = 0) -> np.ndarray:
    """At most ``limit`` rows of ``points`` (n, d), uniformly without replacement, seeded."""
    if len(points) <= limit:
        return points
    pick = np.random.default_rng(seed).choice(len(points), size=limit, replace=False)
    return points[np.sort(pick)]


@dataclass(frozen=True)
class Truth:
    """The exact posterior N(mean, cov), or only its marginals when ``cov`` is diagonal
    from ``metrics.json`` (``exact`` False)."""

    mean: np.ndarray
    cov: np.ndarray
    exact: bool


def truth_of(data: RunData) -> Truth | None:
    """The exact posterior, recomputed from the experiment as the evaluation does
    (:func:`orchestrator.evaluation.ground_truth`); failing that, the marginals that
    ``metrics.json`` records."""
    try:
        from orchestrator.evaluation import ground_truth
        from orchestrator.experiment import parse_experiment

        posterior = ground_truth(parse_experiment(data.experiment))
        if posterior is not None:
            return Truth(np.asarray(posterior.mean), np.asarray(posterior.cov), True)
    except Exception:  # noqa: BLE001 - a report shows what it can; the run's own figures stay
        pass
    recorded = data.metrics.get("posterior") or {}
    if recorded.get("mean") and recorded.get("std"):
        std = np.asarray(recorded["std"], dtype=float)
        return Truth(np.asarray(recorded["mean"], dtype=float), np.diag(std**2), False)
    return None
