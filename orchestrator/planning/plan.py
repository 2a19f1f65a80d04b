"""A run's plan: everything decided before a node starts, as plain frozen data.

:func:`plan` turns what the configuration stage loaded into plans: a :class:`RunPlan` for an
experiment, a :class:`StudyPlan` (one RunPlan per run) for a study. :func:`plan_run` turns a
parsed :class:`~starling.orchestrator.config.experiment.Experiment`
into a :class:`RunPlan`: one :class:`~starling.node.spec.NodeSpec` per node (its
neighbourhoods, data, hyperparameters and link faults), the node and kernel fault schedules
the run carries out, the backend's settings, and an :class:`EvaluationPlan` — what scoring
the samples needs. Execution and the results folder take these products, never the whole
experiment. Planning is where the checks that need the plan live: the data plan
(``data.sizes``, shards) and the memory bounds of ``limits``, file data's included (which
reads the data files).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from starling.node.models import build_model
from starling.node.params import ConfigError
from starling.node.samplers import algorithm_info
from starling.node.spec import DataSpec, LinkFault, ModelSpec, NodeSpec
from starling.orchestrator.config.backends import BackendSettings
from starling.orchestrator.config.experiment import Experiment
from starling.orchestrator.config.schema import DataSection, EvaluationSection
from starling.orchestrator.config.study import Study
from starling.orchestrator.faults.kernel import KernelFault
from starling.orchestrator.faults.schedule import NodeFault
from starling.orchestrator.planning.data_plan import data_specs
from starling.orchestrator.planning.memory import (
    check_evaluation,
    check_file_data,
    check_matrices,
    check_newton_prox,
    check_samples,
    check_synthetic,
)
from starling.orchestrator.planning.node_specs import node_specs

__all__ = ["EvaluationPlan", "RunPlan", "StudyPlan", "plan", "plan_run", "plan_study"]


@dataclass(frozen=True)
class EvaluationPlan:
    """What scoring a run's samples needs, and nothing else: the model and every node's
    data as the nodes were given it (to regenerate or read the ground truth), and the
    ``evaluation`` settings."""

    name: str
    algorithm: str
    model: ModelSpec
    rounds: int
    chains: int
    seed: int
    node_ids: tuple[str, ...]
    """Every node, in the experiment's order (means over nodes are summed in this order)."""
    sampling_nodes: tuple[str, ...]
    """The nodes whose role records samples (all but a DG-LMC worker or an EC-SGHMC centre)."""
    data: DataSection
    data_specs: Mapping[str, DataSpec]
    """Data node -> what it holds (:func:`~starling.orchestrator.planning.data_plan.data_specs`)."""
    evaluation: EvaluationSection
    source: Mapping[str, Any] = field(default_factory=dict)
    """The experiment file as written: the results folder keeps it as ``experiment.yaml``."""


@dataclass(frozen=True)
class RunPlan:
    """What ``run`` and ``simulate`` carry out (module docstring)."""

    name: str
    rounds: int
    round_deadline: float
    link_delay_ms: float
    """Latency added to every message of a networked run (``link_delay``); ``simulate``
    ignores it, since under the round deadline it changes no number."""
    specs: Mapping[str, NodeSpec]
    """Node id -> its spec, in the experiment's order; peers' addresses left blank (the
    backend gives them: :func:`~starling.orchestrator.planning.node_specs.addressed`)."""
    fixed_addresses: Mapping[str, str]
    """Addresses the experiment file pins (``nodes[i].address``)."""
    backend: BackendSettings
    link_faults: tuple[tuple[str, LinkFault], ...]
    """(sender, fault) of every scheduled link fault, for the run's account."""
    node_faults: tuple[NodeFault, ...]
    """Scheduled kills and restarts, carried out by the run's supervisor."""
    kernel_faults: tuple[KernelFault, ...]
    down_grace: float | None
    """Seconds a node may stay unreachable before it is declared down (None: the default)."""
    evaluation: EvaluationPlan

    @property
    def node_ids(self) -> tuple[str, ...]:
        return tuple(self.specs)

    @property
    def sampling_nodes(self) -> tuple[str, ...]:
        return self.evaluation.sampling_nodes


@dataclass(frozen=True)
class StudyPlan:
    """A study and the plan of every one of its runs."""

    study: Study
    runs: tuple[tuple[str, str, int, RunPlan], ...]
    """(cell, variant, seed index r, plan) of every run, r = 0 … K−1."""

    @property
    def name(self) -> str:
        return self.study.name


def plan(loaded: Experiment | Study) -> RunPlan | StudyPlan:
    """The plan of what :func:`starling.orchestrator.config.load.load` gave."""
    return plan_study(loaded) if isinstance(loaded, Study) else plan_run(loaded)


def plan_study(study: Study) -> StudyPlan:
    """Every run of ``study`` planned; an error names its cell and variant."""
    runs = []
    for cell, variant, r, experiment in study.replicates:
        try:
            runs.append((cell, variant, r, plan_run(experiment)))
        except ConfigError as exc:
            raise ConfigError(f"cell {cell!r}, variant {variant!r}: {exc}") from None
    return StudyPlan(study, tuple(runs))


def plan_run(experiment: Experiment) -> RunPlan:
    """The plan of ``experiment``; a ConfigError naming the field when its data cannot be
    dealt out (``data.sizes``, ``nodes[2].data.shard``) or would not fit its ``limits``
    (:mod:`starling.orchestrator.planning.memory`, which reads the data files to size them)."""
    data = data_specs(experiment)
    model = build_model(experiment.model)
    dim = model.dim
    limits = experiment.limits
    check_matrices(model, limits.node_memory)
    check_newton_prox(
        model, algorithm_info(experiment.algorithm).proximal, experiment.chains, limits.node_memory
    )
    check_synthetic(
        experiment.data.source,
        experiment.chains,
        dim,
        data,
        limits.node_memory,
        "data.sizes" if experiment.data.sizes is not None else "data.size",
    )
    check_samples(
        experiment.rounds, experiment.chains, dim, len(experiment.nodes), limits.samples_memory
    )
    check_file_data(experiment)
    check_evaluation(experiment.evaluation, dim, limits.samples_memory)
    evaluation = EvaluationPlan(
        name=experiment.name,
        algorithm=experiment.algorithm,
        model=experiment.model,
        rounds=experiment.rounds,
        chains=experiment.chains,
        seed=experiment.seed,
        node_ids=experiment.node_ids,
        sampling_nodes=experiment.sampling_nodes(),
        data=experiment.data,
        data_specs=data,
        evaluation=experiment.evaluation,
        source=experiment.source,
    )
    return RunPlan(
        name=experiment.name,
        rounds=experiment.rounds,
        round_deadline=experiment.round_deadline,
        link_delay_ms=experiment.link_delay_ms,
        specs={spec.node_id: spec for spec in node_specs(experiment, data=data)},
        fixed_addresses={n.id: n.address for n in experiment.nodes if n.address},
        backend=experiment.backend,
        link_faults=experiment.faults,
        node_faults=experiment.node_faults,
        kernel_faults=experiment.kernel_faults,
        down_grace=limits.down_grace,
        evaluation=evaluation,
    )
