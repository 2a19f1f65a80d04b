"""A Ctrl-C that lands where Python cannot raise it still ends the run.

Python runs a signal's handler at the next bytecode of the main thread. If that bytecode is
inside a finaliser (``__del__``), the KeyboardInterrupt is printed as "Exception ignored"
and dropped. These tests land a real SIGINT (or SIGTERM) inside a real finaliser, check that
Python drops it, and that :func:`raise_remembered` (called by the rounds' loops) raises it
again: in a bare block, in an in-process simulation, and in a run on local node processes.
"""

from __future__ import annotations

import gc
import signal
import sys
import threading

import numpy as np
import pytest
import yaml

from starling.orchestrator.config.load import load
from starling.orchestrator.core.interrupts import (
    Terminated,
    interrupts_deferred,
    interrupts_remembered,
    raise_remembered,
)
from starling.orchestrator.core.progress import Progress
from starling.orchestrator.planning.plan import plan
from tests.conftest import ROOT


class _SignalWhenCollected:
    """Raises ``signum`` at this process from its finaliser, where Python drops the raise."""

    def __init__(self, signum: int):
        self.signum = signum

    def __del__(self):
        signal.raise_signal(self.signum)


def _drop_in_finaliser(signum: int) -> BaseException | None:
    """Land ``signum`` in a finaliser; returns what Python dropped there (through
    ``sys.unraisablehook``, where it hands such exceptions)."""
    dropped: list[BaseException | None] = []
    hook, sys.unraisablehook = sys.unraisablehook, lambda info: dropped.append(info.exc_value)
    try:
        _SignalWhenCollected(signum)  # unreferenced at once: __del__ runs here
        gc.collect()
    finally:
        sys.unraisablehook = hook
    return dropped[0] if dropped else None


@pytest.mark.parametrize(
    ("signum", "raised"), [(signal.SIGINT, KeyboardInterrupt), (signal.SIGTERM, Terminated)]
)
def test_a_signal_dropped_in_a_finaliser_is_raised_again(signum, raised):
    with interrupts_remembered():
        assert isinstance(_drop_in_finaliser(signum), raised)  # Python dropped it, as said
        with pytest.raises(raised):
            raise_remembered()
        raise_remembered()  # once: it was raised, nothing is left


def test_a_signal_raised_normally_is_also_remembered_and_the_block_forgets_it():
    with interrupts_remembered():
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    with interrupts_remembered():
        raise_remembered()  # a new block starts with nothing remembered


def test_the_handlers_before_the_block_are_back_after_it():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with interrupts_remembered():
        assert signal.getsignal(signal.SIGINT) is not before[0]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_an_ignored_ctrl_c_stays_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as under nohup or `cmd &`
    try:
        with interrupts_remembered():
            signal.raise_signal(signal.SIGINT)  # ignored: nothing raised,
            raise_remembered()  # nothing remembered
            with pytest.raises(Terminated):
                signal.raise_signal(signal.SIGTERM)  # SIGTERM still ends the run
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_signal_inside_a_deferring_block_is_raised_as_it_ends():
    reached = []
    with interrupts_remembered():
        with pytest.raises(Terminated):
            with interrupts_deferred():
                with interrupts_deferred():  # nested: the outermost end raises
                    signal.raise_signal(signal.SIGTERM)
                    reached.append("inner")
                reached.append("outer")
        raise_remembered()  # raised once: nothing is left for the loop to raise again
    assert reached == ["inner", "outer"]


def test_a_deferred_signal_behind_an_error_is_raised_by_the_loop():
    with interrupts_remembered():
        with pytest.raises(ValueError):  # the block's own failure goes on first
            with interrupts_deferred():
                signal.raise_signal(signal.SIGINT)
                raise ValueError("the call failed")
        with pytest.raises(KeyboardInterrupt):
            raise_remembered()
        with interrupts_deferred():
            pass  # raised already: not again here


def test_a_block_on_another_thread_defers_nothing_on_the_main_one():
    inside, leave = threading.Event(), threading.Event()

    def worker() -> None:
        with interrupts_deferred():  # a collection thread inside its gRPC call
            inside.set()
            leave.wait(10)

    thread = threading.Thread(target=worker)
    with interrupts_remembered():
        thread.start()
        try:
            assert inside.wait(10)
            with pytest.raises(KeyboardInterrupt):  # at once, not when the worker's call ends
                signal.raise_signal(signal.SIGINT)
        finally:
            leave.set()
            thread.join()


class _CtrlCLostAt(Progress):
    """A display whose drawing, once the rounds reach ``at``, drops a Ctrl-C in a finaliser
    (the place the rounds' loops call it from is where a poll's dropped gRPC call would)."""

    def __init__(self, at: int):
        self.at = at
        self.dropped_at: int | None = None

    def rounds(self, done, total, late=None, withheld=None):
        reached = min(done.values())
        if self.dropped_at is None and reached >= self.at:
            self.dropped_at = reached
            assert isinstance(_drop_in_finaliser(signal.SIGINT), KeyboardInterrupt)


def _experiment(tmp_path, rounds: int, **extra):
    raw = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    raw.update(name="lost-ctrl-c", rounds=rounds, **extra)
    path = tmp_path / "lost.yaml"
    path.write_text(yaml.safe_dump(raw))
    return plan(load(str(path)))


def test_a_simulation_ends_interrupted_after_a_dropped_ctrl_c(tmp_path):
    from starling.orchestrator.execution.simulation import simulate_experiment

    shown = _CtrlCLostAt(at=5)
    metrics = simulate_experiment(
        _experiment(tmp_path, rounds=400), tmp_path / "out", say=lambda _: None, progress=shown
    )
    assert shown.dropped_at == 5
    assert metrics["interrupted"] is True
    assert metrics["status"] == "interrupted"
    with np.load(tmp_path / "out" / "samples" / "node-0.npz") as data:
        assert data["samples"].shape[0] < 5000
    # Raised again at the end of the next round: the five rounds shown and that one are kept.
    with np.load(tmp_path / "out" / "samples" / "node-0.npz") as data:
        assert data["samples"].shape[0] == 6


@pytest.mark.e2e
def test_a_run_on_node_processes_ends_interrupted_after_a_dropped_ctrl_c(tmp_path, starling_home):
    from starling.orchestrator.execution.runner import run_experiment

    # Long enough that the drop comes well before the end (a few hundred rounds a second
    # here), short enough that a run which missed the interrupt ends complete and fails.
    shown = _CtrlCLostAt(at=3)
    metrics = run_experiment(
        _experiment(tmp_path, rounds=5000, chains=2),
        tmp_path / "out",
        say=lambda _: None,
        progress=shown,
    )
    assert shown.dropped_at is not None
    assert metrics["interrupted"] is True, metrics.get("status")
    assert metrics["status"] == "interrupted"
    with np.load(tmp_path / "out" / "samples" / "node-0.npz") as data:
        assert data["samples"].shape[0] < 5000
