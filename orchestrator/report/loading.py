"""What a report reads from a results folder, memory bounded.

Everything comes from the folder's own files (:mod:`starling.orchestrator.results.write` describes
them):
``metrics.json``, ``experiment.yaml``, every ``*_curve.csv`` (a metric per round: one
column per node and ``average``) and ``samples/node-<id>.npz``. Samples are read one node
at a time and only what a figure needs is kept: the pooled last window, subsampled to
:data:`MAX_POINTS` draws, and the running sum that makes the network-average iterate.
"""

from __future__ import annotations

import csv
import json
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from starling.node.params import ConfigError
from starling.node.yaml_input import load_yaml
from starling.orchestrator.report.metrics_types import METRICS, type_error

__all__ = [
    "MAX_POINTS",
    "Curve",
    "RunData",
    "load_run",
    "node_recipes",
    "node_samples",
    "read_metrics",
    "read_sample_file",
    "truth_of",
]

MAX_POINTS = 4000
"""Draws kept per node for a scatter plot or histogram (a uniform subsample, seeded)."""


@dataclass
class Curve:
    """One metric per round: ``series`` maps "average" or a node id to its values."""

    name: str
    rounds: np.ndarray
    series: dict[str, np.ndarray]
    source: str = ""
    """The CSV file it was read from."""
    spread: dict[str, np.ndarray] = field(default_factory=dict)
    """Series -> sd at each round, where the file gives one (a ``<metric>_std`` column)."""


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


def damaged(path: Path, what: str) -> ConfigError:
    """The one line for a results file that cannot be read as what it should be."""
    return ConfigError(f"results: {path}: {what}")


def read_metrics(folder: Path) -> dict[str, Any]:
    """``metrics.json`` of a results folder as a mapping, ``{}`` when there is none."""
    path = Path(folder) / "metrics.json"
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise damaged(path, f"unreadable ({exc.strerror or exc})") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise damaged(path, f"not valid JSON ({exc})") from None
    if not isinstance(metrics, dict):
        raise damaged(path, f"expected a JSON object, got {type(metrics).__name__}")
    # A hand-edited field of another type ("status": ["x"], "w2": {"average": "x"}) was a
    # traceback later, or a figure drawn from a string.
    error = type_error(metrics, METRICS)
    if error is not None:
        raise damaged(path, error)
    return metrics


def read_sample_file(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``samples`` (rounds, chains, d) and ``rounds`` of one ``samples/node-<id>.npz``; a
    file that is not such an archive is a ConfigError naming it."""
    try:
        with open(path, "rb") as handle:  # closed however np.load fails
            return _sample_arrays(path, np.load(handle, allow_pickle=False))
    except ConfigError:  # a ValueError too: already says what is wrong
        raise
    except OSError as exc:
        raise damaged(path, f"unreadable ({exc.strerror or exc})") from None
    except (ValueError, EOFError, zipfile.BadZipFile):  # not an archive: no zip, no npy magic
        raise damaged(path, "not an .npz archive of samples") from None


def _sample_arrays(path: Path, stored: Any) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(stored, np.lib.npyio.NpzFile):
        raise damaged(path, "not an .npz archive of samples")
    try:
        with stored:
            if "samples" not in stored.files:
                raise damaged(path, "holds no 'samples' array")
            values = np.asarray(stored["samples"], dtype=float)
            rounds = np.asarray(stored["rounds"]) if "rounds" in stored.files else None
    except ConfigError:
        raise
    except (OSError, ValueError, TypeError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise damaged(path, f"its samples cannot be read ({reason})") from None
    if values.ndim != 3:
        raise damaged(path, f"samples of shape {values.shape}, expected (rounds, chains, d)")
    return values, np.arange(len(values)) if rounds is None else rounds


def load_run(folder: Path) -> RunData:
    folder = Path(folder)
    metrics = read_metrics(folder)
    path = folder / "experiment.yaml"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        raise damaged(path, f"unreadable ({exc.strerror or exc})") from None
    except ValueError:  # not UTF-8
        raise damaged(path, "not a text file") from None
    try:
        experiment = (load_yaml(text, str(path)) if text else {}) or {}
    except ConfigError as exc:  # bounded like every file read (node/yaml_input.py)
        raise damaged(path, str(exc).removeprefix(f"{path}:").strip()) from None
    files = {
        path.stem[len("node-") :]: path for path in sorted((folder / "samples").glob("node-*.npz"))
    }
    data = RunData(folder, metrics, text, experiment if isinstance(experiment, dict) else {})
    data.sample_files = files
    curves = sorted(folder.glob("*_curve.csv"), key=lambda p: (p.name != "w2_curve.csv", p.name))
    data.curves = [c for path in curves for c in _read_curves(path)]
    return data


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return np.nan


def _pivot(body: list[list[str]], column: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Long rows (round, series, ...) -> the rounds and each series' values there."""
    by_series: dict[str, dict[float, float]] = {}
    for r in body:
        if len(r) > column:
            by_series.setdefault(r[1], {})[_number(r[0])] = _number(r[column])
    rounds = np.array(sorted({t for s in by_series.values() for t in s}))
    return rounds, {
        name: np.array([points.get(t, np.nan) for t in rounds])
        for name, points in by_series.items()
    }


def _read_curves(path: Path) -> list[Curve]:
    """The curves of a ``*_curve.csv`` in either layout the results use: wide,
    ``round,average,node-<id>...`` (one metric, a column per series), or long,
    ``round,node,<metric>...`` (a row per round and series, a column per metric)."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except OSError as exc:
        raise damaged(path, f"unreadable ({exc.strerror or exc})") from None
    except (ValueError, csv.Error):
        raise damaged(path, "not a CSV file") from None
    if len(rows) < 2 or not rows[0] or rows[0][0] != "round":
        return []
    header, body = rows[0], rows[1:]
    stem = path.stem[: -len("_curve")]
    if len(header) > 1 and header[1] == "node":
        columns = {name: k for k, name in enumerate(header) if k >= 2}
        curves = []
        for metric, k in columns.items():
            if metric.endswith("_std") and metric[: -len("_std")] in columns:
                continue  # the band of its metric
            rounds, series = _pivot(body, k)
            if not any(np.isfinite(v).any() for v in series.values()):
                continue
            curve = Curve(metric, rounds, series, source=path.name)
            if f"{metric}_std" in columns:
                curve.spread = _pivot(body, columns[f"{metric}_std"])[1]
            curves.append(curve)
        return curves
    names = [n[len("node-") :] if n.startswith("node-") else n for n in header[1:]]
    body = [r for r in body if r]
    if any(len(r) != len(header) for r in body):
        raise damaged(path, f"rows of other lengths than its header's {len(header)} columns")
    table = np.array([[_number(v) for v in r] for r in body])
    series = {name: table[:, k + 1] for k, name in enumerate(names)}
    return [Curve(stem, table[:, 0], series, source=path.name)]


def node_samples(data: RunData) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(node, samples (rounds, chains, d), rounds) one node at a time."""
    for node in data.nodes:
        path = data.sample_files.get(node)
        if path is None:
            continue
        values, rounds = read_sample_file(path)
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


def node_recipes(folder: Path) -> dict:
    """What nodes holding their own data (``data: {source: node}``, every compose and
    inventory run) said they hold, as the run saved it in ``start.json``
    (:mod:`starling.orchestrator.results.node_recipes`); {} for any other run or a damaged
    file."""
    from starling.orchestrator.results.node_recipes import load_node_data

    try:
        start = json.loads((Path(folder) / "start.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return load_node_data(start) if isinstance(start, dict) else {}


def truth_of(data: RunData) -> Truth | None:
    """The exact posterior, recomputed from the experiment as the evaluation does
    (:func:`starling.orchestrator.evaluation.evaluate.ground_truth`), from the recipes the
    nodes reported when they hold their own data (so a compose or inventory run gets the
    same bands and ellipses as a local one); failing that, the marginals that
    ``metrics.json`` records."""
    try:
        from starling.orchestrator.config.experiment import parse_experiment
        from starling.orchestrator.evaluation.evaluate import ground_truth
        from starling.orchestrator.planning.plan import plan_run

        plan = plan_run(parse_experiment(data.experiment))
        posterior = ground_truth(plan.evaluation, node_recipes(data.folder))
        if posterior is not None:
            return Truth(np.asarray(posterior.mean), np.asarray(posterior.cov), True)
    except Exception:  # noqa: BLE001 - a report shows what it can; the run's own figures stay
        pass
    recorded = data.metrics.get("posterior") or {}
    if recorded.get("mean") and recorded.get("std"):
        std = np.asarray(recorded["std"], dtype=float)
        return Truth(np.asarray(recorded["mean"], dtype=float), np.diag(std**2), False)
    return None
