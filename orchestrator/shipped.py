"""The example experiments that ship with Starling, found wherever Starling is installed.

The files live in the top-level ``examples/`` folder of the source tree; a wheel carries
them as ``orchestrator/examples/`` (``setup.py`` copies them at build time). So
``starling run quickstart`` works from a checkout and from ``pip install`` alike, and
``starling examples`` lists them or copies them somewhere to edit.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from starling.node.params import ConfigError

__all__ = ["copy_examples", "example_path", "examples_folder", "list_examples"]

_HERE = Path(__file__).resolve().parent


def examples_folder() -> Path | None:
    """``orchestrator/examples`` of an installed wheel, else the checkout's ``examples/``."""
    for candidate in (_HERE / "examples", _HERE.parent / "examples"):
        if candidate.is_dir() and any(candidate.glob("*.yaml")):
            return candidate
    return None


def list_examples() -> list[tuple[str, str]]:
    """(name, first line of its header comment) for every shipped example, by name."""
    folder = examples_folder()
    if folder is None:
        return []
    out = []
    for path in sorted(folder.glob("*.yaml")):
        out.append((path.stem, _summary(path)))
    return out


def example_path(name: str) -> Path | None:
    """The shipped example called ``name`` (``quickstart`` or ``quickstart.yaml``), if any."""
    folder = examples_folder()
    if folder is None or Path(name).name != name:
        return None
    path = folder / (name if name.endswith(".yaml") else f"{name}.yaml")
    return path if path.is_file() else None


def copy_examples(destination: Path) -> list[Path]:
    """Copy every shipped example into ``destination`` (created if absent); never
    overwrites a file that is already there."""
    folder = examples_folder()
    if folder is None:
        raise ConfigError("examples: this installation ships no examples")
    sources = sorted(folder.glob("*.yaml"))
    clashes = [p.name for p in sources if (destination / p.name).exists()]
    if clashes:
        raise ConfigError(
            f"--copy: {destination / clashes[0]} already exists (nothing copied; "
            "choose an empty folder)"
        )
    destination.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy2(p, destination / p.name)) for p in sources]


def _summary(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.lstrip("#").strip()
        if not line.startswith("#"):
            break
        if text:
            # "# examples/x.yaml: what it is" -> "what it is"
            head, sep, rest = text.partition(": ")
            return rest if sep and head.endswith(".yaml") else text
    return ""
