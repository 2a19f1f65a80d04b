"""What ``starling run`` is doing now: the phase a Ctrl-C or SIGTERM is said to have come in.

The runner enters each phase as it goes (starting the nodes, configuring them, the rounds,
collecting, shutting the nodes down); :func:`~starling.orchestrator.results.write.close_run` enters
evaluating and writing results. An interrupt is recorded with the phase it came in: in the
account, in ``metrics.json`` (``interrupted_during``), in the last line printed, and in the
line of a run interrupted before its results were written
(:mod:`starling.orchestrator.results.early_end`).

Before, every interrupt the runner did not catch inside its rounds was recorded as coming
"while the nodes were starting": one while the nodes were shut down at the end of a run
too, after every sample had been collected.
"""

from __future__ import annotations

__all__ = ["PHASES", "during", "enter", "now"]

PHASES = {
    "starting": "while the nodes were starting",
    "configuring": "while the nodes were being configured",
    "rounds": "during the rounds",
    "collecting": "while the samples were being collected",
    "shutting down": "while the nodes were being shut down",
    "evaluating": "while the samples were being evaluated",
    "writing results": "while the results were being written",
}
"""Phase name (as written in ``metrics.json``) -> how a line says it."""

_now = ["starting"]


def enter(phase: str) -> None:
    """The run is in ``phase`` from now on (one of :data:`PHASES`)."""
    if phase not in PHASES:
        raise ValueError(f"unknown run phase {phase!r}")
    _now[0] = phase


def now() -> str:
    """The phase the run is in."""
    return _now[0]


def during(phase: str | None = None) -> str:
    """``phase`` (by default the current one) as a line says it: "during the rounds"."""
    return PHASES[phase or _now[0]]
