"""A results folder that cannot be written: the disk is full, the folder was made read-only
or removed during the run. One line says so, names the file, and says what is kept.

Before, the ``OSError`` escaped as a traceback (chained several times over, as each attempt
to record the failure failed too), after ``metrics.json`` had been left empty. Now the run's
manifest is left ``running`` on purpose: the nodes' stores hold every sample they stored, and
``starling collect DIR`` recovers them once the folder can be written again.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["ResultsUnwritable", "unwritable"]

DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EFBIG})
"""Errors that name no file (a zip archive's close, say) but can only be the disk's."""


class ResultsUnwritable(Exception):
    """The results could not be written into the results folder (exit 1, one line)."""


def unwritable(folder: Path, exc: BaseException) -> ResultsUnwritable | None:
    """``exc`` as a :class:`ResultsUnwritable` when it is an ``OSError`` on a file in
    ``folder`` (or a disk error naming no file); ``None`` for anything else."""
    if not isinstance(exc, OSError):
        return None
    name = exc.filename
    if name is None and exc.errno not in DISK_ERRORS:
        return None
    if name is not None and not _under(Path(os.fsdecode(name)), Path(folder)):
        return None
    where = f": {os.fsdecode(name)}" if name is not None else ""
    if (Path(folder) / "start.json").is_file():  # a networked run: its nodes keep their stores
        then = (
            f"the samples the nodes stored are kept; once the folder can be written, "
            f"`starling collect {folder}` recovers them"
        )
    else:
        then = "nothing was kept; run it again once the folder can be written"
    return ResultsUnwritable(
        f"cannot write the results to {folder} ({exc.strerror or exc}{where}); {then}"
    )


def _under(path: Path, folder: Path) -> bool:
    path, folder = Path(os.path.abspath(path)), Path(os.path.abspath(folder))
    return path == folder or folder in path.parents
