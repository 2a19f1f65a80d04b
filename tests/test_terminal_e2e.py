"""The progress display and ``starling status --watch`` on a real terminal (tmux).

A real ``starling run`` draws its progress in a tmux pane; ``starling status --watch``
runs in a second pane and must show a link cut within a second of ``starling links cut``
returning. Progress stays out of logs: with stdout a file it writes plain lines without
terminal control characters, and ``--quiet`` shows nothing. Debian's ``tmux`` is installed
by ``docker/ci-setup.sh``; without it the test skips locally and fails under ``CI=true``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
import yaml

from tests.conftest import ROOT, run_cli
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

WAIT = 120.0
"""Seconds a display may take to appear on a busy machine (start-up included)."""


def _experiment(tmp_path, name: str, rounds: int) -> str:
    raw = {
        "name": name,
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.009},
        "model": {
            "name": "linear_regression",
            "params": {"dim": 2, "noise_std": 4.0, "prior_var": 10.0},
        },
        "data": {"source": "synthetic", "size": 50, "seed": 3},
        "topology": {"kind": "ring", "nodes": 4},
        "rounds": rounds,
        "chains": 4,
        "seed": 5,
        "link_delay": "30ms",  # a few dozen rounds a second: time to watch
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return str(path)


class Tmux:
    """A private tmux server (its own socket), so no other session's environment leaks in."""

    def __init__(self, tmp_path, home):
        if shutil.which("tmux") is None:
            if os.environ.get("CI"):
                pytest.fail("tmux is missing: docker/ci-setup.sh installs Debian's package")
            pytest.skip("no tmux here (apt-get install tmux); CI installs it")
        self.socket = f"starling-test-{os.getpid()}-{time.monotonic_ns()}"
        # COLUMNS/LINES of the test runner would size the display instead of the pane.
        self.env = f"env -u COLUMNS -u LINES STARLING_HOME={shlex.quote(str(home))} "
        self.started = False

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30
        )
        return done.stdout

    def starling(self, args: str, first: bool) -> None:
        """``starling ARGS`` in a new pane (the first one opens the session)."""
        command = (
            f"cd {shlex.quote(str(ROOT))} && {self.env}{shlex.quote(sys.executable)} -m "
            f"starling.orchestrator.cli {args}; echo EXIT=$?; sleep 600"
        )
        # Through bash, whatever the user's shell: a non-interactive dash (Debian's /bin/sh,
        # tmux's shell when SHELL is unset or sh) dies of the Ctrl-C its command gets, pane
        # and all, and the `echo EXIT` never runs.
        shell = (shutil.which("bash") or "bash", "-c", command)
        if first:
            self._tmux("new-session", "-d", "-s", "t", "-x", "200", "-y", "60", *shell)
            self.started = True
        else:
            self._tmux("split-window", "-t", "t", "-v", "-l", "30", *shell)

    def screen(self, pane: int) -> str:
        return self._tmux("capture-pane", "-p", "-t", f"t.{pane}")

    def wait_for(
        self,
        pane: int,
        shows: Callable[[str], object],
        what: str,
        timeout: float = WAIT,
        every: float = 0.05,
    ) -> float:
        """Wait until ``shows(pane's screen)``; returns the time it took. A timeout's error
        holds both panes as they were, so that a failure in CI says what the terminal
        showed instead."""
        try:
            return wait_until(lambda: shows(self.screen(pane)), timeout, what, every)
        except AssertionError as timed_out:
            panes = "\n".join(f"--- pane {p} ---\n{self.screen(p).rstrip()}" for p in (0, 1))
            raise AssertionError(f"{timed_out}\n{panes}") from None

    def keys(self, pane: int, *keys: str) -> None:
        self._tmux("send-keys", "-t", f"t.{pane}", *keys)

    def close(self) -> None:
        if self.started:
            self._tmux("kill-server")


@pytest.fixture
def tmux(tmp_path, starling_home):
    terminal = Tmux(tmp_path, starling_home)
    yield terminal
    terminal.close()


def _link_row(screen: str, link: str) -> str:
    return next((line for line in screen.splitlines() if f" {link} " in line), "")


def test_progress_and_watch_show_a_cut_link(tmp_path, tmux, starling_home):
    path = _experiment(tmp_path, "watched", rounds=3000)
    tmux.starling(f"run {path} --out {tmp_path / 'out'} --no-report", first=True)
    bar = (
        r"rounds \(slowest node\) .*\d+/3000.*, [\d.]+ rounds/s, .* left, late \d+, "
        r"dropped by faults 0"
    )
    tmux.wait_for(
        0,
        lambda screen: re.search(bar, screen),
        "the progress bar (rounds done of 3000, pace, time left, losses) on the run's terminal",
    )
    tmux.starling("status --watch --run watched", first=False)
    tmux.wait_for(
        1,
        lambda screen: "delayed 30 ms" in _link_row(screen, "0 -> 1"),
        "status --watch showing link 0 -> 1 up, delayed 30 ms by link_delay",
    )
    cut = run_cli("links", "cut", "0", "1", "--run", "watched", env_home=starling_home)
    assert cut.returncode == 0, cut.stderr
    # The chain end to end (links -> journal -> watch -> the terminal) in real time, with a
    # bound a loaded machine keeps: the watch looks at the journal every 0.1 s and redraws
    # at once, which tests/orchestrator/cli/test_watch_refresh.py checks exactly on a fake clock
    # (here, on an idle machine, it shows within about 0.2 s).
    took = tmux.wait_for(
        1, lambda screen: "cut" in _link_row(screen, "0 -> 1"), "link 0 -> 1 shown cut", 5.0, 0.02
    )
    print(f"status --watch showed the cut {took:.2f} s after `starling links cut` returned")
    assert "cut" not in _link_row(tmux.screen(1), "1 -> 0")  # one way only
    tmux.keys(0, "C-c")  # the run stops, collects, writes its results
    tmux.wait_for(0, lambda screen: "EXIT=130" in screen, "the interrupted run's exit")
    tmux.wait_for(1, lambda screen: "has ended" in screen, "watch noticing the run ended")
    assert "rounds (slowest node)" not in tmux.screen(0)  # the bar left with the run


def test_progress_stays_out_of_logs_and_quiet_shows_none(tmp_path, tmux, starling_home):
    path = _experiment(tmp_path, "logged", rounds=250)
    tmux.starling(f"run {path} --out {tmp_path / 'quiet'} --no-report --quiet", first=True)
    log = run_cli(
        "run", path, "--out", str(tmp_path / "log"), "--no-report", env_home=starling_home
    )
    assert log.returncode == 0, log.stderr
    assert re.search(
        r"^starting 4 nodes \(local backend\): waiting until each one serves$", log.stdout, re.M
    )
    assert re.search(
        r"^waiting for node 0 at 127\.0\.0\.1:\d+ to answer its health check$", log.stdout, re.M
    )
    lines = re.findall(
        r"^rounds \d+.* of 250.*rounds/s.*left, late \d+, dropped by faults \d+$", log.stdout, re.M
    )
    assert lines, log.stdout  # the run lasts several seconds: at least one plain line
    assert "\x1b" not in log.stdout and "\r" not in log.stdout
    seen = []

    def ended(screen: str) -> bool:
        seen.append(screen)
        return "EXIT=" in screen

    tmux.wait_for(0, ended, "the quiet run's exit", every=0.1)
    assert "EXIT=0" in seen[-1]
    shown = [s for s in seen if "rounds (slowest node)" in s or "rounds/s" in s]
    assert not shown, f"progress shown with --quiet: {shown[0]}"
