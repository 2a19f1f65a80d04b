"""The exit codes of ``starling run`` and ``simulate``, and the last line that says why."""

from __future__ import annotations

import sys

__all__ = ["EXIT_DIVERGED", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_USAGE", "exit_code"]

EXIT_FAILED = 1
"""A node failed: its round loop raised (the account names node, round and cause)."""
EXIT_USAGE = 2
"""A usage or configuration error, reported in one line before anything ran."""
EXIT_DIVERGED = 3
"""A node's samples diverged: not finite, or beyond 1e150 (named in the account)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C or SIGTERM: what was collected is written, marked interrupted."""


def exit_code(metrics: dict) -> int:
    """The exit code a finished run or simulation earns, from its metrics: interrupted
    before failed before diverged before 0."""
    if metrics.get("interrupted"):
        from starling.orchestrator.core.phases import PHASES

        during = PHASES.get(metrics.get("interrupted_during") or "")
        missing = (metrics.get("not_collected") or {}).get("line")
        print(
            f"starling: interrupted by the user{f' {during}' if during else ''}; what was "
            f"collected is written{f', but {missing}' if missing else ''}; "
            f"exit {EXIT_INTERRUPTED}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    events = (metrics.get("faults") or {}).get("nodes") or []
    failed = [e for e in events if e.get("event") == "failed"]
    if failed:
        first = failed[0]
        print(
            f"starling: node {first['node']} failed ({first.get('error', '')}); exit {EXIT_FAILED}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if metrics.get("status") == "failed":
        print(
            f"starling: the run failed: no node stored a sample; exit {EXIT_FAILED}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    diverged = metrics.get("diverged") or {}
    if diverged:
        node, first_round = next(iter(diverged.items()))
        print(
            f"starling: node {node} diverged at round {first_round}"
            + (f" (and {len(diverged) - 1} more)" if len(diverged) > 1 else "")
            + f"; exit {EXIT_DIVERGED}",
            file=sys.stderr,
        )
        return EXIT_DIVERGED
    return 0
