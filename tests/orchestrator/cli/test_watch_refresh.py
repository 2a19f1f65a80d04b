"""``starling status --watch`` shows a live change at its first look at the run's journal
(every 0.1 s), not at its next refresh (every second). A real journal file and a real view;
the waiting runs on a clock of the test's own, so the moment of the redraw is exact.
tests/test_terminal_e2e.py checks the whole chain on a real terminal, in real time."""

from __future__ import annotations

import os

import pytest

from starling.orchestrator.cli.watch import JOURNAL_SECONDS, REFRESH_SECONDS, _View, _wait
from starling.orchestrator.execution import live
from tests.fake_clock import FakeClock


def test_a_live_change_is_drawn_at_the_next_look_at_the_journal(tmp_path):
    record = live.RunRecord(
        name="watched", out_dir=str(tmp_path), orchestrator_pid=os.getpid(), addresses={}, pids={}
    )
    view = _View(record)
    clock = FakeClock()
    start = clock()
    drawn: list[float] = []
    cut = {"kind": "link", "action": "cut", "sender": "0", "receiver": "1", "up": False}
    clock.at(start + 3.5 * JOURNAL_SECONDS, lambda: live.log_event(record.out_dir, cut))
    _wait(view, lambda: drawn.append(clock()), clock, clock.sleep)
    # Drawn once, at the first look after the change; the wait lasts its whole refresh.
    assert drawn == [pytest.approx(start + 4 * JOURNAL_SECONDS)]
    assert clock() == pytest.approx(start + REFRESH_SECONDS)
    assert view.events[-1]["receiver"] == "1" and not view.events[-1]["up"]
    # Without a change, nothing is drawn until the refresh.
    _wait(view, lambda: drawn.append(clock()), clock, clock.sleep)
    assert len(drawn) == 1 and clock() == pytest.approx(start + 2 * REFRESH_SECONDS)
    view.close()
