"""Reference samples of a posterior with no closed form, cached on disk by content hash.

Two sources (``evaluation.reference.method``):

* ``grid`` — draws from the model's tabulated density (``reference_posterior``, the
  Gaussian mixture's 301 × 301 grid): exact up to the grid's resolution;
* ``mala`` — a long Metropolis-adjusted Langevin run (Roberts & Tweedie 1996) on the
  pooled data, ``U = Σ_i f_i`` (every shard, the whole prior: the model's own potential
  with share 1). :data:`CHAINS` chains from N(0, I), ``steps`` warm-up iterations tuning
  the step towards acceptance 0.574 (Roberts & Rosenthal 1998), then ``steps`` more
  iterations at the tuned step, thinned to ``size`` samples. The Metropolis correction makes
  it exact in the limit; chains that start in different modes of a multimodal posterior
  keep their start's proportions, so prefer ``grid`` where the model has one.

``auto`` is ``grid`` where the model has one and none otherwise (a MALA reference on a9a's
124 dimensions takes minutes: ask for it). Samples are written once under the cache folder
(``evaluation.reference.cache``, else ``$STARLING_CACHE_DIR``, else
``~/.cache/starling``) as ``reference/<sha256>.npz``, keyed by the model, its parameters,
the data's bytes, the method and its settings; the same reference is never computed twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from starling.node.models.base import Dataset
from starling.node.spec import ModelSpec
from starling.orchestrator.config.experiment import reference_method

__all__ = ["CHAINS", "cache_dir", "mala", "reference_key", "reference_samples"]

CHAINS = 16
TARGET_ACCEPT = 0.574
_VERSION = 1
"""Bumped whenever the way a reference is computed changes: old cache entries then miss."""


def cache_dir(option: str = "") -> Path:
    """Where references are kept: the option, else ``$STARLING_CACHE_DIR``, else
    ``~/.cache/starling``."""
    chosen = option or os.environ.get("STARLING_CACHE_DIR", "")
    return Path(chosen).expanduser() if chosen else Path.home() / ".cache" / "starling"


def reference_key(model: ModelSpec, shards: Sequence[Dataset], settings: dict) -> str:
    """sha256 of everything the reference depends on (the data by its bytes)."""
    digest = hashlib.sha256()
    head = {"version": _VERSION, "model": model.name, "params": dict(model.params), **settings}
    digest.update(json.dumps(head, sort_keys=True, default=str).encode())
    for shard in shards:
        for array in (shard.X, shard.y):
            values = np.ascontiguousarray(array, dtype=float)
            digest.update(str(values.shape).encode())
            digest.update(values.tobytes())
    return digest.hexdigest()


def mala(potential, dim: int, size: int, steps: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` MALA samples (size, dim) of ``exp(−potential)``; see the module docstring."""
    x = rng.standard_normal((CHAINS, dim))
    u, g = potential.value(x), potential.grad(x)
    step = 1e-2 / max(float(np.sqrt(np.mean(g**2))), 1.0)
    kept = []
    keep_every = max(1, (steps * CHAINS) // size)
    for t in range(2 * steps):
        proposal = x - step * g + np.sqrt(2.0 * step) * rng.standard_normal(x.shape)
        u_new, g_new = potential.value(proposal), potential.grad(proposal)
        forward = np.sum((proposal - x + step * g) ** 2, axis=1)
        backward = np.sum((x - proposal + step * g_new) ** 2, axis=1)
        with np.errstate(over="ignore", invalid="ignore"):
            log_ratio = u - u_new + (forward - backward) / (4.0 * step)
        accept = np.log(rng.random(CHAINS)) < np.nan_to_num(log_ratio, nan=-np.inf)
        x[accept], u[accept], g[accept] = proposal[accept], u_new[accept], g_new[accept]
        if t < steps:  # warm-up: tune the step (not a Markov chain yet, none kept)
            step *= float(np.exp(2.0 * (accept.mean() - TARGET_ACCEPT) / np.sqrt(t + 1.0)))
        elif (t - steps) % keep_every == 0:
            kept.append(x.copy())
    pooled = np.concatenate(kept)
    return pooled[np.linspace(0, len(pooled) - 1, size).round().astype(np.int64)]


def _compute(model, shards: Sequence[Dataset], method: str, size: int, seed: int, steps: int):
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x4D414C41]))
    if method == "grid":
        return model.reference_posterior(shards).sample(rng, size)
    pooled = Dataset(
        X=np.concatenate([np.asarray(s.X, float) for s in shards]),
        y=np.concatenate([np.asarray(s.y, float) for s in shards]),
    )
    return mala(model.local_potential(pooled, 1.0), int(model.dim), size, steps, rng)


def reference_samples(
    model, spec: ModelSpec, shards: Sequence[Dataset], settings, where: str = ""
) -> tuple[np.ndarray, dict] | None:
    """``(samples, description)`` for ``evaluation.reference`` ``settings``; None when the
    method resolves to none. ``where`` overrides the cache folder (tests)."""
    method = reference_method(model, settings.method)
    if method == "none" or not shards:
        return None
    params = {"method": method, "size": settings.size, "seed": settings.seed}
    if method == "mala":
        params.update(steps=settings.steps, chains=CHAINS)
    key = reference_key(spec, shards, params)
    file = cache_dir(where or settings.cache) / "reference" / f"{key}.npz"
    described = {**params, "key": key[:16]}
    stored = _cached(file)
    if stored is not None:
        return stored, {**described, "cached": True}
    samples = _compute(model, shards, method, settings.size, settings.seed, settings.steps)
    failure = _store(file, samples)
    if failure is not None:
        return samples, {**described, "cached": False, "cache_error": failure}
    return samples, {**described, "cached": False}


def _cached(file: Path) -> np.ndarray | None:
    """The samples stored in ``file``, or None when there are none to trust: the cache is
    only a shortcut, and a damaged entry (a disk that filled, a hand edit) is computed
    again rather than ending the evaluation of a run whose samples are not written yet."""
    try:
        if not file.is_file():
            return None
        with open(file, "rb") as handle, np.load(handle) as stored:  # np.load(path) leaks it
            samples = np.asarray(stored["samples"], dtype=float)
    except (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile, zlib.error):
        return None
    return samples if samples.ndim == 2 and np.all(np.isfinite(samples)) else None


def _store(file: Path, samples: np.ndarray) -> str | None:
    """Write ``samples`` to ``file`` whole or not at all; why it could not, or None. A
    cache folder that cannot be written (a file's name, no permission, a full disk) leaves
    the reference uncached: it was a traceback after the rounds, and the run's samples were
    never written."""
    temporary: str | None = None
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=file.parent, suffix=".npz", delete=False) as tmp:
            temporary = tmp.name
            np.savez(tmp, samples=samples)
        os.replace(temporary, file)  # whole or absent: a concurrent reader never sees half
        temporary = None
    except OSError as exc:
        return f"{file.parent}: {exc.strerror or exc}"
    finally:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
    return None
