"""Tests that start a process are marked ``e2e``; ``make quick`` runs the others.

:func:`forbid_processes` makes every way this interpreter starts a child (``subprocess``,
``multiprocessing``, ``os.fork`` and the ``posix_spawn`` family) raise instead, naming the
test. ``tests/conftest.py`` wraps every test not marked ``e2e`` in it, so an unmarked test
that starts a node, a local backend or a docker CLI fails on the spot, whichever helper
started the process.
"""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

__all__ = ["UnmarkedProcess", "forbid_processes"]


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
