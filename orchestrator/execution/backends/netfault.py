"""Kernel faults on the docker backend's containers (:mod:`starling.orchestrator.faults.kernel`).

Node faults go through the engine: ``pause`` freezes the container's processes (cgroup
freezer; its sockets stay open, so peers see silence, then timeouts), ``disconnect`` takes
it off the run's network (peers see connection resets and refusals).

Link and interface faults are ``nft`` and ``tc`` commands run inside the node's network
namespace by a short-lived *helper container* of the ``starling-netfault`` image
(``docker/netfault.Dockerfile``: Debian with nftables and iproute2), started through the
docker SDK with ``network_mode=container:<node>`` and the NET_ADMIN capability, the way
Pumba applies its tc and iptables commands. The node image stays free of network tools and
no node gets NET_ADMIN; the orchestrator needs only the engine (no root, no ``nsenter`` on
the docker host). One helper per command, removed when it exits: a node restarted on its
volume has a new namespace, which the next helper joins (the backend sets its rules again).

A one-way cut A->B drops every TCP packet A sends to B's gRPC port, i.e. A's messages to B;
B's messages to A travel on B's own connection and still arrive. Loss drops a random
``numgen random mod 100 < P`` share of them (TCP resends, so they arrive late or after the
round's deadline). Rate is a ``tc tbf`` token bucket on the node's interface (its outgoing
traffic). Delay needs ``tc netem``; a kernel without the ``sch_netem`` module refuses it,
and so does this module, with that reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starling.orchestrator.core.errors import BackendError
from starling.orchestrator.core.retry import RetryPolicy, linear, retry

if TYPE_CHECKING:
    from starling.orchestrator.faults.kernel import KernelFault

__all__ = ["NETFAULT_IMAGE", "KernelFaultsMixin"]

NODE_PORT = 50051
NETFAULT_IMAGE = "starling-netfault:latest"
LABEL_HELPER = "starling.helper"
_TABLE = "starling_faults"
_BUILD_HINT = (
    "build it with docker/build-offline.sh, or "
    "docker build -f docker/netfault.Dockerfile -t starling-netfault ."
)


class KernelFaultsMixin:
    """Methods the docker backend gains for kernel faults; needs ``client``,
    ``container(node)``, ``network``, ``_address(node)``, ``_labels`` and ``_addresses`` of
    :class:`~starling.orchestrator.execution.backends.docker.DockerBackend`."""

    _drops: dict[str, dict[str, float]]
    """Sender -> receiver -> percent of its packets dropped (100: a cut)."""
    _rates: dict[str, float]
    """Node -> the kbit/s its interface is limited to."""
    network: Any
    _addresses: dict[str, str]
    netfault_image: str
    if TYPE_CHECKING:

        @property
        def client(self) -> Any: ...

        def container(self, node: str) -> Any: ...

        def _address(self, node: str) -> str: ...

        def _labels(self, node: str | None = None) -> dict[str, str]: ...

    quiet: set[str]
    """Nodes paused or off the network now: the run loop does not poll them (a status call
    to a frozen node would hold the loop for the whole client timeout)."""

    # -- node faults, through the engine -----------------------------------------------

    def pause(self, node: str) -> None:
        """Freeze the container. The engine's cgroup freezer can fail to settle on a busy
        host ("unable to freeze"; runc thaws it again): tried up to five times."""
        from docker.errors import APIError

        unsettled = RetryPolicy(
            5, lambda exc: isinstance(exc, APIError) and "unable to freeze" in str(exc), linear(0.5)
        )
        retry(self.container(node).pause, unsettled)
        self.quiet.add(node)

    def unpause(self, node: str) -> None:
        container = self.container(node)
        container.reload()
        if container.status == "paused":
            container.unpause()
        self.quiet.discard(node)

    def disconnect(self, node: str) -> None:
        self.network.disconnect(self.container(node))
        self.quiet.add(node)

    def reconnect(self, node: str) -> None:
        """Back on the run's network at the address its peers dial."""
        # The engine hands a reconnected container its free address back; a fixed
        # ipv4_address would need a network with a user-chosen subnet.
        self.network.connect(self.container(node))
        self.quiet.discard(node)
        address = self._address(node)
        if address != self._addresses[node]:
            raise BackendError(
                f"node {node}: reconnected at {address}, not at {self._addresses[node]} where "
                "its peers dial it"
            )

    # -- link and interface faults, from a helper in the node's network namespace -------

    def _helper(self, node: str, *command: str) -> str:
        """Run ``command`` (nft or tc) in ``node``'s network namespace from a helper
        container of :attr:`netfault_image`; its output, or a BackendError with the last
        line of its complaint."""
        from docker.errors import APIError, ContainerError, ImageNotFound

        container = self.container(node)
        try:
            output = self.client.containers.run(
                self.netfault_image,
                list(command),
                network_mode=f"container:{container.id}",
                cap_add=["NET_ADMIN"],
                labels={**self._labels(node), LABEL_HELPER: "netfault"},
                remove=True,
                stdout=True,
                stderr=True,
            )
        except ImageNotFound:
            raise BackendError(
                f"kernel faults need the {self.netfault_image} image, which is missing: "
                + _BUILD_HINT
            ) from None
        except ContainerError as exc:
            text = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
            lines = text.strip().splitlines()
            raise BackendError(
                f"node {node}: {command[0]} failed: {lines[-1] if lines else 'no output'}"
            ) from None
        except APIError as exc:  # e.g. the node's container is not running
            raise BackendError(
                f"node {node}: no helper in its network namespace: {exc.explanation or exc}"
            ) from None
        return output.decode(errors="replace") if isinstance(output, bytes) else str(output)

    def check_helper(self) -> None:
        """A BackendError naming the missing image before any fault is due."""
        from docker.errors import ImageNotFound

        try:
            self.client.images.get(self.netfault_image)
        except ImageNotFound:
            raise BackendError(
                f"kernel faults need the {self.netfault_image} image, which is missing: "
                + _BUILD_HINT
            ) from None

    def reapply(self, node: str) -> None:
        """The node's rules and rate limit again, in the new namespace of a restarted node."""
        if self._drops.get(node):
            self._write_rules(node)
        if node in self._rates:
            self.limit_rate(node, self._rates[node])

    def drop_link(self, sender: str, receiver: str, percent: float = 100.0) -> None:
        """Drop ``percent`` % of the packets ``sender`` sends to ``receiver``'s gRPC port."""
        self._drops.setdefault(sender, {})[receiver] = percent
        self._write_rules(sender)

    def restore_link(self, sender: str, receiver: str) -> None:
        self._drops.get(sender, {}).pop(receiver, None)
        self._write_rules(sender)

    def _write_rules(self, sender: str) -> None:
        """Replace the sender's whole filter table at once: one nft script, applied as one
        transaction (``add table`` first so that ``delete table`` never fails)."""
        rules = []
        for receiver, percent in sorted(self._drops.get(sender, {}).items()):
            ip = self._addresses[receiver].rpartition(":")[0]
            chance = "" if percent >= 100 else f"numgen random mod 100 < {int(round(percent))} "
            rules.append(f"    ip daddr {ip} tcp dport {NODE_PORT} {chance}drop")
        script = (
            f"add table inet {_TABLE}\ndelete table inet {_TABLE}\n"
            f"table inet {_TABLE} {{\n  chain out {{\n"
            "    type filter hook output priority 0; policy accept;\n"
            + "".join(rule + "\n" for rule in rules)
            + "  }\n}\n"
        )
        self._helper(sender, "nft", script)

    def limit_rate(self, node: str, kbit: float) -> None:
        """A token bucket on the node's interface: what it sends leaves at ``kbit``."""
        self._helper(
            node,
            "tc",
            "qdisc",
            "replace",
            "dev",
            "eth0",
            "root",
            "tbf",
            "rate",
            f"{kbit:g}kbit",
            "burst",
            "16kb",
            "latency",
            "500ms",
        )
        self._rates[node] = kbit

    def clear_rate(self, node: str) -> None:
        self._rates.pop(node, None)
        self._helper(node, "tc", "qdisc", "del", "dev", "eth0", "root")

    def check_delay(self) -> None:
        """A BackendError with the reason when this kernel cannot delay packets (no netem)."""
        node = next(iter(self._addresses), None)
        if node is None:
            raise BackendError("delay: no node running to try tc netem in")
        self.check_helper()
        try:
            self._helper(node, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms")
        except BackendError as exc:
            raise BackendError(
                f"delay: this kernel has no tc netem (sch_netem), so packets cannot be delayed "
                f"here ({exc})"
            ) from None
        self._helper(node, "tc", "qdisc", "del", "dev", "lo", "root")

    def apply_fault(self, fault: KernelFault) -> None:
        if fault.kind == "pause":
            self.pause(fault.node)
        elif fault.kind == "disconnect":
            self.disconnect(fault.node)
        elif fault.kind == "cut":
            assert fault.peer is not None  # parse_kernel_faults requires it
            self.drop_link(fault.node, fault.peer)
        elif fault.kind == "loss":
            assert fault.peer is not None and fault.amount is not None
            self.drop_link(fault.node, fault.peer, fault.amount)
        elif fault.kind == "rate":
            assert fault.amount is not None
            self.limit_rate(fault.node, fault.amount)
        elif fault.kind == "delay":
            self.check_delay()
            self._helper(
                fault.node,
                "tc",
                "qdisc",
                "replace",
                "dev",
                "eth0",
                "root",
                "netem",
                "delay",
                f"{fault.amount:g}ms",
            )

    def clear_fault(self, fault: KernelFault) -> None:
        if fault.kind == "pause":
            self.unpause(fault.node)
        elif fault.kind == "disconnect":
            self.reconnect(fault.node)
        elif fault.kind in ("cut", "loss"):
            assert fault.peer is not None
            self.restore_link(fault.node, fault.peer)
        else:
            self.clear_rate(fault.node)
