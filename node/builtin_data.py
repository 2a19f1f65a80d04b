"""Data sets shipped inside the package (``node/models/datasets/``), named ``builtin:NAME``.

A shipped file is checked against the sha256 recorded here (and in the folder's
README.md, with its provenance) before a row of it is read, so a damaged or altered copy
is refused rather than silently sampled from. Examples name these data sets by this
package-relative name, never by a path, so a fresh clone or an installed wheel runs them.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
from importlib import resources

import numpy as np

from starling.node.models.base import Dataset
from starling.node.params import ConfigError

__all__ = ["BUILTIN", "builtin_bytes", "load_builtin", "verified"]

BUILTIN: dict[str, tuple[str, str]] = {
    # name: (file in node/models/datasets, sha256 of the file as shipped)
    "digits": ("digits.npz", "dff739c317c3d7a561cd1d11ae22ab4ac7f0557489c9e3935e97bec510d05737"),
    "a9a": ("a9a.gz", "b301f3e87350539f3ebc751d07b4691a8c66f0bf38c1d179c86bbf5e2d9623b2"),
    "a9a.t": ("a9a.t.gz", "084f5209988e3798f0ef8fd668bc7ca624b8d47df904ed825069187aeffbba30"),
}
"""Provenance of each file: ``node/models/datasets/README.md``."""


def builtin_bytes(name: str) -> bytes:
    """The shipped file's bytes, after checking its checksum."""
    if name not in BUILTIN:
        raise ConfigError(
            f"data.path: unknown built-in data set {name!r} (available: {', '.join(BUILTIN)})"
        )
    file, digest = BUILTIN[name]
    raw = resources.files("starling.node.models").joinpath(f"datasets/{file}").read_bytes()
    return verified(raw, digest, f"builtin:{name}")


def verified(raw: bytes, digest: str, name: str) -> bytes:
    """``raw`` if its sha256 is ``digest``; a one-line ConfigError otherwise."""
    if hashlib.sha256(raw).hexdigest() != digest:
        raise ConfigError(
            f"data.path: the shipped file of {name} fails its sha256 check (expected "
            f"{digest[:12]}…): the copy is damaged or altered; reinstall the package"
        )
    return raw


@functools.lru_cache(maxsize=4)
def load_builtin(name: str, n_features: int | None = None) -> Dataset:
    """A shipped data set as a read-only ``Dataset`` (one parse per process)."""
    raw = builtin_bytes(name)
    if name == "digits":
        with np.load(io.BytesIO(raw)) as arrays:
            # Pixel counts 0..16 scaled to [0, 1], so a N(0, 1) weight prior is sensible.
            table = Dataset(X=arrays["X"] / 16.0, y=arrays["y"].astype(float))
    else:
        from starling.node.data import parse_libsvm_lines  # the one LIBSVM parser (imports us)

        text = gzip.decompress(raw).decode("utf-8").splitlines()
        table = parse_libsvm_lines(text, f"builtin:{name}", n_features)
    table.X.setflags(write=False)
    table.y.setflags(write=False)
    return table
