"""Progress of ``run``, ``simulate`` and studies: on a terminal a live display (rich), in a
log plain lines now and then, with ``--quiet`` nothing.

What it shows: rounds done per node (the slowest and the fastest), rounds per second of
the slowest node, the time left at that pace, messages late or dropped by a fault so far
(``withheld``, as the nodes count them; where the
engine knows them while running), and in a study the cells done. Start-up steps say what
they wait for ("waiting for node 3 at 127.0.0.1:50053 to answer its health check").

The display is :func:`make_progress`'s choice: :class:`LiveProgress` when stdout is a
terminal and rich is installed, else :class:`PlainProgress` (a line when the rounds start,
then one every :data:`PLAIN_SECONDS`, no control characters, fit for a log file; with
``--log-format json`` JSON lines of event ``progress``), :class:`Progress` (silent) with
``--quiet``. Messages printed while a live display runs appear above it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import IO, Any

__all__ = ["PLAIN_SECONDS", "LiveProgress", "PlainProgress", "Progress", "make_progress"]

PLAIN_SECONDS = 5.0
"""Seconds between two progress lines in a log (when stdout is not a terminal)."""


class Pace:
    """Rounds per second of the slowest node, measured from the first update."""

    def __init__(self) -> None:
        self.first: tuple[float, int] | None = None

    def rate(self, low: int) -> float | None:
        now = time.monotonic()
        if self.first is None or low < self.first[1]:
            self.first = (now, low)
            return None
        elapsed, done = now - self.first[0], low - self.first[1]
        return done / elapsed if elapsed > 0.5 and done > 0 else None


def describe_rounds(
    done: Mapping[str, int],
    total: int,
    rate: float | None,
    late: int | None,
    withheld: int | None,
) -> str:
    """``rounds 41..47 of 100 (slowest node 3, fastest node 0), 12.3 rounds/s, 5 s left,
    late 0, dropped by faults 12`` (the nodes' ``withheld``: a cut, a drop, a scheduled loss)."""
    if not done:
        return f"rounds 0 of {total}"
    slow = min(done, key=lambda n: (done[n], n))
    fast = max(done, key=lambda n: (done[n], n))
    low, high = done[slow], done[fast]
    text = (
        f"rounds {low} of {total}"
        if low == high
        else (f"rounds {low}..{high} of {total} (slowest node {slow}, fastest node {fast})")
    )
    if rate:
        text += f", {rate:.1f} rounds/s, {_duration((total - low) / rate)} left"
    if late is not None:
        text += f", late {late}"
    if withheld is not None:
        text += f", dropped by faults {withheld}"
    return text


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    return f"{seconds // 60} min {seconds % 60:02d} s"


class Progress:
    """The silent display (``--quiet``); the others override what they show."""

    def step(self, text: str) -> None:
        """A start-up step and what it waits for."""

    def rounds(
        self,
        done: Mapping[str, int],
        total: int,
        late: int | None = None,
        withheld: int | None = None,
    ) -> None:
        """Rounds done per node (round index + 1), of ``total``."""

    def cells(self, done: int, total: int, label: str = "") -> None:
        """A study's cells: ``done`` of ``total``, ``label`` the one running now."""

    def inner(self) -> Progress:
        """The display for one run inside a study (rounds only)."""
        return self

    def finished(self) -> None:
        """The rounds are over (evaluation and writing follow): stop showing them."""

    def close(self) -> None:
        pass

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class PlainProgress(Progress):
    """Plain lines for a log: a start-up step when it starts, the rounds when they start and
    then every few seconds. ``emit(message, **fields)`` writes a line (with
    ``--log-format json`` the orchestrator's JSON lines, :mod:`starling.orchestrator.core.output`:
    the fields ``event`` and ``round`` go into them); by default it prints to ``stream``."""

    def __init__(
        self,
        stream: IO[str] | None = None,
        every: float = PLAIN_SECONDS,
        emit: Callable[..., None] | None = None,
    ):
        self.stream = stream or sys.stdout
        self.every = every
        self.emit = emit
        self.last: float | None = None
        self.pace = Pace()

    def _line(self, text: str, **fields: Any) -> None:
        if self.emit is not None:
            self.emit(text, **fields)
        else:
            print(text, file=self.stream, flush=True)

    def step(self, text: str) -> None:
        self._line(text, event="starting")

    def rounds(self, done, total, late=None, withheld=None) -> None:
        low = min(done.values(), default=0)
        rate = self.pace.rate(low)
        now = time.monotonic()
        if done and (self.last is None or now - self.last >= self.every):
            self.last = now
            text = describe_rounds(done, total, rate, late, withheld)
            self._line(text, event="progress", round=low)

    def finished(self) -> None:
        self.last = None  # the next run (of a study) says when it starts
        self.pace = Pace()

    def cells(self, done: int, total: int, label: str = "") -> None:
        self.finished()
        if label:
            self._line(f"run {done + 1} of {total}: {label}", event="study_progress")

    def inner(self) -> Progress:
        return self


class LiveProgress(Progress):
    """A rich display on a terminal: a spinner for start-up steps, bars for rounds and
    cells, redrawn in place; what is printed meanwhile scrolls above it."""

    def __init__(self, stream: IO[str] | None = None):
        from rich.console import Console
        from rich.progress import BarColumn, SpinnerColumn, TextColumn
        from rich.progress import Progress as Bars

        console = Console(file=stream or sys.stdout)
        # transient: the bars leave the terminal when done; the printed account stays.
        self.bars = Bars(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[info]}"),
            console=console,
            transient=True,
            refresh_per_second=4,
        )
        self.bars.start()
        self.task_rounds: Any = None
        self.task_cells: Any = None
        self.task_step: Any = None
        self.pace = Pace()

    def step(self, text: str) -> None:
        if self.task_step is None:
            self.task_step = self.bars.add_task(text, total=None, info="")
        else:
            self.bars.update(self.task_step, description=text)

    def _end_step(self) -> None:
        if self.task_step is not None:
            self.bars.remove_task(self.task_step)
            self.task_step = None

    def rounds(self, done, total, late=None, withheld=None) -> None:
        self._end_step()
        low = min(done.values(), default=0)
        text = describe_rounds(done, total, self.pace.rate(low), late, withheld)
        info = f"{low}/{total}" + text.split(f" of {total}", 1)[-1]
        if self.task_rounds is None:
            self.task_rounds = self.bars.add_task("rounds (slowest node)", total=total, info="")
        self.bars.update(self.task_rounds, completed=low, total=total, info=info)

    def finished(self) -> None:
        self._end_step()
        if self.task_rounds is not None:
            self.bars.remove_task(self.task_rounds)
            self.task_rounds = None
        self.pace = Pace()

    def cells(self, done: int, total: int, label: str = "") -> None:
        if self.task_cells is None:
            self.task_cells = self.bars.add_task("study cells", total=total, info="")
        running = f", running {label}" if label else ""
        self.bars.update(self.task_cells, completed=done, info=f"{done}/{total}{running}")
        self.finished()  # the next run starts its rounds afresh

    def close(self) -> None:
        self._end_step()
        self.bars.stop()


def make_progress(
    quiet: bool = False,
    stream: IO[str] | None = None,
    emit: Callable[..., None] | None = None,
    plain: bool = False,
) -> Progress:
    """The display for this process's stdout (see the module docstring); ``plain`` asks for
    lines even on a terminal (JSON logs), written by ``emit`` when given."""
    stream = stream or sys.stdout
    if quiet:
        return Progress()
    if stream.isatty() and not plain:
        try:
            return LiveProgress(stream)
        except ImportError:  # rich is the orchestrator extra's; plain lines without it
            pass
    return PlainProgress(stream, emit=emit)
