"""Loading what ``starling run`` or ``simulate`` was given, in one call: the configuration
stage's façade.

:func:`load` reads the file (or the shipped example of that name), lays an inventory over its
``backend`` if one is given, and parses it with every check the file alone decides: an
:class:`~starling.orchestrator.config.experiment.Experiment`, or a
:class:`~starling.orchestrator.config.study.Study` for a ``study:`` file. Every error is one
:class:`~starling.node.params.ConfigError` naming the field (in a study, with its cell and
variant). Planning comes next (:func:`starling.orchestrator.planning.plan.plan`), with the
checks that need the plan.
"""

from __future__ import annotations

from pathlib import Path

from starling.node.params import ConfigError
from starling.orchestrator.config.experiment import Experiment, parse_experiment
from starling.orchestrator.config.inventory import load_inventory, with_inventory
from starling.orchestrator.config.shipped import experiment_file
from starling.orchestrator.config.study import Study, is_study, load_study
from starling.orchestrator.config.yaml_files import read_yaml_file

__all__ = ["load"]


def load(name: str | Path, inventory: str | Path | None = None) -> Experiment | Study:
    """The experiment or study of file ``name`` (module docstring); ``inventory``: a file of
    nodes that already run, in place of the experiment's backend."""
    raw = read_yaml_file(experiment_file(str(name)))
    if is_study(raw):
        if inventory:
            raise ConfigError("--inventory: drives one experiment, not a study")
        return load_study(raw)
    if inventory:  # the experiment's backend becomes the file's nodes
        raw = with_inventory(raw, load_inventory(inventory))
    return parse_experiment(raw, default_name=Path(name).stem)
