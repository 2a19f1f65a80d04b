"""A node's stored runs: where each (experiment, node) keeps its files, and how a run the
node is no longer configured for is read back.

Every run lives in ``STATE_DIR/<experiment>/<node id>/`` (names percent-quoted so that any id
is one safe path component). A node that was killed for good and is started again on its
state dir — idle, never configured — still holds that run's sample store; ``StreamSamples``
with ``experiment`` and ``node_id`` set serves it from here, so the orchestrator collects a
dead node's samples over gRPC like any other, never by opening the node's files itself.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

from starling.node.protocol.contract import NodeState
from starling.node.runtime.store import SampleStore
from starling.node.runtime.streaming import Batch, stream_samples

__all__ = ["MAX_NAME_LENGTH", "NoStoredRun", "read_batches", "run_directory", "safe_name"]

MAX_NAME_LENGTH = 200
"""The longest an experiment name or node id may be once quoted for a file name: a path
component holds 255 bytes, and the run's folder may get a suffix when set aside."""


class NoStoredRun(LookupError):
    """The state dir holds no samples of the (experiment, node) asked for."""


def safe_name(name: str) -> str:
    """``name`` as one path component: percent-quoted, never ``.`` or ``..``."""
    quoted = urllib.parse.quote(name, safe="")
    return quoted if quoted not in (".", "..") else quoted.replace(".", "%2E")


def run_directory(state_dir: str | Path, experiment: str, node_id: str) -> Path:
    """Where the run of ``node_id`` in ``experiment`` keeps its store and checkpoints."""
    return Path(state_dir) / safe_name(experiment) / safe_name(node_id)


def read_batches(path: Path, offset: int, active: Callable[[], bool]) -> Iterator[Batch]:
    """Batches of the store file ``path`` from ``offset``, as ``StreamSamples`` sends a
    finished run's: read-only, so reading never changes a store — a torn last record
    (the process was killed inside a write) is left as it is and not sent; every whole
    record before it is. Raises :class:`NoStoredRun` (before the first batch) when there is
    no such file."""
    try:
        stored = path.is_file()
    except OSError:  # a name no file can have (too long): nothing stored under it either
        stored = False
    if not stored:
        raise NoStoredRun(f"no stored samples at {path.parent.name!r}")
    store = SampleStore(path, read_only=True)
    try:
        yield from stream_samples(lambda: (store, NodeState.DONE), offset, False, active)
    finally:
        store.close()
