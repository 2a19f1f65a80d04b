"""Models a node can hold: each turns its private data into a local potential ``f_i``.

A model's module is imported when the model is first asked for, not with this package: a
node serving the linear regression never loads ``scipy.special`` / ``scipy.stats`` that the
classifiers need (start-up time and RSS, issue 15).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from starling.node.models.base import (
    Dataset,
    GaussianPosterior,
    GridPosterior,
    LocalPotential,
    Model,
)
from starling.node.params import ConfigError, parse_params
from starling.node.spec import ModelSpec

__all__ = [
    "MODELS",
    "Dataset",
    "GaussianPosterior",
    "GridPosterior",
    "LocalPotential",
    "Model",
    "build_model",
]


class _Registry(Mapping[str, type[Model]]):
    """Name -> model class, importing the class's module on first look-up."""

    def __init__(self, where: dict[str, str]):
        self._where = where

    def __getitem__(self, name: str) -> type[Model]:
        module, _, attribute = self._where[name].partition(":")
        return getattr(importlib.import_module(module), attribute)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


# name -> parameter dataclass which is also the model (synthesize, local_potential, ...)
MODELS: Mapping[str, type[Model]] = _Registry(
    {
        "linear_regression": "starling.node.models.linear_regression:LinearRegression",
        "logistic_regression": "starling.node.models.logistic_regression:LogisticRegression",
        "gaussian_mixture": "starling.node.models.gaussian_mixture:GaussianMixture",
        "conjugate_gaussian": "starling.node.models.conjugate_gaussian:ConjugateGaussian",
        "mlp": "starling.node.models.mlp:MLP",
    }
)


def build_model(spec: ModelSpec) -> Model:
    """The model object named in ``spec``, with its parameters checked."""
    try:
        cls = MODELS[spec.name]
    except KeyError:
        raise ConfigError(
            f"model.name: unknown model {spec.name!r} (known: {', '.join(sorted(MODELS))})"
        ) from None
    return parse_params(cls, spec.params, "model.params")
