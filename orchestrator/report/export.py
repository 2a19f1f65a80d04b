"""A results folder's samples as an ArviZ ``InferenceData``, and ``starling export``.

``to_inference_data(results_dir)`` returns one ``posterior`` group whose variable ``x`` has
dims ``(chain, draw, node, param)``: every node's chains × draws × parameters, with ``node``
a coordinate (the node ids) and ``draw`` the round index. A node that stored fewer rounds
than the others (a partial run) is padded with NaN. ``starling export RESULTS --format
netcdf [--out FILE]`` writes it with ArviZ's netcdf writer (h5netcdf), by default to
``RESULTS/posterior.nc``; ``arviz.from_netcdf`` reads it back. It never replaces a file
that exists unless ``--overwrite`` says so, and never one of the run's own files (its
``samples/`` or anything its ``manifest.json`` lists) at all.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from starling.node.params import ConfigError
from starling.orchestrator.core.files import check_out_file, write_replacing

__all__ = [
    "load_samples",
    "to_inference_data",
    "write_netcdf",
]

FORMATS = ("netcdf",)


def import_arviz():
    """ArviZ (seconds to import: only when exporting), without the FutureWarning about its
    coming refactor that it prints once a day per user cache: in a fresh container (the
    compose testbed's orchestrator) those five lines would land amid the command's output,
    about a library the user never called."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"\s*ArviZ is undergoing", category=FutureWarning)
        import arviz

    return arviz


def load_samples(results_dir: str | Path) -> dict[str, np.ndarray]:
    """Node id -> samples (rounds, chains, d) from ``RESULTS/samples/node-<id>.npz``."""
    folder = Path(results_dir)
    files = sorted((folder / "samples").glob("node-*.npz"))
    if not files:
        raise ConfigError(f"results: {str(folder)!r} holds no samples/node-*.npz")
    from starling.orchestrator.report.loading import read_sample_file

    return {file.stem.removeprefix("node-"): read_sample_file(file)[0] for file in files}


def to_inference_data(results_dir: str | Path):
    """The samples of a results folder as an ``arviz.InferenceData`` (see the module doc)."""
    from starling.orchestrator.report.loading import read_metrics

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
    metrics = read_metrics(folder)
    attrs.update(
        {k: str(metrics[k]) for k in ("experiment", "algorithm", "status") if k in metrics}
    )
    az = import_arviz()

    with warnings.catch_warnings():
        # ArviZ guesses the layout from the shape and warns "More chains than draws" for a
        # short run with many chains; the layout here is given, (chain, draw, ...), so the
        # warning would only mislead.
        warnings.filterwarnings("ignore", message="More chains", category=UserWarning)
        return az.from_dict(
            posterior={"x": x},
            coords={"draw": np.arange(rounds), "node": nodes, "param": np.arange(dim)},
            dims={"x": ["node", "param"]},
            posterior_attrs=attrs,
        )


def _run_file(results: Path, target: Path) -> str | None:
    """What makes ``target`` one of the run's own files in ``results``, if it is one."""
    folder = results.resolve()
    resolved = target.resolve()
    if resolved.is_relative_to(folder / "samples"):
        return "is in the run's samples/"
    try:
        listed = json.loads((results / "manifest.json").read_text()).get("files") or []
    except (OSError, ValueError, AttributeError):
        listed = []
    for name in listed:
        if isinstance(name, str) and (folder / name).resolve() == resolved:
            return "is one of the run's files (its manifest.json lists it)"
    return None


def write_netcdf(
    results_dir: str | Path, out: str | Path | None = None, overwrite: bool = False
) -> Path:
    """Write :func:`to_inference_data` as netcdf; returns the file written. An existing
    file is replaced only with ``overwrite``; the run's own files never are."""
    results = Path(results_dir)
    if not results.is_dir():
        raise ConfigError(f"results: {results} is not a folder")
    target = check_out_file(out if out is not None else results / "posterior.nc", overwrite)
    clash = _run_file(results, target)
    if clash:
        raise ConfigError(f"--out: {target} {clash}; write the export elsewhere")
    data = to_inference_data(results)
    write_replacing(target, lambda path: data.to_netcdf(str(path)))
    return target
