"""The guard that keeps ``make quick`` free of processes refuses them in unmarked tests."""

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

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


@pytest.fixture(scope="module")
def module_wide_start():
    """A module-wide fixture that starts a process: what it was told."""
    try:
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    except UnmarkedProcess as refused:
        return refused
    return None


def test_a_module_wide_fixture_of_an_unmarked_test_cannot_start_a_process(module_wide_start):
    # Set up before any function-scoped fixture: the guard covers the test's whole setup.
    assert isinstance(module_wide_start, UnmarkedProcess)
    assert "test_a_module_wide_fixture_of_an_unmarked_test" in str(module_wide_start)


def test_an_unmarked_test_may_draw_text_though_no_font_cache_was_there(tmp_path):
    """matplotlib lists the system fonts with fc-list when it finds no font cache; the
    session did that before any test, in a config dir of its own (empty at the start, as
    on a fresh machine), so drawing text here starts nothing."""
    import matplotlib
    from matplotlib.figure import Figure

    cache = Path(os.environ["MPLCONFIGDIR"])
    assert Path(matplotlib.get_cachedir()) == cache
    assert cache.name.startswith("starling-tests-matplotlib-")
    assert list(cache.glob("fontlist-*.json"))
    figure = Figure()
    figure.add_subplot().set_title("a title needs a font")
    figure.savefig(tmp_path / "drawn.png")
    assert (tmp_path / "drawn.png").stat().st_size > 1000
