"""Where nodes run: one module per ``backend.kind``, each a :class:`Backend` of that kind.

A new backend is one module here, named after its kind (``local.py`` is ``kind: local``),
holding a subclass of :class:`~starling.orchestrator.execution.backends.base.Backend` whose
``kind`` is that name, plus its settings model in :mod:`starling.orchestrator.config.backends`.
A backend's module is imported only when a run uses it (a local run never loads the docker
SDK): the kinds themselves are the settings' registry, which reading an experiment needs and
which loads no backend.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from starling.node.params import ConfigError
from starling.orchestrator.config.backends import BACKENDS, BackendSettings
from starling.orchestrator.core.errors import BackendError
from starling.orchestrator.execution.backends.base import Backend
from starling.orchestrator.planning.plan import RunPlan

__all__ = ["Backend", "BackendError", "backend_class", "make_backend"]


def backend_class(kind: str) -> type[Backend]:
    """The :class:`Backend` subclass of module ``kind`` whose ``kind`` is ``kind``."""
    if kind not in BACKENDS:
        known = ", ".join(sorted(BACKENDS))
        raise ConfigError(f"backend.kind: unknown backend {kind!r} (known: {known})")
    module = importlib.import_module(f"{__name__}.{kind}")
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and issubclass(value, Backend)
            and getattr(value, "kind", None) == kind
        ):
            return value
    raise ConfigError(f"backend.kind: module {module.__name__} defines no backend of kind {kind!r}")


def make_backend(settings: BackendSettings, workdir: Path, plan: RunPlan) -> Backend:
    """The backend ``settings.kind`` names, for ``plan``'s nodes, not started yet."""
    return backend_class(settings.kind).for_run(settings, Path(workdir), plan)
