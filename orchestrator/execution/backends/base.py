"""What the orchestrator needs from wherever nodes run: the :class:`Backend` base class.

A backend provisions node services and reports where they listen; everything else — configure,
start, status, samples — goes to the nodes over gRPC, never through the backend. The local
backend starts processes on loopback, the inventory backend drives nodes that already run
(devices, a compose testbed), the docker backend creates containers. A new backend is one
module, ``backends/<kind>.py``, with a subclass of :class:`Backend` for its kind and the kind's
settings model in :mod:`starling.orchestrator.config.backends` (see
:mod:`starling.orchestrator.execution.backends`). What a kind can do is its
:class:`~starling.orchestrator.config.backends.BackendCapabilities`; callers ask those, never
the kind's name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from starling.orchestrator.config.backends import BackendCapabilities, BackendSettings
from starling.orchestrator.core.errors import BackendError
from starling.orchestrator.planning.plan import RunPlan

__all__ = ["Backend", "BackendError"]


class Backend(ABC):
    """Where nodes live. A backend is a context manager: leaving the ``with`` block releases
    what it created (processes, containers, networks) and never touches nodes it did not
    create."""

    kind: ClassVar[str]
    """Short name, as written in ``backend.kind`` and in ``metrics.json``."""
    settings_model: ClassVar[type[BackendSettings]]
    """The model of its section (:mod:`starling.orchestrator.config.backends`)."""

    @property
    def capabilities(self) -> BackendCapabilities:
        return self.settings_model.capabilities

    @classmethod
    @abstractmethod
    def for_run(cls, settings: BackendSettings, workdir: Path, plan: RunPlan) -> Backend:
        """A backend for ``plan``'s nodes, not started yet; ``workdir``: where it may keep
        node state and logs (the run's ``nodes/`` folder)."""

    @classmethod
    def for_collect(cls, settings: BackendSettings, workdir: Path) -> Backend:
        """A backend that starts the nodes of a dead run again, idle, on the stores it kept
        in ``workdir`` (``starling collect``); only where ``capabilities.local_stores``."""
        raise BackendError(f"the {cls.kind} backend keeps no node stores on this machine")

    @abstractmethod
    def start(
        self, node_ids: Sequence[str], fixed: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """Make every node reachable; returns node id -> ``host:port`` the orchestrator
        dials. ``fixed`` pins addresses the experiment file gives."""

    @abstractmethod
    def addresses(self) -> dict[str, str]:
        """node id -> address, as of now (a restart may move a node)."""

    @abstractmethod
    def alive(self, node_id: str) -> bool | None:
        """Whether the node's process/container is up; None when the backend cannot tell
        (a remote device: ask it over gRPC instead)."""

    @abstractmethod
    def kill(self, node_id: str) -> None:
        """Crash the node (SIGKILL or the nearest equivalent); its store stays."""

    @abstractmethod
    def restart(self, node_id: str) -> str:
        """Bring a killed node back on its store; returns its (possibly new) address."""

    @abstractmethod
    def stop(self) -> None:
        """Stop what this backend started; idempotent."""

    def pids(self) -> dict[str, int | None]:
        """Node -> its process id where the backend knows one (for the live record)."""
        return dict.fromkeys(self.addresses())

    def state_dirs(self) -> dict[str, Path]:
        """Node -> its state folder on this machine, where the backend keeps one there
        (``capabilities.local_stores``); what ``starling collect`` starts it on again."""
        return {}

    def silenced(self) -> set[str]:
        """Nodes paused or off the network on purpose (kernel faults): not polled."""
        return set()

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
