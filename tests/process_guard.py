"""Tests that start a process are marked ``e2e``; ``make quick`` runs the others.

:func:`forbid_processes` makes every way this interpreter starts a child (``subprocess``,
``multiprocessing``, ``os.fork`` and the ``posix_spawn`` family) raise instead, naming the
test. ``tests/conftest.py`` wraps the whole of every test not marked ``e2e`` in it — setup,
call and teardown, so also the module-wide fixtures the test is the first to ask for — and
an unmarked test that starts a node, a local backend or a docker CLI fails on the spot,
whichever helper started the process.

Two libraries start a helper process of their own the first time they need something from
the system, whichever test that happens in. :func:`warm_library_helpers` runs both once, at
the start of the session and outside any test, so that no test is blamed for them:

* matplotlib's font manager, loaded without a font cache in its config dir, lists the
  system fonts with ``fc-list`` and writes the cache (any test that draws a figure, writes
  a report or imports matplotlib's pyplot was the one to fail, on a machine without
  ``~/.cache/matplotlib``);
* :func:`platform.uname` reads the processor with ``uname -p`` the first time it is asked
  for it, and keeps the answer (h5py does, the first time the netCDF export writes a file).

Everything else a test starts is its own doing, and needs the mark.
"""

from __future__ import annotations

import multiprocessing.process
import os
import platform
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["UnmarkedProcess", "forbid_processes", "warm_library_helpers"]


class UnmarkedProcess(AssertionError):
    """A test not marked ``e2e`` tried to start a process."""


@contextmanager
def forbid_processes(test: str) -> Iterator[None]:
    def refuse(*_args, **_kwargs):
        raise UnmarkedProcess(
            f"{test} starts a process but is not marked e2e: add `pytestmark = "
            "pytest.mark.e2e` to its module or `@pytest.mark.e2e` to the test"
        )

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "_execute_child", refuse)
        patch.setattr(multiprocessing.process.BaseProcess, "start", refuse)
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp"):
            if hasattr(os, name):
                patch.setattr(os, name, refuse)
        yield


def warm_library_helpers(matplotlib_dir: Path) -> None:
    """Run the libraries' own helper processes once (see the module docstring), before any
    test. ``matplotlib_dir`` becomes matplotlib's config and cache dir (``MPLCONFIGDIR``,
    inherited by the processes e2e tests start): the session's own, so the font cache is
    built here on every machine alike, whatever ``~/.cache/matplotlib`` holds."""
    os.environ["MPLCONFIGDIR"] = str(matplotlib_dir)
    import matplotlib.font_manager  # builds the font cache, running fc-list

    matplotlib.font_manager.findfont("DejaVu Sans")  # and it is in use
    platform.uname().processor  # noqa: B018 - asked once (uname -p), kept by platform
