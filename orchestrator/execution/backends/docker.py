"""Nodes as containers of the ``starling-node`` image, through the docker SDK (``kind: docker``).

``backend: {kind: docker, image: starling-node:latest}``: the backend creates one bridge
network for the run and one container per node on it, each with its own named volume for its
store (``/var/lib/starling``, as in ``docker-compose.yml``). The orchestrator runs on the host
and dials each container at its IP on that bridge, port 50051; the nodes dial each other the
same way. Every object carries the label ``starling.run=<run id>`` (and ``starling.node``),
so ``starling docker cleanup`` finds what a crashed orchestrator left behind.

``kill`` is SIGKILL to the container (a crash; the volume stays), ``restart`` starts the same
container again on its volume, so the node resumes from its checkpoint. Leaving the ``with``
block removes the containers, the network and the volumes — on success, on error and on
Ctrl-C (the run loop turns SIGINT/SIGTERM into an exception that unwinds through it).
"""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from starling.node.params import ConfigError
from starling.orchestrator.config.backends import BackendSettings, DockerSettings
from starling.orchestrator.core.errors import BackendError
from starling.orchestrator.core.retry import RetryPolicy, constant, retry
from starling.orchestrator.execution.backends.base import Backend
from starling.orchestrator.execution.backends.inventory import wait_serving
from starling.orchestrator.execution.backends.netfault import NETFAULT_IMAGE, KernelFaultsMixin
from starling.orchestrator.planning.plan import RunPlan

__all__ = ["DEFAULT_IMAGE", "LABEL_NODE", "LABEL_RUN", "DockerBackend", "cleanup", "docker_client"]

DEFAULT_IMAGE = "starling-node:latest"
LABEL_RUN = "starling.run"
LABEL_NODE = "starling.node"
NODE_PORT = 50051
STORE = "/var/lib/starling"


def docker_client() -> Any:
    """A docker SDK client for the local engine; a BackendError saying why there is none."""
    try:
        from docker.errors import DockerException

        import docker
    except ImportError:
        raise BackendError(
            "backend docker: the docker SDK is not installed (pip install 'starling-mcmc[docker]')"
        ) from None
    try:
        client = docker.from_env()
        client.ping()
    except DockerException as exc:
        raise BackendError(f"backend docker: no Docker engine answers ({exc})") from None
    return client


class DockerBackend(KernelFaultsMixin, Backend):
    """:class:`~starling.orchestrator.execution.backends.base.Backend` on containers; see the module
    docstring."""

    kind = "docker"
    settings_model = DockerSettings

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        ready_timeout: float = 60.0,
        client=None,
        netfault_image: str = NETFAULT_IMAGE,
    ):
        self.image = image
        self.netfault_image = netfault_image
        self.ready_timeout = float(ready_timeout)
        self.run_id = time.strftime("%Y%m%d%H%M%S") + "-" + secrets.token_hex(3)
        self._client = client
        self.network: Any = None  # a docker SDK Network once started (the SDK is untyped)
        self.containers: dict[str, Any] = {}
        self.volumes: dict[str, Any] = {}
        self._addresses: dict[str, str] = {}
        self._drops: dict[str, dict[str, float]] = {}
        self._delays: dict[str, dict[str, tuple[float, float]]] = {}
        self._rates: dict[str, float] = {}
        self.quiet: set[str] = set()
        """Nodes paused or off the network on purpose (:meth:`silenced`)."""
        self.needs_helper = False
        """Link or rate faults are scheduled: the helper image must be there before start."""

    @classmethod
    def for_run(cls, settings: BackendSettings, workdir: Path, plan: RunPlan) -> DockerBackend:
        """From ``backend.image``, ``backend.netfault_image`` and ``backend.ready_timeout``;
        the helper image is needed when the plan has link or rate faults in the kernel."""
        assert isinstance(settings, DockerSettings)
        backend = cls(
            settings.image, settings.ready_timeout, netfault_image=settings.netfault_image
        )
        backend.needs_helper = any(
            f.kind not in ("pause", "disconnect") for f in plan.kernel_faults
        )
        return backend

    @property
    def client(self):
        if self._client is None:
            self._client = docker_client()
        return self._client

    def _labels(self, node: str | None = None) -> dict[str, str]:
        labels = {LABEL_RUN: self.run_id}
        if node is not None:
            labels[LABEL_NODE] = node
        return labels

    def _name(self, node: str | None = None) -> str:
        safe = "" if node is None else "-" + "".join(c if c.isalnum() else "_" for c in node)
        return f"starling-{self.run_id}{safe}"

    def start(
        self, node_ids: Sequence[str], fixed: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """Network, volumes and containers; the address of each once it is SERVING. Anything
        created is removed again if a node does not come up."""
        from docker.errors import DockerException

        if fixed and any(fixed.values()):
            node = next(n for n, a in fixed.items() if a)
            raise ConfigError(
                f"nodes.{node}.address: the docker backend places nodes itself; drop the address"
            )
        if self.needs_helper:
            self.check_helper()  # refused before anything is created
        try:
            self.network = self.client.networks.create(
                self._name(), driver="bridge", labels=self._labels()
            )
            for node in node_ids:
                volume = self.client.volumes.create(self._name(node), labels=self._labels(node))
                self.volumes[node] = volume
                self.containers[node] = self.client.containers.run(
                    self.image,
                    # Plain gRPC on the run's own private bridge (no TLS files in the
                    # container), so the node must be told a non-loopback listen is meant.
                    command=["--id", node, "--insecure"],
                    name=self._name(node),
                    hostname=self._name(node)[-63:],
                    detach=True,
                    labels=self._labels(node),
                    network=self.network.name,
                    volumes={volume.name: {"bind": STORE, "mode": "rw"}},
                )
            for node in node_ids:
                self._addresses[node] = self._address(node)
            wait_serving(self._addresses, self.ready_timeout)
        except DockerException as exc:
            self.stop()
            raise BackendError(f"backend docker: could not start the nodes: {exc}") from None
        except BaseException:
            self.stop()  # a run that cannot start all of its nodes starts none
            raise
        return dict(self._addresses)

    def _address(self, node: str) -> str:
        container = self.containers[node]
        container.reload()
        networks = container.attrs["NetworkSettings"]["Networks"]
        ip = networks.get(self.network.name, {}).get("IPAddress", "")
        if not ip:
            status = container.status
            raise BackendError(
                f"backend docker: node {node} has no address on {self.network.name} "
                f"(container {status}): {self.logs(node, 1) or 'no output'}"
            )
        return f"{ip}:{NODE_PORT}"

    def logs(self, node: str, lines: int = 20) -> str:
        """The last lines the node's container printed."""
        try:
            text = self.containers[node].logs(tail=lines).decode(errors="replace")
        except Exception:  # noqa: BLE001 - logs are only for an error message
            return ""
        return text.strip()

    def addresses(self) -> dict[str, str]:
        return dict(self._addresses)

    def alive(self, node_id: str) -> bool | None:
        """Running or paused: the process is there (a paused node is frozen, not dead)."""
        container = self.containers.get(node_id)
        if container is None:
            return False
        try:
            container.reload()
        except Exception:  # noqa: BLE001 - gone is not alive
            return False
        return container.status in ("running", "paused")

    def container(self, node_id: str):
        try:
            return self.containers[node_id]
        except KeyError:
            raise BackendError(f"backend docker: no node {node_id!r} in this run") from None

    def kill(self, node_id: str) -> None:
        """SIGKILL the container: a crash, not a shutdown. Its volume stays."""
        container = self.container(node_id)
        container.reload()
        if container.status == "paused":
            container.unpause()
        if container.status in ("running", "paused"):
            container.kill(signal="SIGKILL")
            container.wait(timeout=30)

    def restart(self, node_id: str) -> str:
        """The same container again, on its volume; its (possibly new) address once it
        serves. Peers dial the address they were given, so it must not move."""
        container = self.container(node_id)
        if self.alive(node_id):
            self.kill(node_id)
        container.start()
        address = self._address(node_id)
        if address != self._addresses[node_id]:
            raise BackendError(
                f"backend docker: node {node_id} came back at {address}, not at "
                f"{self._addresses[node_id]}, where its peers dial it"
            )
        wait_serving({node_id: address}, self.ready_timeout)
        self.reapply(node_id)  # a new network namespace: its packet filters are gone
        return address

    def silenced(self) -> set[str]:
        return set(self.quiet)

    def pids(self) -> dict[str, int | None]:
        pids: dict[str, int | None] = {}
        for node, container in self.containers.items():
            pid = container.attrs.get("State", {}).get("Pid") if container.attrs else None
            pids[node] = pid or None
        return pids

    def stop(self) -> None:
        """Remove every container, the network and the volumes of this run; idempotent."""
        if self._client is None:
            return
        cleanup(self._client, self.run_id)
        self.containers.clear()
        self.volumes.clear()
        self.network = None


def cleanup(client, run_id: str | None = None) -> dict[str, list[str]]:
    """Remove containers, networks and volumes labelled ``starling.run`` (of ``run_id``, or
    of every run); returns the names removed, by kind."""
    from docker.errors import APIError, NotFound

    label = f"{LABEL_RUN}={run_id}" if run_id else LABEL_RUN
    removed: dict[str, list[str]] = {"containers": [], "networks": [], "volumes": []}
    for container in client.containers.list(all=True, filters={"label": label}):
        try:
            container.remove(force=True, v=True)
            removed["containers"].append(container.name)
        except NotFound:
            pass
    for network in client.networks.list(filters={"label": label}):
        try:
            network.remove()
            removed["networks"].append(network.name)
        except NotFound:
            pass
    # A volume is still in use for a moment while its container is being removed.
    in_use = RetryPolicy(
        20, lambda exc: isinstance(exc, APIError) and not isinstance(exc, NotFound), constant(0.25)
    )
    for volume in client.volumes.list(filters={"label": label}):
        try:
            retry(functools.partial(volume.remove, force=True), in_use)
            removed["volumes"].append(volume.name)
        except NotFound:
            pass
    return removed
