"""Shared fixtures: run the real ``starling`` command as a subprocess; keep process
starts to tests marked ``e2e`` (tests/process_guard.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

import pytest

from tests.process_guard import forbid_processes, warm_library_helpers

ROOT = Path(__file__).resolve().parent.parent

_MATPLOTLIB_DIR = pytest.StashKey[Path]()


def pytest_configure(config):
    """Before any test module is imported: the libraries' helper processes run once, here,
    outside every test's guard, with a matplotlib config dir the session owns."""
    folder = Path(tempfile.mkdtemp(prefix="starling-tests-matplotlib-"))
    config.stash[_MATPLOTLIB_DIR] = folder
    warm_library_helpers(folder)


def pytest_unconfigure(config):
    folder = config.stash.get(_MATPLOTLIB_DIR, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _guard(item):
    """A test that starts a process must be marked e2e (see tests/process_guard.py)."""
    if item.get_closest_marker("e2e") is not None:
        return nullcontext()
    return forbid_processes(item.nodeid)


# Setup, call and teardown each: a module-wide fixture set up for an unmarked test (before
# any function-scoped fixture) is guarded as much as the test itself.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with _guard(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with _guard(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    with _guard(item):
        return (yield)


_SESSION_UMASK = os.umask(0o022)
os.umask(_SESSION_UMASK)
"""The umask the test session started with."""


@pytest.fixture(autouse=True)
def _umask_kept():
    """Every test starts and ends with the session's umask: the ``starling`` command run
    in-process sets its own (owner-only), which leaked into later tests, also through
    fixtures wider than a test (they run before this one)."""
    os.umask(_SESSION_UMASK)
    yield
    os.umask(_SESSION_UMASK)


@pytest.fixture
def starling_home(tmp_path, monkeypatch):
    """A private registry of running experiments, so tests never see each other's runs."""
    home = tmp_path / "starling-home"
    monkeypatch.setenv("STARLING_HOME", str(home))
    return home


def _cli_environment(env_home: Path | None, env: dict[str, str] | None) -> dict[str, str]:
    out = {**os.environ, **(env or {})}
    if env_home is not None:
        out["STARLING_HOME"] = str(env_home)
    return out


def start_cli(
    *args: str,
    env_home: Path | None = None,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
    **popen,
) -> subprocess.Popen:
    """``starling ARGS`` started in a fresh interpreter and left running, as :func:`run_cli`
    runs it; stdout and stderr are text pipes unless ``popen`` says otherwise."""
    popen = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **popen}
    return subprocess.Popen(
        [sys.executable, "-m", "starling.orchestrator.cli", *args],
        cwd=cwd,
        env=_cli_environment(env_home, env),
        **popen,
    )


def run_cli(
    *args: str,
    env_home: Path | None = None,
    timeout: float = 600,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
):
    """``starling ARGS`` in a fresh interpreter, with ``env`` added to this process's
    environment; returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", "starling.orchestrator.cli", *args],
        cwd=cwd,
        env=_cli_environment(env_home, env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
