"""The orchestrator's own folder for this user: ``$STARLING_HOME``, default ``~/.starling``.

It holds the key that seals run records (:mod:`starling.orchestrator.core.seals`) and the
pointers to the runs under way (``active/``, :mod:`starling.orchestrator.execution.live`).
The orchestrator image sets it on the results volume (``/results/.starling``), so that a
record sealed by one container is trusted by the next one that mounts the same results.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["HOME_VARIABLE", "starling_home"]

HOME_VARIABLE = "STARLING_HOME"


def starling_home() -> Path:
    """``$STARLING_HOME`` if set and not blank, else ``~/.starling``."""
    chosen = os.environ.get(HOME_VARIABLE, "").strip()
    return Path(chosen) if chosen else Path.home() / ".starling"
