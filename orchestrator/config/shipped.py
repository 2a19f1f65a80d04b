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

__all__ = ["copy_examples", "example_path", "examples_folder", "experiment_file", "list_examples"]

_ORCHESTRATOR = Path(__file__).resolve().parent.parent
"""The installed ``starling/orchestrator`` folder (in a checkout, ``orchestrator/``)."""


def examples_folder() -> Path | None:
    """``orchestrator/examples`` of an installed wheel, else the checkout's ``examples/``."""
    for candidate in (_ORCHESTRATOR / "examples", _ORCHESTRATOR.parent / "examples"):
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
    if destination.exists() and not destination.is_dir():
        raise ConfigError(f"--copy: {destination} is a file, not a folder")
    sources = sorted(folder.glob("*.yaml"))
    clashes = [p.name for p in sources if (destination / p.name).exists()]
    if clashes:
        raise ConfigError(
            f"--copy: {destination / clashes[0]} already exists (nothing copied; "
            "choose an empty folder)"
        )
    try:
        destination.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--copy: cannot create {destination} ({exc.strerror or exc})") from None
    copied = []
    for source in sources:
        try:
            copied.append(Path(shutil.copy2(source, destination / source.name)))
        except OSError as exc:
            reason = exc.strerror or exc
            raise ConfigError(
                f"--copy: cannot write {destination / source.name} ({reason}); {len(copied)} copied"
            ) from None
    return copied


def experiment_file(name: str) -> str | Path:
    """``name`` itself when it is a file, else the shipped example of that name (if any),
    else ``name`` (for the caller's "does not exist")."""
    if Path(name).exists():
        return name
    return example_path(name) or name


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
