"""Faults on nodes that a container engine runs for a deployment: a compose project or a swarm
stack (``starling deploy generate``), faulted through the engine rather than through the
run's orchestrator, which in such a deployment owns no node.

    starling nodes kill c --swarm starling          # or --compose PROJECT
    starling links cut a b --kernel --swarm starling

A node is the container of its service (``node-<id>`` as ``starling deploy generate`` names
them; the command line passes the names in), found on this machine's engine by the labels
compose and swarm put on it. What each engine allows:

* **kill** is SIGKILL to the container, a crash: compose leaves it down until ``restart``;
  swarm starts a new task on the same device per the stack's restart policy (on-failure).
* **restart** is a crash and a start, never a graceful stop (a node stopped by SIGTERM tells
  the run it was stopped from outside, and the run counts it out): compose kills the
  container if it runs and starts it again; swarm kills it and starts a new task on the same
  device and volume. Both resume from the node's store.
* **pause/unpause** freeze and thaw the container (cgroup freezer).
* **disconnect/reconnect** take a compose container off its network and back; a swarm task's
  overlay attachment is the swarm's own and cannot be taken off: refused in one line.
* **kernel link faults** drop the packets a sender sends to the receiver's port, in the
  receiver's network namespace (its input hook: the packets are lost on the wire, and the
  sender's TCP resends them), through a helper container of the ``starling-netfault`` image
  (:mod:`starling.orchestrator.execution.backends.netfault`). Each link has an nft table of
  its own, so that a cut from one command and a restore from another need no memory between
  them.

Everything acting on a container needs it on this engine: on a swarm of several devices, run
the command on the device that holds the node; a node held elsewhere is refused with a line
naming the device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starling.orchestrator.core.errors import BackendError
from starling.orchestrator.execution.backends.docker import docker_client
from starling.orchestrator.execution.backends.netfault import (
    NETFAULT_IMAGE,
    NODE_PORT,
    KernelFaultsMixin,
)

__all__ = ["Deployment", "EngineNodes"]


@dataclass(frozen=True)
class Deployment:
    """A compose project or a swarm stack, by name, with the names its files give."""

    engine: str
    """``compose`` or ``swarm``."""
    name: str
    service_of: Callable[[str], str]
    """Node id -> its service's name in the deployment's files (``node-<id>``)."""
    network_name: str
    """The deployment's network as its files name it (the engine prefixes the project's)."""

    def container_labels(self, node: str) -> list[str]:
        """The label filters that find node ``node``'s container on an engine."""
        if self.engine == "compose":
            return [
                f"com.docker.compose.project={self.name}",
                f"com.docker.compose.service={self.service_of(node)}",
            ]
        return [
            f"com.docker.stack.namespace={self.name}",
            f"com.docker.swarm.service.name={self.service(node)}",
        ]

    def service(self, node: str) -> str:
        """The engine's name of the node's service (swarm prefixes the stack's)."""
        own = self.service_of(node)
        return f"{self.name}_{own}" if self.engine == "swarm" else own

    @property
    def network(self) -> str:
        return f"{self.name}_{self.network_name}"


class EngineNodes(KernelFaultsMixin):
    """The nodes of one deployment as this engine sees them; see the module docstring."""

    def __init__(
        self, deployment: Deployment, client: Any = None, netfault_image: str = NETFAULT_IMAGE
    ):
        self.deployment = deployment
        self._client = client
        self.netfault_image = netfault_image
        self._drops: dict[str, dict[str, float]] = {}
        self._rates: dict[str, float] = {}
        self.quiet: set[str] = set()
        self._addresses: dict[str, str] = {}

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = docker_client()
        return self._client

    def _labels(self, node: str | None = None) -> dict[str, str]:
        labels = {"starling.deployment": f"{self.deployment.engine}:{self.deployment.name}"}
        if node is not None:
            labels["starling.node"] = node
        return labels

    @property
    def network(self) -> Any:
        from docker.errors import NotFound

        try:
            return self.client.networks.get(self.deployment.network)
        except NotFound:
            raise BackendError(self._nowhere("network", self.deployment.network)) from None

    def _nowhere(self, what: str, name: str) -> str:
        d = self.deployment
        return f"{d.engine} {d.name!r}: no {what} {name} on this engine (is it deployed here?)"

    # -- finding a node ------------------------------------------------------------------

    def container(self, node: str) -> Any:
        """The node's running (or paused) container on this engine; a BackendError naming
        where it runs instead, or that it does not run."""
        filters = {"label": self.deployment.container_labels(node)}
        found = self.client.containers.list(filters=filters)
        if found:
            return found[0]
        if self.deployment.engine == "swarm":
            device = self._task_device(node)
            if device:
                raise BackendError(
                    f"node {node} runs on swarm device {device}, not on this engine: run the "
                    "command there"
                )
        raise BackendError(self._nowhere("running container of node", node))

    def _tasks(self, node: str) -> list[dict[str, Any]]:
        from docker.errors import APIError

        try:
            return self.client.api.tasks(
                filters={"service": self.deployment.service(node), "desired-state": "running"}
            )
        except APIError as exc:
            raise BackendError(
                f"swarm {self.deployment.name!r}: cannot list node {node}'s tasks here "
                f"({exc.explanation or exc}); run the command on a manager"
            ) from None

    def _task_device(self, node: str) -> str:
        for task in self._tasks(node):
            device = self.client.api.inspect_node(task["NodeID"])
            return str(device.get("Description", {}).get("Hostname") or task["NodeID"])
        return ""

    def _address(self, node: str) -> str:
        """``ip:port`` of the node on the deployment's network: from its container here, or
        (swarm) from its running task wherever it is."""
        try:
            container = self.container(node)
        except BackendError:
            if self.deployment.engine != "swarm":
                raise
            for task in self._tasks(node):
                for attached in task.get("NetworksAttachments", []):
                    if attached["Network"]["Spec"]["Name"] == self.deployment.network:
                        return f"{attached['Addresses'][0].split('/')[0]}:{NODE_PORT}"
            raise BackendError(self._nowhere("running task of node", node)) from None
        container.reload()
        networks = container.attrs["NetworkSettings"]["Networks"]
        ip = networks.get(self.deployment.network, {}).get("IPAddress", "")
        if not ip:
            raise BackendError(f"node {node}: not on the network {self.deployment.network}")
        return f"{ip}:{NODE_PORT}"

    # -- node faults -----------------------------------------------------------------------

    def kill(self, node: str) -> str:
        """SIGKILL its container; what happens next, in words."""
        container = self.container(node)
        if container.status == "paused":
            container.unpause()
        container.kill(signal="SIGKILL")
        if self.deployment.engine == "swarm":
            return "killed; swarm starts it again on its device (restart policy on-failure)"
        return "killed; it stays down until `starling nodes restart`"

    def restart(self, node: str) -> str:
        """A crash and a start on the same store. Never a graceful stop: a node stopped by
        SIGTERM tells the run it was stopped from outside, and the run counts it out."""
        if self.deployment.engine == "swarm":
            self.kill(node)  # refused, naming the device, when the task runs elsewhere
            return "restarting: killed, swarm starts a new task on its device and volume"
        found = self.client.containers.list(
            all=True, filters={"label": self.deployment.container_labels(node)}
        )
        if not found:
            raise BackendError(self._nowhere("container of node", node))
        container = found[0]
        if container.status == "paused":
            container.unpause()
        if container.status in ("running", "paused"):
            container.kill(signal="SIGKILL")
            container.wait(timeout=30)
        container.start()
        return "restarted on its volume"

    def disconnect(self, node: str) -> None:
        self._refuse_on_swarm("disconnect", node)
        super().disconnect(node)

    def reconnect(self, node: str) -> None:
        """Back on the project's network under the names its peers dial: the engine gives a
        reconnected container none of the aliases compose gave it (``node-e`` and its
        container name), so without them no peer could resolve it again and every round
        waited its deadline for it."""
        self._refuse_on_swarm("reconnect", node)
        container = self.container(node)
        service = container.labels.get("com.docker.compose.service")
        aliases = [name for name in (container.name, service) if name]
        self.network.connect(container, aliases=aliases or None)

    def _refuse_on_swarm(self, action: str, node: str) -> None:
        if self.deployment.engine == "swarm":
            raise BackendError(
                f"nodes {action} {node}: swarm keeps a task on its overlay network and cannot "
                "take it off; cut its links instead (starling links cut A B --kernel --swarm)"
            )

    # -- kernel link faults, in the receiver's namespace -------------------------------------

    def _table(self, sender: str) -> str:
        return "starling_from_" + "".join(c if c.isalnum() else "_" for c in sender)

    def drop_link(self, sender: str, receiver: str, percent: float = 100.0) -> None:
        """Drop ``percent`` % of the packets from ``sender`` to ``receiver``'s gRPC port, as
        they arrive at ``receiver``: one nft table per link, replaced whole."""
        source = self._address(sender).rpartition(":")[0]
        table = self._table(sender)
        chance = "" if percent >= 100 else f"numgen random mod 100 < {int(round(percent))} "
        script = (
            f"add table inet {table}\ndelete table inet {table}\n"
            f"table inet {table} {{\n  chain in {{\n"
            "    type filter hook input priority 0; policy accept;\n"
            f"    ip saddr {source} tcp dport {NODE_PORT} {chance}drop\n"
            "  }\n}\n"
        )
        self._helper(receiver, "nft", script)

    def restore_link(self, sender: str, receiver: str) -> None:
        table = self._table(sender)
        self._helper(receiver, "nft", f"add table inet {table}\ndelete table inet {table}\n")
