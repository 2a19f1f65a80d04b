"""A node's own settings: ``starling node serve --config node.yaml`` and flags over it.

A node started on a device (or in a container) knows who it is, where it listens, where it
keeps its samples and checkpoints, and which data is its own::

    id: a                      # the experiment's node id it serves (optional check)
    listen: 0.0.0.0:50051
    store: /var/lib/starling   # samples and checkpoints; the same store resumes a run
    data:                      # used when an experiment says data: {source: node}
      source: synthetic        # shard `shard` generated from (seed, shard): no file at all
      shard: 0
      size: 50
      seed: 1
    # data: {source: file, path: /data/mine.csv, format: csv}   # all rows of a local file
    data_dir: /srv/starling    # files an experiment names must lie under it (default: cwd)
    tls:                       # mutual TLS on every channel (starling certs init makes these)
      ca: /etc/starling/certs/ca.pem
      cert: /etc/starling/certs/a.pem
      key: /etc/starling/certs/a.key
    # token_file: /etc/starling/token   # without TLS: Control calls need this bearer token
    # insecure: true           # listen on a non-loopback address without TLS (a lab network)
    metrics: 127.0.0.1:9464    # a Prometheus endpoint (off when absent; PORT alone = loopback)
    reflection: true           # gRPC reflection (false on locked-down devices)
    log_format: text           # or json: one object per line (starling.node.logs)
    screen_bound: 1e6          # iterates with a larger value are refused (0: off;
                               # starling.node.runtime.screening)

The data never leaves the node: the orchestrator sends ``data: {source: node}`` and this
node substitutes what is configured here (:func:`home_data`). A file an experiment names
itself must lie under ``data_dir`` (:func:`check_data_path`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from starling.node.params import ConfigError, existing_file, parse_params
from starling.node.security import TlsFiles, tls_files
from starling.node.spec import DataSpec

__all__ = [
    "DEFAULT_SCREEN_BOUND",
    "HomeData",
    "NodeSettings",
    "check_data_path",
    "check_home_file",
    "check_screen_bound",
    "home_data",
    "load_settings",
]

DEFAULT_SCREEN_BOUND = 1e6
"""The screening bound of a node's incoming values (:mod:`starling.node.runtime.screening`
says why 1e6)."""


def check_screen_bound(value: float, where: str = "screen_bound") -> float:
    """``value`` if it is a usable bound (0: off); ValueError naming ``where`` otherwise."""
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(
            f"{where}: must be a finite number >= 0 (0 turns screening off), got {value!r}"
        )
    return float(value)


NODE_SOURCE = "node"
"""``data.source`` of an experiment that leaves the data to each node."""


@dataclass(frozen=True)
class HomeData:
    """The node's own data, as written in its config file's ``data`` section."""

    source: str = "synthetic"
    shard: int = 0
    size: int = 50
    seed: int = 0
    path: str = ""
    format: str = ""


@dataclass(frozen=True)
class NodeSettings:
    id: str = ""
    listen: str = "127.0.0.1:0"
    store: str = ""
    data: HomeData | None = None
    log_level: str = "INFO"
    data_dir: str = ""
    """Files an experiment names are read only under it ("" = the working directory)."""
    tls: TlsFiles | None = None
    token_file: str = ""
    insecure: bool = False
    """Listen on a non-loopback address without TLS (refused otherwise)."""
    metrics: str = ""
    """HOST:PORT (or PORT, on loopback) of the Prometheus endpoint; none if empty."""
    reflection: bool = True
    """Serve gRPC reflection (grpcurl can list and call the services)."""
    log_format: str = "text"
    screen_bound: float = DEFAULT_SCREEN_BOUND
    """Iterates with a value beyond it are refused (:mod:`starling.node.runtime.screening`)."""


_KNOWN = (
    "id",
    "listen",
    "store",
    "data",
    "data_dir",
    "tls",
    "token_file",
    "insecure",
    "log_level",
    "metrics",
    "reflection",
    "log_format",
    "screen_bound",
)


def load_settings(path: str | Path | None) -> NodeSettings:
    """Read a node config file (or the defaults for None); errors name the field."""
    if path is None:
        return NodeSettings()
    file = existing_file(path, "--config")
    # Only for a config file: a node started with flags alone never loads yaml.
    from starling.node.yaml_input import read_yaml

    raw = read_yaml(file, "--config") or {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{file}: expected a mapping of fields")
    unknown = sorted(set(raw) - set(_KNOWN))
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown field (known: {', '.join(sorted(_KNOWN))})")
    tls = tls_files(raw.get("tls"))
    for flag in ("insecure", "reflection"):
        if not isinstance(raw.get(flag, False), bool):
            raise ConfigError(f"{flag}: expected true or false, got {raw[flag]!r}")
    data = None
    if raw.get("data") is not None:
        if not isinstance(raw["data"], Mapping):
            raise ConfigError(f"data: expected a mapping, got {raw['data']!r}")
        data = check_home_data(parse_params(HomeData, raw["data"], "data"))
    names = (
        "id",
        "listen",
        "store",
        "log_level",
        "data_dir",
        "token_file",
        "metrics",
        "log_format",
    )
    fields = {k: raw[k] for k in names if k in raw}
    if isinstance(fields.get("metrics"), int) and not isinstance(fields["metrics"], bool):
        fields["metrics"] = str(fields["metrics"])  # `metrics: 9464`, a bare port
    for key, value in fields.items():
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
    bound = raw.get("screen_bound", DEFAULT_SCREEN_BOUND)
    if isinstance(bound, bool) or not isinstance(bound, (int, float)):
        raise ConfigError(f"screen_bound: expected a number, got {bound!r}")
    try:
        bound = check_screen_bound(float(bound))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return NodeSettings(
        **fields,
        data=data,
        tls=tls,
        insecure=raw.get("insecure", False),
        reflection=raw.get("reflection", True),
        screen_bound=bound,
    )


INT64_MAX = 2**63 - 1
"""The largest shard, size or seed a node takes: what an experiment may give for them, and
what the node's int64 fields and numpy's generator hold."""


def check_home_data(data: HomeData) -> HomeData:
    """``data`` if its values could ever be run on; a ConfigError naming the field otherwise.
    A negative seed, or a shard beyond int64, used to pass ``node serve`` and fail the
    first experiment's Configure. Whether a file is there is the serving node's question
    (:func:`check_home_file`): a settings file is also read where its data is not."""
    if data.source == "synthetic":
        if data.shard < 0:
            raise ConfigError(f"data.shard: must be 0 or more, got {data.shard}")
        if data.size <= 0:
            raise ConfigError(f"data.size: must be a positive number of points, got {data.size}")
        if data.seed < 0:
            raise ConfigError(f"data.seed: must be 0 or more, got {data.seed}")
        for name, value in (("shard", data.shard), ("size", data.size), ("seed", data.seed)):
            if value > INT64_MAX:
                raise ConfigError(f"data.{name}: must be at most 2^63 - 1, got {value}")
    elif data.source == "file":
        if not data.path:
            raise ConfigError("data.path: required for source: file")
    else:
        raise ConfigError(f"data.source: {data.source!r} is not synthetic or file")
    return data


def check_home_file(data: HomeData | None) -> None:
    """A serving node's own data file must be there (a ConfigError naming ``data.path``
    otherwise): one that is missing used to be found only by the first experiment that
    asked for the node's data."""
    if data is not None and data.source == "file" and not data.path.startswith("builtin:"):
        existing_file(data.path, "data.path")


def override(settings: NodeSettings, **flags: Any) -> NodeSettings:
    """Flags given on the command line (not None) over the file's settings."""
    data_flags = {k: flags.pop(k) for k in ("shard", "size", "seed", "path", "format")}
    given = {k: v for k, v in flags.items() if v is not None}
    settings = replace(settings, **given)
    data_given = {k: v for k, v in data_flags.items() if v is not None}
    if data_given:
        base = settings.data or HomeData()
        if "path" in data_given:
            base = replace(base, source="file")
        elif "shard" in data_given:
            base = replace(base, source="synthetic", path="", format="")
        settings = replace(settings, data=check_home_data(replace(base, **data_given)))
    return settings


def home_data(spec_data: DataSpec, mine: HomeData | None, node_id: str) -> DataSpec:
    """The DataSpec this node runs on when the experiment says ``data: {source: node}``.

    A synthetic shard keeps its own index, size and seed (so nodes started with shards
    0..N-1 of one seed hold what ``source: synthetic`` would give them); a file is read
    whole, as all of its rows are this node's.
    """
    if mine is None:
        raise ConfigError(
            f"node {node_id!r}: the experiment leaves the data to the node (data.source: "
            "node), but this node was started without data (--shard or --data-file)"
        )
    if mine.source == "synthetic":
        return replace(
            spec_data,
            source="synthetic",
            shard=mine.shard,
            size=mine.size,
            seed=mine.seed,
            path="",
            format="",
        )
    return replace(
        spec_data, source="file", shard=0, num_shards=1, path=mine.path, format=mine.format
    )


def check_data_path(data: DataSpec | None, data_dir: Path | None, own: HomeData | None) -> None:
    """A file an experiment names must lie under the node's data directory; the error
    names the field and the path as given, never a byte of the file."""
    if data is None or data.source != "file" or data.path.startswith("builtin:"):
        return
    if own is not None and own.source == "file" and data.path == own.path:
        return  # the node's own file (data.source: node), named by its own config
    if data_dir is None:
        raise ConfigError(
            "data.path: this node names no data directory (data_dir, --data-dir); "
            "it reads no file an experiment names"
        )
    resolved = Path(data.path).resolve()  # relative: to the node's working directory
    if not resolved.is_relative_to(data_dir):
        raise ConfigError(f"data.path: {data.path!r} is outside this node's data directory")
