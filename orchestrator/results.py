"""The results folder, a contract other tools read.

<out>/metrics.json           algorithm, rounds, w2 {average, per_node, ...}, run account
<out>/samples/node-<id>.npz  ``samples`` (rounds, chains, d) and ``rounds`` (indices)
<out>/experiment.yaml        the experiment exactly as it was run
<out>/w2_curve.csv           W2 per round for the average iterate and every node
<out>/summary.txt            the table printed at the end of the run
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import yaml

from orchestrator.evaluation import Evaluation

__all__ = ["write_results", "summary_table", "default_out_dir"]


def default_out_dir(name: str) -> Path:
    return Path("results") / name


def write_results(
    out: Path,
    raw_experiment: Mapping,
    samples: Mapping[str, np.ndarray],
    sample_rounds: Mapping[str, np.ndarray],
    evaluation: Evaluation,
    extra: Mapping | None = None,
) -> Path:
    out = Path(out)
    (out / "samples").mkdir(parents=True, exist_ok=True)
    for node, values in samples.items():
        np.savez(out / "samples" / f"node-{node}.npz", samples=values, rounds=sample_rounds[node])
    (out / "experiment.yaml").write_text(yaml.safe_dump(dict(raw_experiment), sort_keys=False))
    metrics = {**evaluation.metrics, **dict(extra or {})}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2, default=_jsonable) + "\n")
    if evaluation.curves:
        names = list(evaluation.curves)
        length = max(len(c) for c in evaluation.curves.values())
        lines = ["round," + ",".join("average" if n == "average" else f"node-{n}" for n in names)]
        for k in range(length):
            cells = [
                f"{evaluation.curves[n][k]:.6g}" if k < len(evaluation.curves[n]) else ""
                for n in names
            ]
            lines.append(f"{k}," + ",".join(cells))
        (out / "w2_curve.csv").write_text("\n".join(lines) + "\n")
    (out / "summary.txt").write_text(summary_table(metrics) + "\n")
    return out


def _jsonable(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def summary_table(metrics: Mapping) -> str:
    """A short human-readable account of a run."""
    lines = [
        f"experiment {metrics.get('experiment')}: {metrics.get('algorithm')}, "
        f"{metrics.get('nodes')} nodes, {metrics.get('rounds')} rounds, "
        f"{metrics.get('chains')} chains"
    ]
    w2 = metrics.get("w2")
    if w2:
        posterior = metrics.get("posterior", {})
        std = posterior.get("std")
        if std:
            lines.append("posterior std per coordinate: " + ", ".join(f"{s:.4f}" for s in std))
        lines.append(f"{'node':>10}  {'W2':>8}  samples")
        counts = metrics.get("samples_per_node", {})
        for node, value in w2["per_node"].items():
            lines.append(f"{node:>10}  {value:8.4f}  {counts.get(node, '')}")
        if w2.get("average") is not None:
            lines.append(
                f"{'average':>10}  {w2['average']:8.4f}  (W2 of the network-average iterate)"
            )
    account = metrics.get("account")
    if account:
        lines.append("what happened:")
        lines.extend(f"  {line}" for line in account)
    return "\n".join(lines)
