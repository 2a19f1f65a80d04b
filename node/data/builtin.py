"""Data sets shipped inside the package (``node/models/datasets/``), named ``builtin:NAME``.

A shipped file is checked against the sha256 recorded here (and in the folder's
README.md, with its provenance) before a row of it is read, so a damaged or altered copy
is refused rather than silently sampled from. Examples name these data sets by this
package-relative name, never by a path, so a fresh clone or an installed wheel runs them.
Their bytes are parsed as a table by :func:`starling.node.data.files.load_builtin`.
"""

from __future__ import annotations

import hashlib
from importlib import resources

from starling.node.params import ConfigError

__all__ = ["BUILTIN", "builtin_bytes", "verified"]

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
