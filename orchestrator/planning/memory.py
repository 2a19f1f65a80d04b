"""The memory bounds of ``limits``, checked before anything starts.

``limits.node_memory`` bounds what one node's chains take over its data: chains × dim ×
rows float64s, for the node holding the most rows; and, for a model whose posterior is
exactly Gaussian, its dim × dim matrices (:func:`check_matrices`).
``limits.samples_memory`` bounds the samples the orchestrator gathers: rounds × chains ×
dim × nodes float64s. A run over either is refused in one line naming the bound and the
figures, before any node starts.

Synthetic rows are known from the experiment alone (:func:`check_synthetic`, when the run is
planned). A file's rows are known once it is read: :func:`check_file_data` reads each file
the data plan deals out (the one the evaluation reads too; cached per process), computes
every node's rows with the nodes' own partition (:mod:`starling.node.partition`), and applies
the same bound. A node's own file (``nodes[i].data.path``) that is not on this machine
(an inventory node's) is the node's to size.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from starling.node.data.files import load_file
from starling.node.data.shards import file_rows
from starling.node.models import build_model
from starling.node.params import ConfigError
from starling.orchestrator.config.experiment import Experiment
from starling.orchestrator.planning.data_plan import data_specs

__all__ = [
    "check_evaluation",
    "check_file_data",
    "check_matrices",
    "check_newton_prox",
    "check_samples",
    "check_synthetic",
    "size_text",
]


def size_text(size: int) -> str:
    """Bytes as a person reads them: ``2.0 GiB``, ``1.5 MiB``, ``12 bytes``."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size} bytes"


def _over(what: str, figures: str, need: int, limit: int, note: str = "") -> ConfigError:
    return ConfigError(
        f"{what}: {figures} float64s would take {size_text(need)} per node, over "
        f"limits.node_memory ({size_text(limit)}){note}"
    )


def check_synthetic(
    source: str,
    chains: int,
    dim: int,
    plan: Mapping[str, Any],
    limit: int,
    rows_from: str = "data.size",
) -> None:
    """Refuse a run whose per-node arrays would not fit: chains × dim × rows float64s,
    for the node holding the most synthetic rows (file data: :func:`check_file_data`);
    ``rows_from``: the field that set the rows, for the message (``data.sizes`` when it
    was given)."""
    if source != "synthetic":
        return
    sizes = [
        d.total or sum(d.shard_size(s) for s in d.held_shards())
        for d in plan.values()
        if d.source == "synthetic"
    ]
    if not sizes:
        return
    rows = max(sizes)
    need = chains * dim * rows * 8
    if need > limit:
        raise _over(f"chains × dim × {rows_from}", f"{chains} × {dim} × {rows}", need, limit)


def check_matrices(model: Any, limit: int) -> None:
    """Refuse a model with an exactly Gaussian posterior (``exact_posterior``: linear
    regression, the conjugate Gaussian) whose dim × dim matrices would not fit: the node
    builds its Gram or precision matrix, the evaluation the posterior's covariance. A
    ``dim: 100000`` passed the bound on chains × dim × rows and ended in numpy's
    ``_ArrayMemoryError`` traceback, asking for 74.5 GiB."""
    if not hasattr(model, "exact_posterior"):
        return
    dim = int(model.dim)
    need = dim * dim * 8
    if need > limit:
        raise _over(
            "model.params.dim (a dim × dim matrix: the Gram or precision matrix, the "
            "posterior's covariance)",
            f"{dim} × {dim}",
            need,
            limit,
        )


def check_newton_prox(model: Any, proximal: bool, chains: int, limit: int) -> None:
    """Refuse a proximal sampler (ADMM, D-ADMMS) on a model whose prox is a damped Newton
    solve (``prox_by_newton``: logistic regression) when the solve's arrays would not fit:
    every chain's dim × dim Hessian and its Cholesky factor, two chains × dim × dim arrays
    at least. The bound on chains × dim × rows counts none of them."""
    if not proximal or not getattr(model, "prox_by_newton", False):
        return
    dim = int(model.dim)
    need = 2 * chains * dim * dim * 8
    if need > limit:
        raise _over(
            "chains × dim × dim (the proximal step's Newton Hessians and their factors)",
            f"2 × {chains} × {dim} × {dim}",
            need,
            limit,
        )


def check_evaluation(evaluation: Any, dim: int, limit: int) -> None:
    """Refuse evaluation settings whose arrays would not fit on the orchestrator (under
    ``limits.samples_memory``): MALA's reference samples (``reference.size`` × dim), the
    Sinkhorn cost matrix (``transport.points`` squared), and the sliced W2's directions and
    projected points (``transport.projections`` × dim, and × points). A size of 10^11
    ended in numpy's ``_ArrayMemoryError`` traceback after every round had run."""
    reference, transport = evaluation.reference, evaluation.transport
    arrays = (
        ("evaluation.reference.size", "reference samples", (reference.size, dim)),
        ("evaluation.transport.points", "Sinkhorn costs", (transport.points, transport.points)),
        ("evaluation.transport.projections", "directions", (transport.projections, dim)),
        (
            "evaluation.transport.projections",
            "projected points",
            (transport.points, transport.projections),
        ),
    )
    for field, what, (rows, cols) in arrays:
        need = rows * cols * 8
        if need > limit:
            raise ConfigError(
                f"{field}: {rows} × {cols} float64 {what} would take {size_text(need)}, "
                f"over limits.samples_memory ({size_text(limit)}); ask for fewer, or raise "
                "the limit"
            )


def check_samples(rounds: int, chains: int, dim: int, nodes: int, limit: int) -> None:
    """Refuse a run whose samples would not fit where they are gathered."""
    need = rounds * chains * dim * nodes * 8
    if need > limit:
        raise ConfigError(
            f"rounds × chains × dim × nodes: {rounds} × {chains} × {dim} × {nodes} "
            f"float64 samples would take {size_text(need)}, over limits.samples_memory "
            f"({size_text(limit)}); evaluate fewer rounds or chains, or raise the limit"
        )


def check_file_data(experiment: Experiment) -> None:
    """The node-memory bound for the nodes holding file data: each file of the plan read
    here, each node's rows counted as the node will deal them out; the node holding the
    most rows decides. Errors reading a file are the ones a node would give."""
    plan = data_specs(experiment)
    own = {e.id for e in experiment.nodes if e.data is not None and e.data.path}
    files = {n: s for n, s in plan.items() if s.source == "file" and s.path}
    if not files:
        return
    model = build_model(experiment.model)
    chains, dim = experiment.chains, model.dim
    limit = experiment.limits.node_memory
    worst: tuple[int, str, str] | None = None
    for node, spec in files.items():
        elsewhere = not spec.path.startswith("builtin:") and not Path(spec.path).is_file()
        if node in own and elsewhere:
            continue  # a file on the node's own machine: the node sizes it
        rows = len(file_rows(spec, len(load_file(spec.path, spec.format, model))))
        if worst is None or rows > worst[0]:
            worst = (rows, node, spec.path)
    if worst is None:
        return
    rows, node, path = worst
    need = chains * dim * rows * 8
    if need > limit:
        at = experiment.node_ids.index(node)
        field = f"nodes[{at}].data.path" if node in own else "data.path"
        raise _over(
            f"chains × dim × rows of {field}",
            f"{chains} × {dim} × {rows}",
            need,
            limit,
            f"; node {node} holds {rows} rows of {path!r}",
        )
