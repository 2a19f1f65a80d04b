"""The ``backend`` section: where a run's nodes live, each kind's own settings and what it can do.

Every kind of backend has a settings model here (the fields its section may hold, checked once
with the rest of the file) and declares its :class:`BackendCapabilities`. Callers ask a
capability, never compare a kind's name. The backends themselves — the code that starts
processes, containers or talks to devices — are
:mod:`starling.orchestrator.execution.backends`, one module per kind named like it; this module
imports none of them, so reading an experiment loads no network stack.

A new kind is a settings model in :data:`BACKENDS` and a module in ``execution/backends/``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, Field, ValidationError

from starling.node.params import ConfigError
from starling.orchestrator.config.schema import Address, NodeId
from starling.orchestrator.core.validation import STRICT, Float, Int, Str, config_error

__all__ = [
    "BACKENDS",
    "BackendCapabilities",
    "BackendSettings",
    "DockerSettings",
    "InventorySettings",
    "LocalSettings",
    "TlsSection",
    "backend_settings",
    "capabilities_of",
]


@dataclass(frozen=True)
class BackendCapabilities:
    """What a kind of backend can do for a run."""

    kills_nodes: bool
    """Kill and restart a node (the ``faults`` section's node faults, ``starling nodes
    kill|restart``)."""
    kernel_faults: bool
    """Faults in the kernel: the ``kernel_faults`` section, ``starling nodes
    pause|disconnect`` and ``starling links ... --kernel``."""
    host_files: bool
    """Nodes can read a file of the orchestrator's machine (``data.source: file``)."""
    local_stores: bool
    """Node stores are kept under the run's folder on this machine: ``starling collect``
    starts the nodes again idle on them, and a complete run lets go of them once its
    samples read back."""


class TlsSection(BaseModel):
    """The orchestrator's own certificate (``starling certs init``): mutual TLS to nodes."""

    model_config = STRICT
    ca: Str
    cert: Str
    key: Str


class BackendSettings(BaseModel):
    """What every kind's section holds: how the orchestrator proves itself to the nodes."""

    model_config = STRICT
    kind: str
    tls: TlsSection | None = None
    """The orchestrator's CA, certificate and key: every Control channel is mutual TLS."""
    token_file: Str = ""
    """Without TLS: the bearer token nodes started with ``--token-file`` expect."""

    capabilities: ClassVar[BackendCapabilities]

    def check_nodes(self, count: int) -> None:
        """Refuse, naming the field, settings that cannot serve ``count`` nodes."""


def _local_host(value: str) -> str:
    """``backend.host``: a host name, or an address that is one. Digits and dots are read as
    an IPv4 address: ``999.1.1.1`` was handed to the nodes, which refused it as "a
    non-loopback address without TLS"."""
    if not value.strip() or any(c.isspace() for c in value):
        raise ValueError(f"expected a host name or address, got {value!r}")
    if value.replace(".", "").isdigit():
        try:
            ipaddress.IPv4Address(value)
        except ValueError:
            raise ValueError(f"not an IPv4 address: {value!r}") from None
    return value


class LocalSettings(BackendSettings):
    """``kind: local``: every node a child process of the orchestrator, on loopback."""

    kind: Literal["local"] = "local"
    host: Annotated[Str, AfterValidator(_local_host)] = "127.0.0.1"
    base_port: Annotated[Int, Field(ge=0, le=65535)] = 0
    """0: each node picks a free port itself; otherwise node k listens on base_port + k."""

    capabilities = BackendCapabilities(
        kills_nodes=True, kernel_faults=False, host_files=True, local_stores=True
    )

    def check_nodes(self, count: int) -> None:
        last_port = self.base_port + count - 1
        if self.base_port and last_port > 65535:
            raise ConfigError(
                f"backend.base_port: {count} nodes from port {self.base_port} would need port "
                f"{last_port}, beyond 65535"
            )


class DockerSettings(BackendSettings):
    """``kind: docker``: every node a container of the node image, on a bridge network of
    the run's own."""

    kind: Literal["docker"] = "docker"
    image: Str = "starling-node:latest"
    """The node image each node's container runs."""
    netfault_image: Str = "starling-netfault:latest"
    """The helper image that sets kernel link faults (nft, tc) from inside a node's network
    namespace (docker/netfault.Dockerfile)."""
    ready_timeout: Annotated[Float, Field(gt=0)] = 60.0
    """Seconds to wait for every node's health check."""

    capabilities = BackendCapabilities(
        kills_nodes=True, kernel_faults=True, host_files=False, local_stores=False
    )


class InventorySettings(BackendSettings):
    """``kind: inventory``: nodes that already run (devices, the compose testbed), at fixed
    addresses; ``starling run --inventory FILE`` makes one from a file."""

    kind: Literal["inventory"] = "inventory"
    nodes: dict[NodeId, Address] = Field(default_factory=dict)
    """Node id -> host:port of a node that already runs."""
    ready_timeout: Annotated[Float, Field(gt=0)] = 60.0
    """Seconds to wait for every node's health check."""

    capabilities = BackendCapabilities(
        kills_nodes=False, kernel_faults=False, host_files=True, local_stores=False
    )


BACKENDS: dict[str, type[BackendSettings]] = {
    "local": LocalSettings,
    "docker": DockerSettings,
    "inventory": InventorySettings,
}
"""Every kind a ``backend`` section may name, and its settings model."""


def capabilities_of(kind: str) -> BackendCapabilities:
    """What backend ``kind`` can do; a ConfigError naming ``backend.kind`` if it is unknown."""
    return _model(kind).capabilities


def _model(kind: Any) -> type[BackendSettings]:
    if not isinstance(kind, str) or kind not in BACKENDS:
        raise ConfigError(
            f"backend.kind: unknown backend {kind!r} (available: {', '.join(sorted(BACKENDS))})"
        )
    return BACKENDS[kind]


def backend_settings(raw: Mapping[str, Any] | None) -> BackendSettings:
    """The ``backend`` section checked against its kind's model (``local`` if it names none):
    a field another kind reads is refused, naming the field and the kinds that have it."""
    raw = dict(raw or {})
    model = _model(raw.get("kind", "local"))
    for name in raw:
        if name not in model.model_fields:
            owners = [k for k, m in sorted(BACKENDS.items()) if name in m.model_fields]
            if owners:
                raise ConfigError(
                    f"backend.{name}: only read by backend kind {' or '.join(owners)}, and this "
                    f"experiment's is {model.model_fields['kind'].default}"
                )
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise config_error(exc, "backend", model) from None
