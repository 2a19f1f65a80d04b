"""Emulated devices with real network stacks: one Linux network namespace per host.

:class:`NamespaceBed` makes a "switch" namespace holding a bridge, and for every host a
namespace with its own loopback and an ``eth0`` (one end of a veth pair whose other end is
a bridge port in the switch namespace), addressed in 198.18.0.0/24 — the range set aside
for network benchmarks (RFC 2544), used here only inside namespaces the testbed creates and
removes itself; the host's own network is never touched. Impairments are real kernel ones:

* loss with an nftables rule in the receiving host (``numgen random mod 100 < P drop`` on
  packets from one sender), so only that link loses;
* a rate limit with ``tc tbf`` on the bridge port towards the receiving host, or on one
  link only (an htb class for the receiver's address in the sender, holding the tbf);
* delay with ``tc netem`` where the kernel has it (:func:`netem_available`).

Needs root and the ``ip``, ``nft`` and ``tc`` tools: :func:`unavailable` gives the reason to
skip when they are missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Sequence

SUBNET = "198.18.0"
"""RFC 2544 benchmarking range; hosts get .1, .2, ... inside the testbed's namespaces."""


def _run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=30)


def _must(*command: str) -> None:
    done = _run(*command)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")


def unavailable() -> str:
    """Why namespaces cannot be made here ("" when they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    for tool in ("ip", "nft", "tc"):
        if shutil.which(tool) is None:
            return f"the {tool!r} tool is not installed (iproute2 / nftables)"
    probe = f"stlprobe{uuid.uuid4().hex[:6]}"
    done = _run("ip", "netns", "add", probe)
    if done.returncode != 0:
        return f"cannot create a network namespace: {done.stderr.strip()}"
    _run("ip", "netns", "del", probe)
    return ""


def netem_available(namespace: str) -> bool:
    """Whether the kernel has the netem qdisc (tried on the namespace's loopback)."""
    done = _run(
        "ip",
        "netns",
        "exec",
        namespace,
        "tc",
        "qdisc",
        "add",
        "dev",
        "lo",
        "root",
        "netem",
        "delay",
        "1ms",
    )
    if done.returncode == 0:
        _run("ip", "netns", "exec", namespace, "tc", "qdisc", "del", "dev", "lo", "root")
    return done.returncode == 0


class NamespaceBed:
    """Hosts in their own namespaces on one bridge; removed by :meth:`close`."""

    def __init__(self, hosts: Sequence[str]):
        tag = uuid.uuid4().hex[:5]
        self.prefix = f"stl{tag}"
        self.switch = f"{self.prefix}-sw"
        self.namespaces: dict[str, str] = {}
        self.addresses: dict[str, str] = {}
        self._ports: dict[str, str] = {}
        try:
            _must("ip", "netns", "add", self.switch)
            self._in(self.switch, "ip", "link", "add", "br0", "type", "bridge")
            self._in(self.switch, "ip", "link", "set", "br0", "up")
            for k, host in enumerate(hosts, start=1):
                self._add(host, k)
        except BaseException:
            self.close()
            raise

    def _in(self, namespace: str, *command: str) -> None:
        _must("ip", "netns", "exec", namespace, *command)

    def _add(self, host: str, k: int) -> None:
        namespace = f"{self.prefix}-{host}"
        port = f"p{k}"
        _must("ip", "netns", "add", namespace)
        self.namespaces[host] = namespace
        self._in(namespace, "ip", "link", "set", "lo", "up")
        self._in(
            self.switch,
            "ip",
            "link",
            "add",
            port,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            namespace,
        )
        self._in(self.switch, "ip", "link", "set", port, "master", "br0")
        self._in(self.switch, "ip", "link", "set", port, "up")
        address = f"{SUBNET}.{k}"
        self._in(namespace, "ip", "addr", "add", f"{address}/24", "dev", "eth0")
        self._in(namespace, "ip", "link", "set", "eth0", "up")
        self.addresses[host] = address
        self._ports[host] = port

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside ``host``'s namespace."""
        return ["ip", "netns", "exec", self.namespaces[host], *argv]

    def loss(self, sender: str, receiver: str, percent: int) -> None:
        """Drop ``percent`` % of the packets from ``sender`` arriving at ``receiver``."""
        namespace = self.namespaces[receiver]
        self._in(namespace, "nft", "add", "table", "inet", "starling")
        self._in(
            namespace,
            "nft",
            "add",
            "chain",
            "inet",
            "starling",
            "input",
            "{ type filter hook input priority 0; policy accept; }",
        )
        self._in(
            namespace,
            "nft",
            "add",
            "rule",
            "inet",
            "starling",
            "input",
            "ip",
            "saddr",
            self.addresses[sender],
            "numgen",
            "random",
            "mod",
            "100",
            "<",
            str(percent),
            "drop",
        )

    def rate(self, receiver: str, rate: str = "1mbit") -> None:
        """Limit what the bridge sends towards ``receiver`` to ``rate`` (tc tbf)."""
        self._in(
            self.switch,
            "tc",
            "qdisc",
            "add",
            "dev",
            self._ports[receiver],
            "root",
            "tbf",
            "rate",
            rate,
            "burst",
            "32kbit",
            "latency",
            "400ms",
        )

    def link_rate(self, sender: str, receiver: str, rate: str = "1mbit") -> None:
        """Limit what ``sender`` sends to ``receiver`` — that link only — to ``rate``: an htb
        root on the sender's eth0 whose default class is unlimited, and a class for packets
        to the receiver's address (u32 filter) holding a ``tc tbf`` of ``rate``."""
        namespace, tc = self.namespaces[sender], ("tc",)
        self._in(
            namespace,
            *tc,
            "qdisc",
            "add",
            "dev",
            "eth0",
            "root",
            "handle",
            "1:",
            "htb",
            "default",
            "20",
        )
        for classid, ceiling in (("1:10", rate), ("1:20", "10gbit")):
            self._in(
                namespace,
                *tc,
                "class",
                "add",
                "dev",
                "eth0",
                "parent",
                "1:",
                "classid",
                classid,
                "htb",
                "rate",
                ceiling,
            )
        self._in(
            namespace,
            *tc,
            "qdisc",
            "add",
            "dev",
            "eth0",
            "parent",
            "1:10",
            "handle",
            "10:",
            "tbf",
            "rate",
            rate,
            "burst",
            "32kbit",
            "latency",
            "400ms",
        )
        self._in(
            namespace,
            *tc,
            "filter",
            "add",
            "dev",
            "eth0",
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
            f"{self.addresses[receiver]}/32",
            "flowid",
            "1:10",
        )

    def delay(self, receiver: str, milliseconds: int) -> None:
        """Delay what the bridge sends towards ``receiver`` (tc netem; see netem_available)."""
        self._in(
            self.switch,
            "tc",
            "qdisc",
            "add",
            "dev",
            self._ports[receiver],
            "root",
            "netem",
            "delay",
            f"{milliseconds}ms",
        )

    def close(self) -> None:
        """Remove every namespace (their veths and rules go with them)."""
        for namespace in [*self.namespaces.values(), self.switch]:
            _run("ip", "netns", "del", namespace)
        self.namespaces.clear()
