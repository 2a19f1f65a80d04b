"""Where nodes run. ``backend.kind`` in the experiment picks a factory from :data:`BACKENDS`.

A new backend is one module implementing :class:`~orchestrator.backends.base.Backend` plus
one line here, and its name in ``BACKEND_KINDS`` of ``orchestrator/schema.py`` (the parser
cannot import this table without grpc; a test keeps the two in step).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from node.params import ConfigError
from orchestrator.backends.base import Backend, BackendError
from orchestrator.backends.docker import DockerBackend
from orchestrator.backends.inventory import InventoryBackend
from orchestrator.backends.local import LocalBackend

if TYPE_CHECKING:
    from orchestrator.experiment import Experiment

__all__ = ["BACKENDS", "Backend", "BackendError", "BackendFactory", "make_backend"]

BackendFactory = Callable[["Experiment", Path], Backend]
"""(experiment, work dir for node state and logs) -> a backend, not started yet."""

BACKENDS: dict[str, BackendFactory] = {
    "local": LocalBackend.for_experiment,
    "inventory": InventoryBackend.for_experiment,
    "docker": DockerBackend.for_experiment,
}


def make_backend(experiment: Experiment, workdir: Path) -> Backend:
    """The backend ``experiment.backend.kind`` names; a ConfigError naming the field if none."""
    kind = experiment.backend.kind
    factory = BACKENDS.get(kind)
    if factory is None:
        known = ", ".join(sorted(BACKENDS))
        raise ConfigError(f"backend.kind: unknown backend {kind!r} (known: {known})")
    return factory(experiment, Path(workdir))
