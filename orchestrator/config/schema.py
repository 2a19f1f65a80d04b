"""The experiment file's schema: what each section may hold, checked once by pydantic v2.

Every model forbids unknown keys and non-finite numbers
(``starling.orchestrator.core.validation.STRICT``). The shape and the types of every field live
here; what depends on several fields at once (a fault's round against ``rounds``, a link
against the topology, hyperparameters against the algorithm's own ``Params``) is checked by
:func:`starling.orchestrator.config.experiment.parse_experiment` right after, from these typed
values. Either way an error is one line naming the field.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, ValidationError

from starling.node.params import MAX_NAME, ConfigError, host_port, number_hint
from starling.node.params import plain_name as is_plain_name
from starling.node.security import ORCHESTRATOR_ID
from starling.node.shown import shown
from starling.node.spec import MAX_SECONDS
from starling.orchestrator.core.validation import STRICT, Bool, Float, Int, Str, config_error

__all__ = [
    "DataSection",
    "EvaluationSection",
    "ExperimentFile",
    "LimitsSection",
    "ModelSection",
    "NodeData",
    "NodeItem",
    "ReferenceSection",
    "TestSection",
    "TransportSection",
    "TopologySection",
    "delay_ms",
    "memory_bytes",
    "validate",
]

DEFAULT_NODE_MEMORY = 2 * 2**30
"""Default bound on what one node's chains may take: 2 GiB (see ``LimitsSection``)."""

DEFAULT_SAMPLES_MEMORY = 4 * 2**30
"""Default bound on what all of a run's samples may take: 4 GiB (see ``LimitsSection``)."""


def _node_id(value: Any) -> Any:
    # YAML reads ``id: 3`` as a number; node ids are names, so a whole number is its name.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def plain_name(value: str) -> str:
    """A name that is also a file name, a folder name and a container's: letters, digits,
    ``-``, ``_`` and ``.`` (not first), at most :data:`MAX_NAME` characters. Experiment,
    study and node names end up in paths (``results/NAME/``, ``samples/node-ID.npz``): a
    ``/``, a ``..`` or an empty name would put files anywhere, or nowhere."""
    if not is_plain_name(value):
        raise ValueError(
            "expected a name of letters, digits, '-', '_' and '.' (not first), at most "
            f"{MAX_NAME} characters, got {shown(value)}"
        )
    return value


def name_from(text: str) -> str:
    """:func:`plain_name` made of ``text`` (a file's stem): other characters become ``-``."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "-", text).lstrip("._-")[:MAX_NAME]
    return cleaned or "experiment"


def _not_the_orchestrator(value: str) -> str:
    # With TLS the orchestrator is whoever's certificate names it (node/security.py): a node
    # of that name would hold a certificate that calls Control on every node.
    if value == ORCHESTRATOR_ID:
        raise ValueError(f"{value!r} is the orchestrator's identity; no node may take it")
    return value


NodeId = Annotated[
    str,
    BeforeValidator(_node_id),
    Field(strict=True),
    AfterValidator(plain_name),
    AfterValidator(_not_the_orchestrator),
]
Name = Annotated[str, Field(strict=True), AfterValidator(plain_name)]


def _address(value: str) -> str:
    """``HOST:PORT`` as a node is reached. A host with a space, or an IPv6 address without
    brackets, was looked up as a host name when the run started and reported as "host name
    not found"."""
    try:
        host_port(value, "")
    except ConfigError as exc:
        raise ValueError(str(exc).removeprefix(": ")) from None
    return value


Address = Annotated[str, Field(strict=True), AfterValidator(_address)]
"""A node's ``HOST:PORT``."""
NodeAddress = Annotated[
    str, Field(strict=True), AfterValidator(lambda value: value and _address(value))
]
"""A node's own ``address`` in ``nodes``: ``HOST:PORT``, or empty for the backend's."""
INT64_MAX = 2**63 - 1
"""Every count and seed fits an int64: the nodes are sent them as protobuf int64s
(``NodeConfig.rounds``, ``checkpoint_every``, ``DataConfig.size``, ...), and a larger one
failed ``starling run`` with a traceback after the nodes had started."""
Count = Annotated[Int, Field(ge=1, le=INT64_MAX)]
Natural = Annotated[Int, Field(ge=0, le=INT64_MAX)]
Seed = Annotated[Int, Field(ge=0, le=INT64_MAX)]
"""A seed: the nodes are sent it as an int64 (``NodeConfig.seed``, ``DataSpec.seed``)."""


def delay_ms(value: Any) -> float:
    """``20ms``, ``1.5s`` or a number of milliseconds -> milliseconds (>= 0)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value >= 0 and math.isfinite(value):
            return float(value)
    elif isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s)?\s*", value)
        if match:
            number = float(match.group(1))
            number = number * 1000.0 if match.group(2) == "s" else number
            if math.isfinite(number):  # hundreds of digits are inf: "inf ms" said nothing
                return number
    raise ValueError(f"expected a duration like 20ms or 0.5s, got {value!r}")


def _positive_seconds(value: Any) -> float:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or not 0 < value <= MAX_SECONDS:
        raise ValueError(
            f"expected a positive number of seconds up to {MAX_SECONDS:g}, got {value!r}"
            + number_hint(value)
        )
    return float(value)


_UNITS = {"": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_UNITS.update({"kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12})


def memory_bytes(value: Any) -> int:
    """``2GiB``, ``512MiB``, ``1.5GB`` or a number of bytes -> bytes (> 0)."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", value)
        if match and match.group(2).lower() in _UNITS and len(match.group(1)) <= 100:
            # Exact: a float of hundreds of digits is inf, and int(inf) an OverflowError.
            size = int(Fraction(match.group(1)) * _UNITS[match.group(2).lower()])
            if size > 0:
                return size
    raise ValueError(f"expected a size like 2GiB or 512MiB, got {value!r}")


Seconds = Annotated[Any, AfterValidator(_positive_seconds)]
Delay = Annotated[Any, AfterValidator(delay_ms)]
Memory = Annotated[Any, AfterValidator(memory_bytes)]


def _partition(value: str) -> str:
    from starling.node.data.partition import PARTITIONS

    if value not in PARTITIONS:
        raise ValueError(f"unknown partition {value!r} (use {', '.join(PARTITIONS)})")
    return value


class ModelSection(BaseModel):
    model_config = STRICT
    name: Str
    params: dict[str, Any] = Field(default_factory=dict)


class DataSection(BaseModel):
    """Where each data-holding node's rows come from.

    ``synthetic``: drawn from the model's generator, ``size`` points per node.
    ``file``: the rows of ``path`` dealt out to the nodes by ``partition``
    (:mod:`starling.node.partition`). ``node``: the node supplies its own data (a device with its
    own sensor or disk); the orchestrator sends nothing. How the shards are laid out is
    :mod:`starling.orchestrator.planning.data_plan`.
    """

    model_config = STRICT
    source: Str = "synthetic"
    size: Count = 50
    """Points per node (synthetic); for a file, rows per node only when given."""
    seed: Seed = 0
    path: Str = ""
    format: Str = ""
    partition: Annotated[Str, AfterValidator(_partition)] = "interleaved"
    """``interleaved`` (rows k, k+N, ...) or ``random`` (a seeded shuffle cut in blocks)."""
    sizes: Annotated[list[Count], Field(min_length=1)] | None = None
    """One size per shard (heterogeneous nodes); overrides ``size``."""
    total: Count | None = None
    """Synthetic: draw this many points once (from ``seed``) and deal them out like a
    file's rows (``partition``, ``sizes``): the same data set for any number of nodes."""
    shards: Count | None = None
    """How many shards the data is cut into (default: one per data node). With one data
    node and ``shards: N`` that node holds all N: the centralised baseline on exactly the
    data an N-node run holds."""


class NodeData(BaseModel):
    """A node's own data settings (``nodes[k].data``), over the experiment's ``data``."""

    model_config = STRICT
    size: Count | None = None
    """This node's shard size (synthetic points, or rows of the shared file)."""
    shard: Natural | None = None
    """Which shard of the shared data this node holds (default: its place among them)."""
    path: Str | None = None
    """A file of this node's own, all of whose rows it holds (outside the shared partition)."""
    format: Str = ""


class TestSection(BaseModel):
    """Held-out rows for predictive metrics (classifiers): a file the user gives (``path``,
    read by the orchestrator) or a seeded fraction of the training data (``split``), which
    the nodes then leave out of their shards (:mod:`starling.node.split`)."""

    model_config = STRICT
    path: Str = ""
    format: Str = ""
    split: Annotated[Float, Field(gt=0, lt=1)] | None = None
    seed: Seed = 0


MAX_REFERENCE_STEPS = 1_000_000
"""The most MALA iterations per reference chain: 10^11 was accepted and evaluated for ever
after the run (the shipped examples ask for at most 4000)."""
MAX_REPEATS = 1000
"""The most Sinkhorn repeats of a final distance: 10^11 was accepted, then solved for ever."""


class ReferenceSection(BaseModel):
    """Reference samples for a posterior with no closed form
    (:mod:`starling.orchestrator.evaluation.reference`)."""

    model_config = STRICT
    method: Str = "auto"
    """``auto`` (the model's grid if it has one, else none: MALA is asked for by name),
    ``grid``, ``mala`` or ``none``."""
    size: Count = 2000
    seed: Seed = 0
    steps: Annotated[Int, Field(ge=1, le=MAX_REFERENCE_STEPS)] = 4000
    """MALA: iterations per reference chain after as many of warm-up (at most
    :data:`MAX_REFERENCE_STEPS`)."""
    cache: Str = ""
    """Folder of cached references (default ``$STARLING_CACHE_DIR`` or ~/.cache/starling)."""


class TransportSection(BaseModel):
    """Sinkhorn and sliced-Wasserstein settings
    (:mod:`starling.orchestrator.evaluation.optimal_transport`)."""

    model_config = STRICT
    points: Count = 500
    """At most this many samples of each set (a seeded subsample) enter one distance."""
    reg: Annotated[Float, Field(gt=0)] = 0.1
    projections: Count = 200
    curve_points: Count = 10
    """The distance curve scores at most this many rounds (each costs a Sinkhorn solve)."""
    repeats: Annotated[Int, Field(ge=1, le=MAX_REPEATS)] = 10
    """Each final distance is the mean over this many fresh pairs of subsamples, reported
    with its standard error (:mod:`starling.orchestrator.evaluation.distances`); at most
    :data:`MAX_REPEATS`."""


W2_SCHEDULES = ("auto", "every", "log")
"""``evaluation.w2_schedule``'s values (:mod:`starling.orchestrator.evaluation.schedule`)."""


def _w2_schedule(value: str) -> str:
    if value not in W2_SCHEDULES:
        raise ValueError(f"expected one of {', '.join(W2_SCHEDULES)}, got {shown(value)}")
    return value


class EvaluationSection(BaseModel):
    model_config = STRICT
    window: Count = 1
    """How many final rounds to pool, with all chains, into the empirical law for W2."""
    test: TestSection | None = None
    reference: ReferenceSection = Field(default_factory=ReferenceSection)
    transport: TransportSection = Field(default_factory=TransportSection)
    curve_points: Count = 100
    """Predictive and transport curves score at most this many rounds (evenly spaced)."""
    w2_schedule: Annotated[Str, AfterValidator(_w2_schedule)] = "auto"
    """Which rounds the W2 curve scores: ``every``, ``log`` (rounds spaced evenly in
    log(round + 1), ``w2_per_doubling`` of them each time the round count doubles, plus the
    final window) or ``auto`` (``every`` while a round is cheap to score, else ``log``;
    :mod:`starling.orchestrator.evaluation.schedule`)."""
    w2_per_doubling: Annotated[Int, Field(ge=1, le=1000)] = 1
    """The ``log`` schedule's resolution: scored rounds per doubling of the round count."""
    burn_in: Natural | None = None
    """Rounds left out of ESS and R-hat (default: the first half)."""
    hpd: Annotated[Float, Field(gt=0, lt=1)] | None = None
    """α of [003]'s HPD relative error (``orchestrator/evaluation/hpd.py``), e.g. 0.1; None: not
    reported. Its level η_α is exact for a Gaussian posterior, else taken from ``reference``
    samples."""
    diagnostics: Bool = True
    """ArviZ's ESS and R-hat per node (:mod:`starling.orchestrator.evaluation.diagnostics`)."""


class LimitsSection(BaseModel):
    model_config = STRICT
    node_memory: Memory = DEFAULT_NODE_MEMORY
    """Bound on chains × dim × data.size × 8 bytes on one node: the largest array a
    node's sampler builds (one float64 gradient term per chain, coordinate and point)."""
    samples_memory: Memory = DEFAULT_SAMPLES_MEMORY
    """Bound on rounds × chains × dim × nodes × 8 bytes: every sample of the run, which the
    orchestrator (or ``simulate``) holds to evaluate and write them."""
    down_grace: Seconds | None = None
    """Seconds a node may stay unreachable before it is declared down and its neighbours
    stop waiting for it (default: 30 s or ten round deadlines, whichever is longer)."""


class NodeItem(BaseModel):
    model_config = STRICT
    id: NodeId
    role: Str | None = None
    address: NodeAddress = ""
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    """Per-node overrides of the experiment's hyperparameters (e.g. a worker's local steps)."""
    data: NodeData | None = None
    """Per-node overrides of the experiment's data (size, shard, own file)."""


class TopologySection(BaseModel):
    """The ``topology`` section: every key any kind takes. Which keys suit which kind,
    and their values, are checked by ``starling.orchestrator.topology.parse_topology``."""

    model_config = STRICT
    nodes: Count | None = None
    kind: Str | None = None
    schedule: list[dict[str, Any]] | None = None
    period: Any = None
    window: Any = None
    allow_disconnected: Any = None
    seed: Any = None
    weights: Any = None
    centre: NodeId | None = None
    rows: Any = None
    cols: Any = None
    p: Any = None
    k: Any = None
    edges: Any = None
    directed: Any = None


class ExperimentFile(BaseModel):
    """One experiment file, as written (docs/reference/experiment-file.md)."""

    model_config = STRICT
    name: Name | None = None
    description: Str = ""
    algorithm: Str
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    model: ModelSection
    data: DataSection = Field(default_factory=DataSection)
    topology: TopologySection = Field(default_factory=TopologySection)
    nodes: Annotated[list[NodeItem], Field(min_length=1)] | None = None
    rounds: Count
    chains: Count = 1
    seed: Seed = 0
    round_deadline: Seconds = 2.0
    checkpoint_every: Count = 1000  # durable checkpoints; a resume point every round anyway
    evaluation: EvaluationSection = Field(default_factory=EvaluationSection)
    faults: list[Any] | None = None
    kernel_faults: list[Any] | None = None
    """``backend.kind: docker`` only; checked by ``starling.orchestrator.faults.kernel``."""
    """Checked by ``starling.orchestrator.faults.schedule.parse_faults`` against the topology
    and rounds."""
    round_seconds: Seconds | None = None
    link_delay: Delay = 0.0
    backend: dict[str, Any] = Field(default_factory=dict)
    """Checked against its kind's own settings model
    (:mod:`starling.orchestrator.config.backends`)."""
    limits: LimitsSection = Field(default_factory=LimitsSection)


def validate(schema: type[BaseModel], raw: Any, where: str = "") -> Any:
    """``raw`` checked against ``schema``; a ConfigError naming the field otherwise."""
    try:
        return schema.model_validate(raw)
    except ValidationError as exc:
        raise config_error(exc, where, schema) from None
