"""Kernel faults on the docker backend's containers (:mod:`orchestrator.kernel_faults`).

Node faults go through the engine: ``pause`` freezes the container's processes (cgroup
freezer; its sockets stay open, so peers see silence, then timeouts), ``disconnect`` takes
it off the run's network (peers see connection resets and refusals).

Link faults are packet filters in the *sender's* network namespace, entered from the host
with ``nsenter --net=/proc/<pid>/ns/net`` (the orchestrator runs as root on the docker host,
which has nft and tc): the node image stays free of network tools and of NET_ADMIN. A
one-way cut A->B drops every TCP packet A sends to B's gRPC port, i.e. A's messages to B;
B's messages to A travel on B's own connection and still arrive. Loss drops a random
``numgen random mod 100 < P`` share of them (TCP resends, so they arrive late). Rate is a
``tc tbf`` token bucket on the node's interface. Delay needs ``tc netem``; a kernel without
the ``sch_netem`` module refuses it, and so does this module, with that reason.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Any

from orchestrator.backends.base import BackendError

if TYPE_CHECKING:
    from orchestrator.kernel_faults import KernelFault

__all__ = ["KernelFaultsMixin"]

NODE_PORT = 50051
_TABLE = "starling_faults"


class KernelFaultsMixin:
    """Methods the docker backend gains for kernel faults; needs ``container(node)``,
    ``network``, ``_address(node)`` and ``_addresses`` of
    :class:`~orchestrator.backends.docker.DockerBackend`."""

    _drops: dict[str, dict[str, float]]
    network: Any
    _addresses: dict[str, str]
    if TYPE_CHECKING:

        def container(self, node: str) -> Any: ...

        def _address(self, node: str) -> str: ...

    silenced: set[str]
    """Nodes paused or off the network now: the run loop does not poll them (a status call
    to a frozen node would hold the loop for the whole client timeout)."""

    # -- node faults, through the engine -----------------------------------------------

    def pause(self, node: str) -> None:
        self.container(node).pause()
        self.silenced.add(node)

    def unpause(self, node: str) -> None:
        container = self.container(node)
        container.reload()
        if container.status == "paused":
            container.unpause()
        self.silenced.discard(node)

    def disconnect(self, node: str) -> None:
        self.network.disconnect(self.container(node))
        self.silenced.add(node)

    def reconnect(self, node: str) -> None:
        """Back on the run's network at the address its peers dial."""
        # The engine hands a reconnected container its free address back; a fixed
        # ipv4_address would need a network with a user-chosen subnet.
        self.network.connect(self.container(node))
        self.silenced.discard(node)
        address = self._address(node)
        if address != self._addresses[node]:
            raise BackendError(
                f"node {node}: reconnected at {address}, not at {self._addresses[node]} where "
                "its peers dial it"
            )

    # -- link and interface faults, in the node's network namespace ----------------------

    def _nsenter(self, node: str, *command: str, stdin: str | None = None) -> None:
        container = self.container(node)
        container.reload()
        pid = container.attrs["State"]["Pid"]
        if not pid:
            raise BackendError(f"node {node}: not running, no network namespace to change")
        done = subprocess.run(
            ["nsenter", f"--net=/proc/{pid}/ns/net", *command],
            input=stdin, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        if done.returncode != 0:
            reason = (done.stderr or done.stdout).strip().splitlines()
            raise BackendError(
                f"node {node}: {command[0]} failed: {reason[-1] if reason else 'no output'}"
            )

    def drop_link(self, sender: str, receiver: str, percent: float = 100.0) -> None:
        """Drop ``percent`` % of the packets ``sender`` sends to ``receiver``'s gRPC port."""
        self._drops.setdefault(sender, {})[receiver] = percent
        self._write_rules(sender)

    def restore_link(self, sender: str, receiver: str) -> None:
        self._drops.get(sender, {}).pop(receiver, None)
        self._write_rules(sender)

    def _write_rules(self, sender: str) -> None:
        """Replace the sender's whole filter table at once (nft -f is atomic)."""
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
        self._nsenter(sender, "nft", "-f", "-", stdin=script)

    def limit_rate(self, node: str, kbit: float) -> None:
        self._nsenter(node, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
                      "rate", f"{kbit:g}kbit", "burst", "16kb", "latency", "500ms")  # fmt: skip

    def clear_rate(self, node: str) -> None:
        self._nsenter(node, "tc", "qdisc", "del", "dev", "eth0", "root")

    def check_delay(self) -> None:
        """A BackendError with the reason when this kernel cannot delay packets (no netem)."""
        node = next(iter(self._addresses), None)
        if node is None:
            raise BackendError("delay: no node running to try tc netem in")
        try:
            self._nsenter(node, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms")
        except BackendError as exc:
            raise BackendError(
                f"delay: this kernel has no tc netem (sch_netem), so packets cannot be delayed "
                f"here ({exc})"
            ) from None
        self._nsenter(node, "tc", "qdisc", "del", "dev", "lo", "root")

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
            self._nsenter(fault.node, "tc", "qdisc", "replace", "dev", "eth0", "root", "netem",
                          "delay", f"{fault.amount:g}ms")  # fmt: skip

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
