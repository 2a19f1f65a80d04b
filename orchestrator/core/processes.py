"""Whether a process still runs, asked of the kernel without touching it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["process_alive"]


def process_alive(pid: Any) -> bool:
    """Whether process ``pid`` exists and is not a zombie (ended, waiting for its parent to
    read its exit code). Anything but a positive integer is no process: ``os.kill(0, 0)``
    or ``-1`` would ask about a whole group, never what is meant. A process of another user
    (PermissionError) is alive."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:  # beyond a pid_t
        return False
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """``pid``'s state in /proc is Z; False where /proc cannot say (not Linux)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
