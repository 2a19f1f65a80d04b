"""``STARLING_PROFILE_DIR``: a node's event loop under cProfile, for diagnostics.

If the variable is set, each node profiles its event loop's thread while the round loop
runs — the rounds and the outbound links' writes, which share it
(:mod:`starling.node.runtime.event_loop`) — and writes ``node-<id>.prof`` to that folder
when the round loop ends (docs/performance.md: how the round's cost was measured).
Otherwise the loop runs as it is.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Coroutine
from typing import Any

from starling.node.runtime.run import Run

__all__ = ["PROFILE_ENV", "run_loop"]

PROFILE_ENV = "STARLING_PROFILE_DIR"


async def run_loop(rounds: Callable[[Run], Coroutine[Any, Any, None]], run: Run) -> None:
    """``await rounds(run)``, its thread profiled when ``STARLING_PROFILE_DIR`` names a
    folder."""
    folder = os.environ.get(PROFILE_ENV)
    if not folder:
        await rounds(run)
        return
    import cProfile  # diagnostics only

    profile = cProfile.Profile()
    profile.enable()
    try:
        await rounds(run)
    finally:
        profile.disable()
        profile.dump_stats(os.path.join(folder, f"node-{run.spec.node_id}.prof"))
