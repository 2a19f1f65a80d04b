"""Where nodes run. ``backend.kind`` in the experiment names a module of this package.

A new backend is one module here, named after its kind (``local.py`` is ``kind: local``),
holding a class that implements :class:`~starling.orchestrator.execution.backends.base.Backend` with
that
``kind`` and a ``for_experiment(experiment, workdir)`` constructor. Nothing else is edited:
the kinds are the package's module names (found without importing them, so the experiment
parser, which must not load grpc, can check ``backend.kind``), and a backend's module is
imported only when an experiment uses it (a local run never loads the docker SDK).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from starling.node.params import ConfigError
from starling.orchestrator.execution.backends.base import Backend, BackendError

if TYPE_CHECKING:
    from starling.orchestrator.config.experiment import Experiment

__all__ = [
    "SUPPORT_MODULES",
    "Backend",
    "BackendError",
    "BackendFactory",
    "backend_factory",
    "backend_kinds",
    "make_backend",
]

BackendFactory = Callable[["Experiment", Path], Backend]
"""(experiment, work dir for node state and logs) -> a backend, not started yet."""

SUPPORT_MODULES = frozenset({"base", "netfault"})
"""Modules of this package that are not backends: the protocol, and shared mixins."""


def backend_kinds() -> tuple[str, ...]:
    """Every backend kind: the names of this package's backend modules, none imported."""
    names = (module.name for module in pkgutil.iter_modules(__path__))
    return tuple(sorted(n for n in names if n not in SUPPORT_MODULES and not n.startswith("_")))


def backend_factory(kind: str) -> BackendFactory:
    """The ``for_experiment`` of the class in module ``kind`` whose ``kind`` is ``kind``."""
    if kind not in backend_kinds():
        known = ", ".join(backend_kinds())
        raise ConfigError(f"backend.kind: unknown backend {kind!r} (known: {known})")
    module = importlib.import_module(f"{__name__}.{kind}")
    for value in vars(module).values():
        if isinstance(value, type) and getattr(value, "kind", None) == kind:
            factory: BackendFactory = value.for_experiment  # type: ignore[attr-defined]
            return factory
    raise ConfigError(f"backend.kind: module {module.__name__} defines no class with kind {kind!r}")


def make_backend(experiment: Experiment, workdir: Path) -> Backend:
    """The backend ``experiment.backend.kind`` names; a ConfigError naming the field if none."""
    return backend_factory(experiment.backend.kind)(experiment, Path(workdir))
