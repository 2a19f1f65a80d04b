"""The guard that keeps ``make quick`` free of processes refuses them in unmarked tests."""

import multiprocessing
import subprocess
import sys

import pytest

from tests.process_guard import UnmarkedProcess, forbid_processes


def test_an_unmarked_test_cannot_start_a_subprocess():
    # This test is not marked e2e, so conftest's guard is already in force around it.
    with pytest.raises(UnmarkedProcess, match=r"test_process_guard.py::.* not marked e2e"):
        subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_an_unmarked_test_cannot_start_a_multiprocessing_child():
    with pytest.raises(UnmarkedProcess, match="not marked e2e"):
        multiprocessing.get_context("spawn").Process(target=print).start()


def test_the_guard_names_the_test_it_guards():
    with forbid_processes("tests/x.py::test_y"), pytest.raises(UnmarkedProcess) as caught:
        subprocess.Popen([sys.executable, "-c", "pass"])
    assert str(caught.value).startswith("tests/x.py::test_y starts a process")
