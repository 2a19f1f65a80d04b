"""``STARLING_PROFILE_DIR``: a node's round loop under cProfile, for diagnostics.

If the variable is set, each node's round loop runs under cProfile and writes
``node-<id>.prof`` to that folder when it ends (docs/performance.md: how the round's cost
was measured). Otherwise the loop runs as it is.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from starling.node.runtime.run import Run

__all__ = ["PROFILE_ENV", "run_loop"]

PROFILE_ENV = "STARLING_PROFILE_DIR"


def run_loop(rounds: Callable[[Run], None], run: Run) -> None:
    """``rounds(run)``, profiled when ``STARLING_PROFILE_DIR`` names a folder."""
    folder = os.environ.get(PROFILE_ENV)
    if not folder:
        rounds(run)
        return
    import cProfile  # diagnostics only

    profile = cProfile.Profile()
    try:
        profile.runcall(rounds, run)
    finally:
        profile.dump_stats(os.path.join(folder, f"node-{run.spec.node_id}.prof"))
