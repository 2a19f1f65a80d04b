"""What nodes holding their own data (``data: {source: node}``) said they use, kept for
``starling collect``.

Such a run's only ground truth is the recipe each node answers its configuration with (a
synthetic shard's index, seed and size; for a file, only that it is one): the evaluation
regenerates the shards from them (:func:`starling.orchestrator.evaluation.evaluate.reference_data`).
They lived only in the orchestrator's memory, so a run whose orchestrator died was collected
with no W2 and no posterior at all, the compose testbed's default experiment included. The
run now adds them to ``start.json`` (``node_data``) once its nodes are configured, and
``collect`` reads them back; a missing or damaged entry leaves W2 out, as before.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from starling.node.spec import DataSpec
from starling.orchestrator.core.seals import check_seal, sealed

__all__ = ["load_node_data", "save_node_data"]

KEY = "node_data"


def save_node_data(start_file: Path, node_data: Mapping[str, DataSpec]) -> None:
    """Add ``node_data`` to the run's ``start.json``, sealed again
    (:mod:`starling.orchestrator.core.seals`; nothing to add: left as it is)."""
    if not node_data:
        return
    start = json.loads(start_file.read_text(encoding="utf-8"))
    check_seal(start, start_file, "add the nodes' recipes to")  # as this run wrote it
    start[KEY] = {node: dataclasses.asdict(spec) for node, spec in node_data.items()}
    start_file.write_text(json.dumps(sealed(start), indent=2) + "\n")


def load_node_data(start: Mapping[str, Any]) -> dict[str, DataSpec]:
    """The recipes in a ``start.json`` read as a mapping; {} when there are none, or when
    one is not a recipe (a damaged file: W2 is left out rather than computed wrong)."""
    found = start.get(KEY)
    if not isinstance(found, Mapping):
        return {}
    names = {f.name for f in dataclasses.fields(DataSpec)}
    recipes: dict[str, DataSpec] = {}
    for node, entry in found.items():
        if not isinstance(entry, Mapping) or not set(entry) <= names:
            return {}
        values: dict[str, Any] = {
            str(k): tuple(v) if isinstance(v, list) else v for k, v in entry.items()
        }
        if not all(_plain(v) for v in values.values()):
            return {}
        try:
            recipes[str(node)] = DataSpec(**values)
        except TypeError:
            return {}
    return recipes


def _plain(value: object) -> bool:
    """A value a recipe holds: a name, a number, or a tuple of numbers."""
    if isinstance(value, tuple):
        return all(_plain(v) and not isinstance(v, (str, tuple)) for v in value)
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)
