"""A results folder's samples as an ArviZ ``InferenceData``, and ``starling export``.

``to_inference_data(results_dir)`` returns one ``posterior`` group whose variable ``x`` has
dims ``(chain, draw, node, param)``: every node's chains × draws × parameters, with ``node``
a coordinate (the node ids) and ``draw`` the round index. A node that stored fewer rounds
than the others (a partial run) is padded with NaN. ``starling export RESULTS --format
netcdf [--out FILE]`` writes it with ArviZ's netcdf writer (h5netcdf), by default to
``RESULTS/posterior.nc``; ``arviz.from_netcdf`` reads it back.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from starling.node.params import ConfigError

__all__ = ["add_commands", "load_samples", "to_inference_data", "write_netcdf"]

FORMATS = ("netcdf",)


def load_samples(results_dir: str | Path) -> dict[str, np.ndarray]:
    """Node id -> samples (rounds, chains, d) from ``RESULTS/samples/node-<id>.npz``."""
    folder = Path(results_dir)
    files = sorted((folder / "samples").glob("node-*.npz"))
    if not files:
        raise ConfigError(f"results: {str(folder)!r} holds no samples/node-*.npz")
    out = {}
    for file in files:
        with np.load(file) as stored:
            out[file.stem.removeprefix("node-")] = np.asarray(stored["samples"], dtype=float)
    return out


def to_inference_data(results_dir: str | Path):
    """The samples of a results folder as an ``arviz.InferenceData`` (see the module doc)."""
    import arviz as az  # seconds to import: only when exporting

    folder = Path(results_dir)
    samples = load_samples(folder)
    nodes = sorted(samples, key=lambda n: (len(n), n))
    shapes = {samples[n].shape[1:] for n in nodes}
    if len(shapes) != 1:
        raise ConfigError(f"results: nodes stored different chains × dim {sorted(shapes)}")
    chains, dim = shapes.pop()
    rounds = max(samples[n].shape[0] for n in nodes)
    x = np.full((chains, rounds, len(nodes), dim), np.nan)
    for k, node in enumerate(nodes):
        values = samples[node]
        x[:, : values.shape[0], k, :] = np.transpose(values, (1, 0, 2))
    attrs = {"created_by": "starling export", "results": str(folder)}
    metrics_file = folder / "metrics.json"
    if metrics_file.is_file():
        metrics = json.loads(metrics_file.read_text())
        attrs.update({k: str(metrics[k]) for k in ("experiment", "algorithm", "status")
                      if k in metrics})  # fmt: skip
    return az.from_dict(
        posterior={"x": x},
        coords={"draw": np.arange(rounds), "node": nodes, "param": np.arange(dim)},
        dims={"x": ["node", "param"]},
        posterior_attrs=attrs,
    )


def write_netcdf(results_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write :func:`to_inference_data` as netcdf; returns the file written."""
    target = Path(out) if out else Path(results_dir) / "posterior.nc"
    data = to_inference_data(results_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    data.to_netcdf(str(target))
    return target


def cmd_export(args) -> int:
    if args.format not in FORMATS:
        raise ConfigError(f"--format: unknown format {args.format!r} (use {', '.join(FORMATS)})")
    print(write_netcdf(args.results, args.out))
    return 0


def add_commands(sub) -> None:
    export = sub.add_parser(
        "export", help="write a results folder's samples as ArviZ InferenceData (netcdf): "
        "chains × draws × parameters, node as a coordinate",
    )  # fmt: skip
    export.add_argument("results", help="the run's results folder")
    export.add_argument("--format", default="netcdf", help="netcdf (the only one)")
    export.add_argument("--out", metavar="FILE", help="default: RESULTS/posterior.nc")
    export.set_defaults(handler=cmd_export)
