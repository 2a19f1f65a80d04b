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

Link faults act where packets are really lost: on the *receiving* side. A one-way cut A->B
is an nftables rule in B's namespace, on the input hook, that drops every TCP packet from A's
address to B's gRPC port: A's messages to B, on A's own connection; B's messages to A
travel on B's connection (to A's port) and still arrive. Loss drops a random ``numgen random
mod 100 < P`` share of those packets there (:func:`receiver_rules`). Dropped on the way in,
a segment is lost on the wire as far as A's TCP knows: it is retransmitted after a duplicate
acknowledgement or its retransmission timeout, so the message arrives late, never not at
all, and A's ``TcpRetransSegs`` counts it. (Dropped in A's own output hook instead, as
before, the packet never left: A's stack got an error from its own filter and kept the
segment, its retransmission counters stayed flat, and 30 % "loss" showed only as rounds
running slower.) A reset answers A's packets to B's port with ``reject with tcp reset``: A's
stream breaks, and each reconnection is refused at once, until it is cleared.

Rate is a ``tc tbf`` token bucket on the node's interface (its outgoing traffic). Delay
(with optional jitter) is ``tc netem`` on A's interface for packets to B only (an ``htb``
root, one unlimited class per delayed receiver holding its netem, a ``u32`` filter on its
address, :func:`delay_commands`); a kernel without the ``sch_netem`` module refuses it, and
so does this module, with that reason. Both take the root of A's interface: a rate limit
and delays on the same node replace each other, the later one wins.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from starling.orchestrator.core.errors import BackendError
from starling.orchestrator.core.retry import RetryPolicy, linear, retry

if TYPE_CHECKING:
    from starling.orchestrator.faults.kernel import KernelFault

__all__ = ["NETFAULT_IMAGE", "RESET", "KernelFaultsMixin", "delay_commands", "receiver_rules"]

NODE_PORT = 50051
NETFAULT_IMAGE = "starling-netfault:latest"
LABEL_HELPER = "starling.helper"
_TABLE = "starling_faults"
RESET = -1.0
"""A receiver's rule for a sender: answer its packets with TCP resets instead of dropping."""
_UNLIMITED = "10gbit"
"""The rate of the htb classes that only carry a netem: never the limit."""


def receiver_rules(drops: Mapping[str, float], port: int = NODE_PORT) -> str:
    """The nft script a receiver's namespace gets: ``drops`` maps a sender's IP address to
    the percent of its packets to ``port`` that are dropped on arrival (100: all, a cut) or
    to :data:`RESET` (answered with a TCP reset). The whole table is replaced in one
    transaction (``add table`` first, so that ``delete table`` never fails); with no drops it
    is left empty. The chain is on the input hook: the packets have crossed the wire, and
    the sender's TCP finds them lost."""
    rules = []
    for ip, percent in sorted(drops.items()):
        match = f"ip saddr {ip} tcp dport {port}"
        if percent == RESET:
            rules.append(f"    {match} reject with tcp reset")
        elif percent >= 100:
            rules.append(f"    {match} drop")
        else:
            rules.append(f"    {match} numgen random mod 100 < {int(round(percent))} drop")
    return (
        f"add table inet {_TABLE}\ndelete table inet {_TABLE}\n"
        f"table inet {_TABLE} {{\n  chain in {{\n"
        "    type filter hook input priority 0; policy accept;\n"
        + "".join(rule + "\n" for rule in rules)
        + "  }\n}\n"
    )


def delay_commands(
    targets: Mapping[str, tuple[float, float]], device: str = "eth0"
) -> list[list[str]]:
    """tc commands (without ``tc``) that delay a sender's packets to each IP address of
    ``targets`` by (delay, jitter) ms, and no other packet: an ``htb`` root whose default
    class is unlimited, one unlimited class per target holding a ``netem``, and a ``u32``
    filter on the target's address. With no target the root is removed (the first command
    deletes whatever root there was; its failure on a bare interface is harmless)."""
    commands = [["qdisc", "del", "dev", device, "root"]]
    if not targets:
        return commands
    commands.append(["qdisc", "add", "dev", device, "root", "handle", "1:", "htb", "default", "1"])
    commands.append(
        ["class", "add", "dev", device, "parent", "1:", "classid", "1:1", "htb", "rate", _UNLIMITED]
    )
    for k, (ip, (delay, jitter)) in enumerate(sorted(targets.items()), start=10):
        classid = f"1:{k}"
        commands.append(
            [
                "class",
                "add",
                "dev",
                device,
                "parent",
                "1:",
                "classid",
                classid,
                "htb",
                "rate",
                _UNLIMITED,
            ]
        )
        netem = ["netem", "delay", f"{delay:g}ms"]
        if jitter:
            netem += [f"{jitter:g}ms", "distribution", "normal"]
        commands.append(
            ["qdisc", "add", "dev", device, "parent", classid, "handle", f"{k}:", *netem]
        )
        commands.append(
            [
                "filter",
                "add",
                "dev",
                device,
                "parent",
                "1:",
                "protocol",
                "ip",
                "prio",
                "1",
                "u32",
                "match",
                "ip",
                "dst",
                f"{ip}/32",
                "flowid",
                classid,
            ]
        )
    return commands


_BUILD_HINT = (
    "build it with docker/build-offline.sh, or "
    "docker build -f docker/netfault.Dockerfile -t starling-netfault ."
)


class KernelFaultsMixin:
    """Methods the docker backend gains for kernel faults; needs ``client``,
    ``container(node)``, ``network``, ``_address(node)``, ``_labels`` and ``_addresses`` of
    :class:`~starling.orchestrator.execution.backends.docker.DockerBackend`."""

    _drops: dict[str, dict[str, float]]
    """Receiver -> sender -> percent of the sender's packets it drops on arrival (100: a
    cut; :data:`RESET`: answered with TCP resets)."""
    _delays: dict[str, dict[str, tuple[float, float]]]
    """Sender -> receiver -> (delay, jitter) in ms of its packets to that receiver."""
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
        """The node's rules, rate limit and delays again, in the new namespace of a
        restarted node (its address, which the others' rules name, does not move)."""
        if self._drops.get(node):
            self._write_rules(node)
        if node in self._rates:
            self.limit_rate(node, self._rates[node])
        if self._delays.get(node):
            self._write_delays(node)

    def drop_link(self, sender: str, receiver: str, percent: float = 100.0) -> None:
        """Drop ``percent`` % of the packets ``sender`` sends to ``receiver``'s gRPC port, as
        they arrive at ``receiver`` (:data:`RESET`: answer them with TCP resets)."""
        self._drops.setdefault(receiver, {})[sender] = percent
        self._write_rules(receiver)

    def restore_link(self, sender: str, receiver: str) -> None:
        self._drops.get(receiver, {}).pop(sender, None)
        self._write_rules(receiver)

    def _write_rules(self, receiver: str) -> None:
        """Replace the receiver's whole filter table at once: one nft script, applied as
        one transaction."""
        drops = {
            self._addresses[sender].rpartition(":")[0]: percent
            for sender, percent in self._drops.get(receiver, {}).items()
        }
        self._helper(receiver, "nft", receiver_rules(drops))

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
        elif fault.kind == "reset":
            assert fault.peer is not None
            self.drop_link(fault.node, fault.peer, RESET)
        elif fault.kind == "delay":
            assert fault.peer is not None and fault.amount is not None
            self.check_delay()
            self._delays.setdefault(fault.node, {})[fault.peer] = (fault.amount, fault.jitter)
            self._write_delays(fault.node)

    def clear_fault(self, fault: KernelFault) -> None:
        if fault.kind == "pause":
            self.unpause(fault.node)
        elif fault.kind == "disconnect":
            self.reconnect(fault.node)
        elif fault.kind in ("cut", "loss", "reset"):
            assert fault.peer is not None
            self.restore_link(fault.node, fault.peer)
        elif fault.kind == "delay":
            assert fault.peer is not None
            self._delays.get(fault.node, {}).pop(fault.peer, None)
            self._write_delays(fault.node)
        else:
            self.clear_rate(fault.node)

    def _write_delays(self, sender: str) -> None:
        """The sender's delayed links set anew (:func:`delay_commands`), in one helper: the
        old root removed (harmless when there is none), then the new qdiscs, stopping at the
        first failure."""
        targets = {
            self._addresses[receiver].rpartition(":")[0]: amount
            for receiver, amount in self._delays.get(sender, {}).items()
        }
        first, *rest = delay_commands(targets)
        script = shlex.join(["tc", *first]) + " 2>/dev/null; set -e"
        script += "".join("; " + shlex.join(["tc", *command]) for command in rest)
        self._helper(sender, "sh", "-c", script)
