"""Experiment files: YAML in, validated frozen dataclasses out, then one NodeSpec per node.

Every error is a :class:`~node.params.ConfigError` whose message starts with the field
path (``topology.nodes``, ``hyperparameters.rho``) or names the node, so the CLI can print
one clear line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from node.models import build_model
from node.params import ConfigError, parse_params
from node.samplers import algorithm_info
from node.spec import DataSpec, LinkFault, ModelSpec, Neighbourhood, NodeSpec
from orchestrator.faults import FOREVER, NodeFault, parse_faults
from orchestrator.topology import (
    Graph,
    Topology,
    check_topology,
    hub_role,
    node_count,
    parse_topology,
)

__all__ = [
    "Experiment",
    "NodeEntry",
    "load_experiment",
    "node_specs",
    "parse_delay",
    "parse_experiment",
]

TOP_LEVEL = {
    "name",
    "algorithm",
    "hyperparameters",
    "model",
    "data",
    "topology",
    "nodes",
    "rounds",
    "chains",
    "seed",
    "round_deadline",
    "checkpoint_every",
    "evaluation",
    "faults",
    "round_seconds",
    "link_delay",
    "backend",
    "description",
}


@dataclass(frozen=True)
class NodeEntry:
    id: str
    role: str
    address: str = ""
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
    """Per-node overrides of the experiment's hyperparameters (e.g. a worker's local steps)."""


@dataclass(frozen=True)
class DataSection:
    source: str = "synthetic"
    size: int = 50
    seed: int = 0
    path: str = ""
    format: str = ""


@dataclass(frozen=True)
class EvaluationSection:
    window: int = 1
    """How many final rounds to pool, with all chains, into the empirical law for W2."""


@dataclass(frozen=True)
class BackendSection:
    kind: str = "local"
    host: str = "127.0.0.1"
    base_port: int = 0
    """0: each node picks a free port itself; otherwise node k listens on base_port + k."""
    nodes: Mapping[str, str] = field(default_factory=dict)
    """``kind: inventory``: node id -> host:port of a node that already runs."""
    ready_timeout: float = 60.0
    """``kind: inventory``: seconds to wait for every node to answer its health check."""


BACKEND_KINDS = ("local", "inventory")


@dataclass(frozen=True)
class Experiment:
    name: str
    algorithm: str
    hyperparameters: Mapping[str, Any]
    model: ModelSpec
    data: DataSection
    graph: Graph
    nodes: tuple[NodeEntry, ...]
    rounds: int
    chains: int
    seed: int
    round_deadline: float
    checkpoint_every: int
    evaluation: EvaluationSection
    faults: tuple[tuple[str, LinkFault], ...]
    backend: BackendSection
    source: Mapping[str, Any] = field(default_factory=dict)
    topology: Topology | None = None
    """The graph schedule; None means the one static ``graph``. ``graph`` is its union."""
    node_faults: tuple[NodeFault, ...] = ()
    """Node kills/restarts from ``faults``, for the run loop to carry out."""
    round_seconds: float | None = None
    """Nominal seconds per round: how fault times in seconds map to rounds."""
    link_delay_ms: float = 0.0
    """Latency added to every message on every link of a networked run (``link_delay``),
    set through each node's control API before it starts, and again after a restart. It
    slows rounds like a wide-area network would; as long as it stays under the round
    deadline it changes no number, so ``simulate`` ignores it."""

    @property
    def node_ids(self) -> tuple[str, ...]:
        return tuple(n.id for n in self.nodes)

    def data_nodes(self) -> tuple[str, ...]:
        roles = algorithm_info(self.algorithm).data_roles
        return tuple(n.id for n in self.nodes if n.role in roles)


def read_yaml_file(path: str | Path) -> Any:
    """The parsed content of an experiment (or study) file, or a ConfigError naming it."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"experiment file {str(path)!r} does not exist")
    try:
        return yaml.safe_load(file.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{file}: not valid YAML ({exc})") from None


def parse_delay(value: Any, where: str) -> float:
    """``20ms``, ``1.5s`` or a number of milliseconds -> milliseconds (>= 0)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value >= 0 and value == value and value != float("inf"):
            return float(value)
    elif isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s)?\s*", value)
        if match:
            number = float(match.group(1))
            return number * 1000.0 if match.group(2) == "s" else number
    raise ConfigError(f"{where}: expected a duration like 20ms or 0.5s, got {value!r}")


def load_experiment(path: str | Path) -> Experiment:
    return parse_experiment(read_yaml_file(path), default_name=Path(path).stem)


def _int(raw: Mapping[str, Any], key: str, default: int | None, minimum: int) -> int:
    value = raw.get(key, default)
    if value is None:
        raise ConfigError(f"{key}: required field is missing")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{key}: must be at least {minimum}, got {value}")
    return value


def _mapping(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key) or {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: expected a mapping, got {value!r}")
    return value


def parse_experiment(raw: Any, default_name: str = "experiment") -> Experiment:
    if not isinstance(raw, Mapping):
        raise ConfigError("experiment: the file must hold a mapping of fields")
    unknown = sorted(set(raw) - TOP_LEVEL)
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown field (known: {', '.join(sorted(TOP_LEVEL))})")
    if "algorithm" not in raw:
        raise ConfigError("algorithm: required field is missing")
    if not isinstance(raw["algorithm"], str):
        raise ConfigError(f"algorithm: expected a name, got {raw['algorithm']!r}")
    info = algorithm_info(raw["algorithm"])
    hyper = _mapping(raw, "hyperparameters")
    parse_params(info.params, hyper, "hyperparameters")  # fail early, with the field's name

    model_raw = _mapping(raw, "model")
    if "name" not in model_raw:
        raise ConfigError("model.name: required field is missing")
    model = ModelSpec(name=str(model_raw["name"]), params=dict(model_raw.get("params") or {}))
    build_model(model)

    data = parse_params(DataSection, _mapping(raw, "data"), "data")
    evaluation = parse_params(EvaluationSection, _mapping(raw, "evaluation"), "evaluation")
    backend = parse_params(BackendSection, _mapping(raw, "backend"), "backend")
    if backend.kind not in BACKEND_KINDS:
        raise ConfigError(
            f"backend.kind: unknown backend {backend.kind!r} (available: "
            f"{', '.join(BACKEND_KINDS)})"
        )

    rounds = _int(raw, "rounds", None, 1)
    chains = _int(raw, "chains", 1, 1)
    seed = _int(raw, "seed", 0, 0)
    nodes, topology = _parse_nodes_and_topology(raw, info, seed)
    deadline = raw.get("round_deadline", 2.0)
    if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or deadline <= 0:
        raise ConfigError(
            f"round_deadline: expected a positive number of seconds, got {deadline!r}"
        )
    if evaluation.window < 1 or evaluation.window > rounds:
        raise ConfigError(f"evaluation.window: must be between 1 and rounds ({rounds})")
    round_seconds = raw.get("round_seconds")
    if round_seconds is not None and (
        isinstance(round_seconds, bool)
        or not isinstance(round_seconds, (int, float))
        or not round_seconds > 0
    ):
        raise ConfigError(
            f"round_seconds: expected a positive number of seconds, got {round_seconds!r}"
        )
    link_delay = parse_delay(raw.get("link_delay", 0), "link_delay")
    if link_delay / 1000.0 >= float(deadline):
        raise ConfigError(
            f"link_delay: {link_delay:g} ms is not under round_deadline ({float(deadline):g} s): "
            "every message would arrive late"
        )
    faults = parse_faults(
        raw.get("faults"),
        topology,
        seed=seed,
        rounds=rounds,
        round_seconds=None if round_seconds is None else float(round_seconds),
    )
    return Experiment(
        name=str(raw.get("name") or default_name),
        algorithm=info.name,
        hyperparameters=dict(hyper),
        model=model,
        data=data,
        graph=topology.union,
        nodes=nodes,
        rounds=rounds,
        chains=chains,
        seed=seed,
        round_deadline=float(deadline),
        checkpoint_every=_int(raw, "checkpoint_every", 1, 1),
        evaluation=evaluation,
        faults=faults.links,
        backend=backend,
        source=dict(raw),
        topology=topology,
        node_faults=faults.nodes,
        round_seconds=None if round_seconds is None else float(round_seconds),
        link_delay_ms=link_delay,
    )


def _worker_role(info, hub: str) -> str:
    return "worker" if "worker" in info.roles else next(r for r in info.roles if r != hub)


def _parse_nodes_and_topology(
    raw: Mapping[str, Any], info, seed: int
) -> tuple[tuple[NodeEntry, ...], Topology]:
    """Node entries (ids, roles, overrides) and the graph schedule over them.

    For an algorithm with a hub role (a star's master or centre) and no explicit role,
    the hub goes to ``topology.centre`` (default: the first node) and every other node
    becomes a worker.
    """
    topology = _mapping(raw, "topology")
    count = node_count(topology)
    explicit = raw.get("nodes")
    hub = hub_role(info)
    centre = topology.get("centre")
    centre = None if centre is None else str(centre)
    entries: list[NodeEntry] = []
    if explicit is not None:
        if not isinstance(explicit, list) or not explicit:
            raise ConfigError("nodes: expected a non-empty list of {id, role, address}")
        for k, item in enumerate(explicit):
            if not isinstance(item, Mapping) or "id" not in item:
                raise ConfigError(f"nodes[{k}].id: required field is missing")
        ids = [str(item["id"]) for item in explicit]
        default_roles = {i: info.roles[0] for i in ids}
        if hub is not None:
            named_hubs = [str(it["id"]) for it in explicit if it.get("role") == hub]
            at_hub = centre if centre is not None else (named_hubs or ids)[0]
            worker = _worker_role(info, hub)
            default_roles = {i: (hub if i == at_hub and not named_hubs else worker) for i in ids}
        for k, item in enumerate(explicit):
            extra = sorted(set(item) - {"id", "role", "address", "hyperparameters"})
            if extra:
                raise ConfigError(
                    f"nodes[{k}].{extra[0]}: unknown field "
                    "(known: address, hyperparameters, id, role)"
                )
            role = str(item.get("role", default_roles[ids[k]]))
            if role not in info.roles:
                raise ConfigError(
                    f"nodes[{k}].role: {role!r} is not a role of {info.name} "
                    f"({', '.join(info.roles)})"
                )
            overrides = item.get("hyperparameters") or {}
            if not isinstance(overrides, Mapping):
                raise ConfigError(f"nodes[{k}].hyperparameters: expected a mapping")
            merged = {**dict(raw.get("hyperparameters") or {}), **dict(overrides)}
            parse_params(info.params, merged, f"nodes[{k}].hyperparameters")
            entries.append(
                NodeEntry(
                    id=ids[k],
                    role=role,
                    address=str(item.get("address", "")),
                    hyperparameters=dict(overrides),
                )
            )
        duplicate = next((i for i in ids if ids.count(i) > 1), None)
        if duplicate is not None:
            raise ConfigError(f"nodes: node id {duplicate!r} appears twice")
        if "nodes" in topology and count != len(entries):
            raise ConfigError(f"topology.nodes: says {count} but nodes lists {len(entries)}")
    else:
        if count is None:
            raise ConfigError("topology.nodes: required field is missing (or give a nodes list)")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(f"topology.nodes: expected a positive integer, got {count!r}")
        ids = [str(k) for k in range(count)]
        roles = {i: info.roles[0] for i in ids}
        if hub is not None:
            at_hub = centre if centre is not None else ids[0]
            if at_hub not in ids:
                raise ConfigError(f"topology.centre: {at_hub!r} is not a node")
            worker = _worker_role(info, hub)
            roles = {i: (hub if i == at_hub else worker) for i in ids}
        entries = [NodeEntry(id=i, role=roles[i]) for i in ids]
    roles = {e.id: e.role for e in entries}
    holders = [e.id for e in entries if e.role == hub] if hub is not None else []
    if info.graph == "star" and hub is not None and len(holders) != 1:
        raise ConfigError(
            f"nodes: {info.name} needs exactly one {hub}, got {len(holders)}"
            + (f" ({', '.join(holders)})" if holders else "")
        )
    if info.graph == "star" and "kind" not in topology and "schedule" not in topology:
        topology = {**topology, "kind": "star"}
    parsed = parse_topology(
        topology, [e.id for e in entries], seed=seed, hub=holders[0] if holders else None
    )
    check_topology(parsed, info, roles)
    return tuple(entries), parsed


def isolation_faults(
    node_faults: Iterable[NodeFault], node: str, peers: Iterable[str]
) -> tuple[LinkFault, ...]:
    """A killed node's rounds as link faults: what it would have sent or heard is lost.

    A node killed at round a and restarted at round r resumes from its checkpoint at a and
    catches up through rounds a..r-1 alone: its peers have moved past them, so its messages
    are late and theirs were sent while it was down. Both the simulator and the network
    runtime (on top of the real kill) apply this schedule, so they agree on what the node
    heard. A node that is never restarted is isolated to the end.
    """
    faults: list[LinkFault] = []
    for fault in node_faults:
        stop = fault.restart_round if fault.restart_round is not None else FOREVER
        if fault.node == node:
            faults.append(LinkFault("*", fault.at_round, stop, 1.0, 0))
        elif fault.node in peers:
            faults.append(LinkFault(fault.node, fault.at_round, stop, 1.0, 0))
    return tuple(faults)


def node_specs(
    experiment: Experiment, addresses: Mapping[str, str] | None = None
) -> list[NodeSpec]:
    """One NodeSpec per node; ``addresses`` (id -> host:port) is filled in for real runs."""
    addresses = addresses or {}
    info = algorithm_info(experiment.algorithm)
    data_nodes = experiment.data_nodes()
    topology = experiment.topology or Topology.static(experiment.graph)
    hoods = topology.neighbourhoods()
    specs = []
    for index, entry in enumerate(experiment.nodes):
        schedule: tuple[Neighbourhood, ...] = hoods[entry.id]
        data = None
        if entry.id in data_nodes:
            d = experiment.data
            data = DataSpec(
                source=d.source,
                shard=data_nodes.index(entry.id),
                num_shards=len(data_nodes),
                seed=d.seed,
                size=d.size,
                path=d.path,
                format=d.format,
            )
        # A node connects to everyone it will ever talk to over the whole schedule.
        peers = {p for hood in schedule for p in (*hood.out_peers, *hood.in_peers)}
        specs.append(
            NodeSpec(
                experiment=experiment.name,
                node_id=entry.id,
                node_index=index,
                role=entry.role,
                algorithm=info.name,
                hyperparameters={**experiment.hyperparameters, **entry.hyperparameters},
                model=experiment.model,
                data=data,
                seed=experiment.seed,
                rounds=experiment.rounds,
                chains=experiment.chains,
                num_nodes=len(data_nodes),
                prior_share=1.0 / max(len(data_nodes), 1),
                schedule=schedule,
                schedule_period=topology.period,
                peers={p: addresses.get(p, "") for p in sorted(peers)},
                round_deadline=experiment.round_deadline,
                link_faults=(
                    tuple(f for sender, f in experiment.faults if sender == entry.id)
                    + isolation_faults(experiment.node_faults, entry.id, peers)
                ),
                checkpoint_every=experiment.checkpoint_every,
                inbound_faults=outage_faults(experiment.node_faults, entry.id, schedule),
            )
        )
    return specs


def outage_faults(
    node_faults: Iterable[NodeFault], node: str, schedule: Iterable[Neighbourhood]
) -> tuple[tuple[str, LinkFault], ...]:
    """The rounds each in-peer of ``node`` is scheduled dead, as faults on its link to
    ``node`` (see ``NodeSpec.inbound_faults``)."""
    senders = {p for hood in schedule for p in hood.in_peers}
    return tuple(
        (fault.node, LinkFault(node, fault.at_round, fault.restart_round or FOREVER))
        for fault in node_faults
        if fault.node in senders
    )
