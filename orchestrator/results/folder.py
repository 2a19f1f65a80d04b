"""Where a run's results go, and the promise that no results folder is ever destroyed.

* Without ``--out``, ``run`` and ``simulate`` write into a fresh ``results/NAME/<UTC time>/``
  (``20261123T140614Z``, with ``-2``, ``-3``... if that second is taken) and point the
  symlink ``results/NAME/latest`` at it. Nothing older is touched.
* ``--out DIR`` must be absent or empty. With ``--overwrite`` it may hold an earlier run:
  then exactly the files that run listed in its ``manifest.json`` are removed (and folders
  left empty by that), never anything else — a file of yours in ``DIR/samples`` stays.
* Every run writes ``manifest.json``: at its start (``status: running`` and the files that
  were already there, which are not the run's), and at its end with every file it created and
  how it ended (``complete``, ``partial``, ``failed`` or ``interrupted``). ``starling collect``
  rewrites it after recovering a crashed run. A folder whose run never finished is refused
  even with ``--overwrite``: recover it first (``starling collect DIR``) or pick another.

A path that cannot be a folder (``/proc/x``, an existing file, a path under a file) is a
one-line :class:`~starling.node.params.ConfigError` naming ``--out``.
"""

from __future__ import annotations

import json
import os
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from starling.node.params import ConfigError

__all__ = ["MANIFEST", "STATUSES", "ResultsFolder", "owned_files", "prepare"]

MANIFEST = "manifest.json"
STATUSES = ("complete", "partial", "failed", "interrupted")
"""How a run ended, as written in ``metrics.json``, ``summary.txt`` and the manifest."""
RUNNING = "running"
DEFAULT_ROOT = Path("results")


@dataclass
class ResultsFolder:
    """A results folder a run may write into; ``foreign`` are files that are not its own."""

    path: Path
    foreign: set[str] = field(default_factory=set)

    def begin(self) -> None:
        """The manifest of a run that has started and not ended (what ``collect`` reads):
        ``pid`` is the process writing the folder."""
        self._write(RUNNING, [], pid=os.getpid())

    def end(self, status: str, not_collected: list[str] | tuple = ()) -> None:
        """The manifest of an ended run: every file in the folder that was not foreign.
        ``not_collected``: nodes whose samples the run could not collect (an interrupted
        run's collection has a deadline); ``starling collect`` accepts such a folder."""
        more = {"not_collected": list(not_collected)} if not_collected else {}
        self._write(status, owned_files(self.path, self.foreign), **more)

    def _write(self, status: str, files: list[str], **more) -> None:
        body = {"status": status, "files": files, "foreign": sorted(self.foreign), **more}
        temporary, target = self.path / f".{MANIFEST}.tmp", self.path / MANIFEST
        try:
            temporary.write_text(json.dumps(body, indent=1) + "\n")
            os.replace(temporary, target)
        except OSError as exc:  # named as the manifest, whichever of the two files failed
            with suppress(OSError):
                temporary.unlink(missing_ok=True)
            raise OSError(exc.errno, exc.strerror, str(target)) from None

    @classmethod
    def existing(cls, path: Path) -> tuple[ResultsFolder, dict]:
        """The folder of an earlier run and its manifest (ConfigError if it has none)."""
        manifest = read_manifest(path)
        if manifest is None:
            raise ConfigError(
                f"collect: {path} has no {MANIFEST}, so it is not a Starling results folder"
            )
        return cls(path, set(manifest.get("foreign") or [])), manifest


def owned_files(folder: Path, foreign: set[str]) -> list[str]:
    """Every file under ``folder`` (relative, sorted) except ``foreign`` ones and the manifest."""
    found = []
    for root, _dirs, files in os.walk(folder):
        for name in files:
            relative = (Path(root) / name).relative_to(folder).as_posix()
            if relative not in foreign and relative != MANIFEST:
                found.append(relative)
    return sorted(found)


def read_manifest(folder: Path) -> dict | None:
    try:
        body = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{folder / MANIFEST}: unreadable ({exc})") from None
    if not isinstance(body, dict) or not isinstance(body.get("files"), list):
        raise ConfigError(f"{folder / MANIFEST}: not a Starling manifest")
    return body


def prepare(
    out: str | None, name: str, overwrite: bool = False, root: Path = DEFAULT_ROOT
) -> ResultsFolder:
    """The folder this run writes into, created; see the module docstring for the policy."""
    if out is None:
        if overwrite:
            raise ConfigError("--overwrite: only with --out (the default folder is always new)")
        return _fresh(Path(root) / name)
    path = Path(out)
    _check_can_be_folder(path)
    if path.is_dir():
        entries = sorted(p.name for p in path.iterdir())
        if entries and not overwrite:
            raise ConfigError(
                f"--out: {path} is not empty ({', '.join(entries[:3])}"
                f"{', ...' if len(entries) > 3 else ''}); choose a new folder, or pass "
                "--overwrite to replace the files of the earlier run there (and only those)"
            )
        if entries:
            return _clear_earlier_run(path)
        return ResultsFolder(path)
    _make(path, parents=True)
    return ResultsFolder(path)


def _fresh(parent: Path) -> ResultsFolder:
    _check_can_be_folder(parent)
    _make(parent, parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for attempt in range(1, 1000):
        path = parent / (stamp if attempt == 1 else f"{stamp}-{attempt}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise ConfigError(f"results folder: cannot create {path} ({exc.strerror})") from None
        _point_latest(parent, path.name)
        return ResultsFolder(path)
    raise ConfigError(f"results folder: {parent} has no free name for {stamp}")


def _point_latest(parent: Path, name: str) -> None:
    """``parent/latest`` -> ``name``, replaced atomically; left alone if it is not a link."""
    latest = parent / "latest"
    if latest.exists() and not latest.is_symlink():
        return  # a file or folder of the user's called "latest": never replaced
    temporary = parent / f".latest-{os.getpid()}"
    try:
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(name)
        os.replace(temporary, latest)
    except OSError:
        temporary.unlink(missing_ok=True)  # a file system without symlinks: no latest link


def _check_can_be_folder(path: Path) -> None:
    """A ConfigError naming --out when ``path`` or one of its parents is an existing file."""
    for candidate in (path, *path.parents):
        if candidate.exists() and not candidate.is_dir():
            where = "is a file" if candidate == path else f"is under {candidate}, which is a file"
            raise ConfigError(f"--out: {path} {where}, not a folder")


def _make(path: Path, parents: bool, exist_ok: bool = False) -> None:
    try:
        path.mkdir(parents=parents, exist_ok=exist_ok)
    except OSError as exc:
        raise ConfigError(f"--out: cannot create {path} ({exc.strerror or exc})") from None


def _clear_earlier_run(path: Path) -> ResultsFolder:
    """--overwrite: remove the files the earlier run's manifest lists, and nothing else."""
    manifest = read_manifest(path)
    if manifest is None:
        raise ConfigError(
            f"--overwrite: {path} holds no {MANIFEST}, so nothing in it is known to be "
            "Starling's; choose a new or empty folder"
        )
    if manifest.get("status") == RUNNING:
        raise ConfigError(
            f"--overwrite: the run in {path} never finished (it is running, or crashed); "
            f"recover its samples with `starling collect {path}` first, or choose another folder"
        )
    base = path.resolve()
    emptied: set[Path] = set()
    for relative in manifest["files"]:
        target = (path / str(relative)).resolve()
        if not isinstance(relative, str) or base not in target.parents:
            continue  # never outside the folder, whatever the manifest says
        victim = path / relative
        if victim.is_file() or victim.is_symlink():
            victim.unlink()
            emptied.update(p for p in victim.parents if base in p.resolve().parents)
    for folder in sorted(emptied, key=lambda p: len(p.parts), reverse=True):
        try:
            folder.rmdir()  # only if the removal left it empty
        except OSError:
            pass
    (path / MANIFEST).unlink(missing_ok=True)
    remaining = {p for p in owned_files(path, set())}
    return ResultsFolder(path, remaining)
