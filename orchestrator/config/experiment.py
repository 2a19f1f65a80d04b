"""Experiment files: YAML read once, checked by the schema (``orchestrator/config/schema.py``),
then one frozen :class:`Experiment` and one NodeSpec per node.

Every error is a :class:`~starling.node.params.ConfigError` whose message starts with the field
path (``topology.nodes``, ``hyperparameters.rho``) or names the node, so the CLI can print
one clear line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starling.node.models import build_model
from starling.node.params import ConfigError, check_dimension, parse_params
from starling.node.samplers import algorithm_info
from starling.node.spec import LinkFault, ModelSpec
from starling.orchestrator.config.backends import BackendSettings, backend_settings
from starling.orchestrator.config.schema import (
    DataSection,
    EvaluationSection,
    ExperimentFile,
    LimitsSection,
    NodeData,
    delay_ms,
    name_from,
    validate,
)
from starling.orchestrator.config.yaml_files import read_yaml_file, refuse_non_finite
from starling.orchestrator.faults.kernel import KernelFault, parse_kernel_faults
from starling.orchestrator.faults.schedule import NodeFault, parse_faults
from starling.orchestrator.topology import (
    Graph,
    Topology,
    check_topology,
    hub_role,
    node_count,
    parse_topology,
)
from starling.orchestrator.topology.kinds import MAX_NODES

__all__ = [
    "Experiment",
    "NodeEntry",
    "load_experiment",
    "parse_delay",
    "parse_experiment",
]


@dataclass(frozen=True)
class NodeEntry:
    id: str
    role: str
    address: str = ""
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
    """Per-node overrides of the experiment's hyperparameters (e.g. a worker's local steps)."""
    data: NodeData | None = None
    """Per-node overrides of the experiment's data (``nodes[k].data``)."""


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
    backend: BackendSettings
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
    limits: LimitsSection = field(default_factory=LimitsSection)
    kernel_faults: tuple[KernelFault, ...] = ()
    """Faults in the kernel (docker backend), from ``kernel_faults``."""

    @property
    def node_ids(self) -> tuple[str, ...]:
        return tuple(n.id for n in self.nodes)

    def data_nodes(self) -> tuple[str, ...]:
        roles = algorithm_info(self.algorithm).data_roles
        return tuple(n.id for n in self.nodes if n.role in roles)

    def sampling_nodes(self) -> tuple[str, ...]:
        """The nodes whose role records samples, in node order (all of them but a
        DG-LMC worker or an EC-SGHMC centre)."""
        roles = algorithm_info(self.algorithm).sampling_roles
        return tuple(n.id for n in self.nodes if n.role in roles)


def parse_delay(value: Any, where: str) -> float:
    """``20ms``, ``1.5s`` or a number of milliseconds -> milliseconds (>= 0)."""
    try:
        return delay_ms(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def load_experiment(path: str | Path) -> Experiment:
    return parse_experiment(read_yaml_file(path), default_name=Path(path).stem)


_SECTIONS = ("hyperparameters", "model", "data", "topology", "evaluation", "backend", "limits")


def parse_experiment(raw: Any, default_name: str = "experiment") -> Experiment:
    """An experiment from its file's content: the schema's types first, then what ties
    fields together (hyperparameters to the algorithm, faults to the topology)."""
    if not isinstance(raw, Mapping):
        kind = "nothing" if raw is None else type(raw).__name__
        raise ConfigError(f"experiment: the file must hold a mapping of fields, got {kind}")
    refuse_non_finite(raw, "")
    # An empty section (``data:`` with nothing under it) reads as None: take the defaults.
    cleaned = {k: v for k, v in raw.items() if not (k in _SECTIONS and v is None)}
    if isinstance(cleaned.get("algorithm"), str):
        algorithm_info(cleaned["algorithm"])  # an unknown algorithm is the first thing to say
    spec = validate(ExperimentFile, cleaned)
    info = algorithm_info(spec.algorithm)
    hyper: Any = parse_params(info.params, spec.hyperparameters, "hyperparameters")
    model = ModelSpec(name=spec.model.name, params=dict(spec.model.params))
    built = build_model(model)
    check_dimension(hyper, built.dim, "hyperparameters")

    if spec.data.source not in DATA_SOURCES:
        raise ConfigError(
            f"data.source: unknown source {spec.data.source!r} (known: {', '.join(DATA_SOURCES)})"
        )
    if spec.data.source == "file" and not spec.data.path:
        raise ConfigError("data.path: required for data.source file")
    _check_unused_data_fields(spec.data)
    rounds = spec.rounds
    nodes, topology = _parse_nodes_and_topology(spec, info, built.dim)
    if spec.evaluation.window > rounds:
        raise ConfigError(f"evaluation.window: must be between 1 and rounds ({rounds})")
    _check_evaluation(spec, built)
    link_delay = spec.link_delay
    if link_delay / 1000.0 >= spec.round_deadline:
        raise ConfigError(
            f"link_delay: {link_delay:g} ms is not under round_deadline "
            f"({spec.round_deadline:g} s): every message would arrive late"
        )
    faults = parse_faults(
        spec.faults,
        topology,
        seed=spec.seed,
        rounds=rounds,
        round_seconds=spec.round_seconds,
    )
    kernel_faults = parse_kernel_faults(spec.kernel_faults, [n.id for n in nodes], rounds)
    backend = backend_settings(spec.backend)
    _check_backend_can(backend, faults.nodes, kernel_faults, spec.data.source, len(nodes))
    experiment = Experiment(
        name=spec.name or name_from(default_name),
        algorithm=info.name,
        hyperparameters=dict(spec.hyperparameters),
        model=model,
        data=spec.data,
        graph=topology.union,
        nodes=nodes,
        rounds=rounds,
        chains=spec.chains,
        seed=spec.seed,
        round_deadline=spec.round_deadline,
        checkpoint_every=spec.checkpoint_every,
        evaluation=spec.evaluation,
        faults=faults.links,
        backend=backend,
        source=dict(raw),
        topology=topology,
        node_faults=faults.nodes,
        round_seconds=spec.round_seconds,
        link_delay_ms=link_delay,
        limits=spec.limits,
        kernel_faults=kernel_faults,
    )
    if spec.evaluation.hpd is not None and not _hpd_level_known(spec, built):
        raise ConfigError(
            f"evaluation.hpd: model {spec.model.name!r} has no exact Gaussian posterior; "
            f"set evaluation.reference.method: mala to estimate its HPD level"
        )  # the plan is checked here too
    return experiment


DATA_SOURCES = ("synthetic", "file", "node")


def _check_backend_can(
    backend: BackendSettings,
    node_faults: tuple[NodeFault, ...],
    kernel_faults: tuple[KernelFault, ...],
    data_source: str,
    nodes: int,
) -> None:
    """What the experiment asks of its backend, against what the backend's kind can do."""
    can = backend.capabilities
    if kernel_faults and not can.kernel_faults:
        raise ConfigError(
            f"kernel_faults: need backend kind docker, or another that can fault the kernel "
            f"(this experiment's is {backend.kind!r}); use faults for emulated ones"
        )
    if node_faults and not can.kills_nodes:
        raise ConfigError(
            f"faults: node {node_faults[0].node!r} cannot be killed by the {backend.kind} backend "
            "(the node runs outside Starling); schedule link faults instead"
        )
    if data_source == "file" and not can.host_files:
        raise ConfigError(
            f"data.source: file is a path on this machine, which the {backend.kind} backend's "
            "nodes do not see; use synthetic data or source: node"
        )
    backend.check_nodes(nodes)


def _check_unused_data_fields(data) -> None:
    """A field the data source never reads is a mistake, not a default: a ``path`` given
    beside ``source: synthetic`` (the source's default) was ignored without a word."""
    if data.source != "file":
        for name in ("path", "format"):
            if getattr(data, name):
                raise ConfigError(
                    f"data.{name}: only read with data.source file, but the source is "
                    f"{data.source} (set source: file to read it)"
                )
    if data.source != "synthetic" and data.total is not None:
        raise ConfigError(
            f"data.total: only drawn with data.source synthetic, but the source is {data.source}"
        )


def _hpd_level_known(spec: ExperimentFile, model) -> bool:
    """Whether [003]'s HPD level η_α is at hand: exact (a Gaussian posterior) or from
    reference samples (:mod:`starling.orchestrator.evaluation.hpd`)."""
    method = reference_method(model, spec.evaluation.reference.method)
    return hasattr(model, "exact_posterior") or method != "none"


REFERENCE_METHODS = ("auto", "grid", "mala", "none")


def reference_method(model, method: str) -> str:
    """``evaluation.reference.method`` with ``auto`` resolved for ``model``: ``grid`` where
    the model has a grid reference, else ``none``; ``mala`` only when asked for
    (:mod:`starling.orchestrator.evaluation.reference`)."""
    if method == "auto":
        return "grid" if hasattr(model, "reference_posterior") else "none"
    return method


def _check_evaluation(spec: ExperimentFile, model) -> None:
    """What ``evaluation`` asks must suit the model and the data (one line naming the field)."""
    evaluation = spec.evaluation
    _check_test(evaluation.test, spec.data, model)
    if evaluation.burn_in is not None and evaluation.burn_in >= spec.rounds:
        raise ConfigError(f"evaluation.burn_in: must be below rounds ({spec.rounds})")
    method = evaluation.reference.method
    if method not in REFERENCE_METHODS:
        raise ConfigError(
            f"evaluation.reference.method: unknown method {method!r} "
            f"(known: {', '.join(REFERENCE_METHODS)})"
        )
    if method == "grid" and not hasattr(model, "reference_posterior"):
        raise ConfigError(
            f"evaluation.reference.method: model {spec.model.name} has no grid reference; use mala"
        )
    if evaluation.reference.cache:
        _check_folder(Path(evaluation.reference.cache).expanduser(), "evaluation.reference.cache")


def _check_folder(path: Path, where: str) -> None:
    """A ConfigError naming ``where`` when ``path`` could never be a folder: it, or a folder
    above it, is a file, or its name is longer than the file system takes. The reference
    cache is written after the rounds: a cache of /etc/hostname ended the run there with a
    traceback, and the samples were never written."""
    try:
        for candidate in (path, *path.parents):
            if candidate.exists() and not candidate.is_dir():
                under = "" if candidate == path else f" is under {candidate}, which"
                raise ConfigError(f"{where}: {str(path)!r}{under} is a file, not a folder")
    except OSError as exc:
        raise ConfigError(f"{where}: {str(path)!r}: {exc.strerror or exc}") from None


def _check_test(test, data, model) -> None:
    """One-line errors for an ``evaluation.test`` that cannot work (the held-out rows
    themselves are :mod:`starling.orchestrator.evaluation.heldout`'s)."""
    if test is None:
        return
    if not hasattr(model, "predict_proba"):
        raise ConfigError(
            f"evaluation.test: model {type(model).__name__} is not a classifier "
            "(predictive metrics need logistic_regression or mlp)"
        )
    if bool(test.path) == (test.split is not None):
        raise ConfigError("evaluation.test: give exactly one of path (a test file) or split")
    if test.split is not None and data.source not in ("synthetic", "file"):
        raise ConfigError(
            f"evaluation.test.split: needs data.source synthetic or file, not {data.source!r} "
            "(the orchestrator cannot split data the nodes bring); give a test path"
        )


def _first_repeated(ids: list[str]) -> str | None:
    """The first id met a second time, in one pass (``ids.count`` per id was quadratic:
    seconds for a 10,000-node list)."""
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            return i
        seen.add(i)
    return None


def _worker_role(info, hub: str) -> str:
    return "worker" if "worker" in info.roles else next(r for r in info.roles if r != hub)


def _parse_nodes_and_topology(
    spec: ExperimentFile, info, dim: int
) -> tuple[tuple[NodeEntry, ...], Topology]:
    """Node entries (ids, roles, overrides) and the graph schedule over them; ``dim``, the
    model's, is what a node's hyperparameters may have to fit (``check_dimension``).

    For an algorithm with a hub role (a star's master or centre) and no explicit role,
    the hub goes to ``topology.centre`` (default: the first node) and every other node
    becomes a worker.
    """
    topology = spec.topology.model_dump(exclude_unset=True)
    hub = hub_role(info)
    if spec.nodes is not None:
        entries, params = _listed_nodes(spec, info, dim, hub)
        count = node_count(topology)
        if "nodes" in topology and count != len(entries):
            raise ConfigError(f"topology.nodes: says {count} but nodes lists {len(entries)}")
    else:
        entries, params = _counted_nodes(spec, info, topology, hub)
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
        topology, [e.id for e in entries], seed=spec.seed, hub=holders[0] if holders else None
    )
    check_topology(parsed, info, roles, params)
    return tuple(entries), parsed


def _listed_nodes(
    spec: ExperimentFile, info, dim: int, hub: str | None
) -> tuple[list[NodeEntry], dict[str, Any]]:
    """The ``nodes`` list's entries, and each node's hyperparameters (for the algorithm's
    graph check): the experiment's, with the node's own over them."""
    assert spec.nodes is not None
    if len(spec.nodes) > MAX_NODES:
        raise ConfigError(f"nodes: {len(spec.nodes):,} nodes, over the {MAX_NODES:,} allowed")
    ids = [item.id for item in spec.nodes]
    default_roles = {i: info.roles[0] for i in ids}
    if hub is not None:
        named_hubs = [item.id for item in spec.nodes if item.role == hub]
        centre = spec.topology.centre
        at_hub = centre if centre is not None else (named_hubs or ids)[0]
        worker = _worker_role(info, hub)
        default_roles = {i: (hub if i == at_hub and not named_hubs else worker) for i in ids}
    entries: list[NodeEntry] = []
    params: dict[str, Any] = {}
    for k, item in enumerate(spec.nodes):
        role = item.role if item.role is not None else default_roles[ids[k]]
        if role not in info.roles:
            raise ConfigError(
                f"nodes[{k}].role: {role!r} is not a role of {info.name} ({', '.join(info.roles)})"
            )
        merged = {**spec.hyperparameters, **item.hyperparameters}
        hyper = parse_params(info.params, merged, f"nodes[{k}].hyperparameters")
        check_dimension(hyper, dim, f"nodes[{k}].hyperparameters")
        params[ids[k]] = hyper
        entries.append(
            NodeEntry(
                id=ids[k],
                role=role,
                address=item.address,
                hyperparameters=dict(item.hyperparameters),
                data=item.data,
            )
        )
    duplicate = _first_repeated(ids)
    if duplicate is not None:
        raise ConfigError(f"nodes: node id {duplicate!r} appears twice")
    # Two nodes told to listen at one address: the second could not bind, and the run
    # blamed whichever node lost the race, long after the file was read.
    taken: dict[str, int] = {}
    for k, item in enumerate(spec.nodes):
        if not item.address or item.address.endswith(":0"):
            continue
        if item.address in taken:
            raise ConfigError(
                f"nodes[{k}].address: {item.address!r} is nodes[{taken[item.address]}]'s "
                "address too; give each node its own port"
            )
        taken[item.address] = k
    return entries, params


def _counted_nodes(
    spec: ExperimentFile, info, topology: dict[str, Any], hub: str | None
) -> tuple[list[NodeEntry], dict[str, Any]]:
    """Nodes ``0 … N−1`` when the file gives only ``topology.nodes`` (or a grid's rows and
    columns), all with the experiment's hyperparameters."""
    count = node_count(topology)
    if count is None:
        raise ConfigError("topology.nodes: required field is missing (or give a nodes list)")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ConfigError(f"topology.nodes: expected a positive integer, got {count!r}")
    if count > MAX_NODES:
        field = "nodes" if "nodes" in topology else "rows"
        raise ConfigError(f"topology.{field}: {count:,} nodes, over the {MAX_NODES:,} allowed")
    ids = [str(k) for k in range(count)]
    roles = {i: info.roles[0] for i in ids}
    if hub is not None:
        centre = spec.topology.centre
        at_hub = centre if centre is not None else ids[0]
        if at_hub not in ids:
            raise ConfigError(f"topology.centre: {at_hub!r} is not a node")
        worker = _worker_role(info, hub)
        roles = {i: (hub if i == at_hub else worker) for i in ids}
    shared = parse_params(info.params, spec.hyperparameters, "hyperparameters")
    return [NodeEntry(id=i, role=roles[i]) for i in ids], dict.fromkeys(ids, shared)
