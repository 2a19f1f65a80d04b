"""A file a command writes for its user (``--out FILE``): checked before any work, written in
one piece, never half."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from starling.node.params import ConfigError

__all__ = ["check_out_file", "write_replacing"]


def check_out_file(out: str | Path, overwrite: bool, option: str = "--out") -> Path:
    """``out`` as a file to write: its folder must exist, it must not be a folder, and it
    must not exist unless ``overwrite``. A ConfigError naming ``option`` otherwise."""
    text = str(out)
    if not text.strip():
        raise ConfigError(f"{option}: expected a file name, got {text!r}")
    target = Path(out)
    if target.is_dir():
        raise ConfigError(f"{option}: {target} is a folder; name a file in it")
    parent = target.parent
    if not parent.exists():
        raise ConfigError(f"{option}: the folder {parent} does not exist (create it first)")
    if not parent.is_dir():
        raise ConfigError(f"{option}: {parent} is not a folder")
    if target.exists() or target.is_symlink():
        if not overwrite:
            raise ConfigError(f"{option}: {target} already exists (--overwrite replaces it)")
        if not target.is_file():
            raise ConfigError(f"{option}: {target} is not a regular file")
    return target


def write_replacing(target: Path, write: Callable[[Path], object], option: str = "--out") -> None:
    """``write`` a temporary file beside ``target``, then move it into place: a write that
    fails leaves ``target`` as it was."""
    temporary: Path | None = None
    try:
        handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(handle)
        temporary = Path(name)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # as an ordinary new file, not mkstemp's 0600
        write(temporary)
        os.replace(temporary, target)
        temporary = None
    except OSError as exc:
        raise ConfigError(f"{option}: {target}: cannot write ({exc.strerror or exc})") from None
    finally:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
