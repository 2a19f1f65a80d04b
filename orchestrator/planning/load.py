"""Loading what ``starling run`` or ``simulate`` was given, in one call: the façade of the
configuration and planning stages.

:func:`load` reads the file (or the shipped example of that name), lays an inventory over its
``backend`` if one is given, parses it, plans it and runs every check that must pass before
anything starts — the file data's size included, which reads the data files. The result is a
:class:`~starling.orchestrator.planning.plan.RunPlan`, or for a ``study:`` file a
:class:`StudyPlan` holding one plan per run. Every error is one
:class:`~starling.node.params.ConfigError` naming the field (and, in a study, the cell and
variant).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from starling.node.params import ConfigError
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.config.inventory import load_inventory, with_inventory
from starling.orchestrator.config.shipped import experiment_file
from starling.orchestrator.config.study import Study, is_study, load_study
from starling.orchestrator.config.yaml_files import read_yaml_file
from starling.orchestrator.planning.memory import check_file_data
from starling.orchestrator.planning.plan import RunPlan, plan_run

__all__ = ["StudyPlan", "load", "plan_study"]


@dataclass(frozen=True)
class StudyPlan:
    """A study and the plan of every one of its runs."""

    study: Study
    runs: tuple[tuple[str, str, int, RunPlan], ...]
    """(cell, variant, seed index r, plan) of every run, r = 0 … K−1."""

    @property
    def name(self) -> str:
        return self.study.name


def load(name: str | Path, inventory: str | Path | None = None) -> RunPlan | StudyPlan:
    """The plan of the experiment or study file ``name`` (module docstring); ``inventory``:
    a file of nodes that already run, in place of the experiment's backend."""
    raw = read_yaml_file(experiment_file(str(name)))
    if is_study(raw):
        if inventory:
            raise ConfigError("--inventory: drives one experiment, not a study")
        return plan_study(load_study(raw), check_files=True)
    if inventory:  # the experiment's backend becomes the file's nodes
        raw = with_inventory(raw, load_inventory(inventory))
    experiment = parse_experiment(raw, default_name=Path(name).stem)
    plan = plan_run(experiment)
    check_file_data(experiment)
    return plan


def plan_study(study: Study, check_files: bool = False) -> StudyPlan:
    """Every run of ``study`` planned; an error names its cell and variant. ``check_files``:
    size each run's file data too (it reads the files)."""
    runs = []
    for cell, variant, r, experiment in study.replicates:
        try:
            plan = plan_run(experiment)
            if check_files:
                check_file_data(experiment)
        except ConfigError as exc:
            raise ConfigError(f"cell {cell!r}, variant {variant!r}: {exc}") from None
        runs.append((cell, variant, r, plan))
    return StudyPlan(study, tuple(runs))
