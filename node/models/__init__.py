"""Models a node can hold: each turns its private data into a local potential ``f_i``."""

from __future__ import annotations

from node.models.base import Dataset, GaussianPosterior, GridPosterior, LocalPotential
from node.models.conjugate_gaussian import ConjugateGaussian
from node.models.gaussian_mixture import GaussianMixture
from node.models.linear_regression import LinearRegression
from node.models.logistic_regression import LogisticRegression
from node.models.mlp import MLP
from node.params import ConfigError, parse_params
from node.spec import ModelSpec

__all__ = [
    "MODELS",
    "Dataset",
    "GaussianPosterior",
    "GridPosterior",
    "LocalPotential",
    "build_model",
]

# name -> parameter dataclass which is also the model (synthesize, local_potential, ...)
MODELS: dict[str, type] = {
    "linear_regression": LinearRegression,
    "logistic_regression": LogisticRegression,
    "gaussian_mixture": GaussianMixture,
    "conjugate_gaussian": ConjugateGaussian,
    "mlp": MLP,
}


def build_model(spec: ModelSpec):
    """The model object named in ``spec``, with its parameters checked."""
    try:
        cls = MODELS[spec.name]
    except KeyError:
        raise ConfigError(
            f"model.name: unknown model {spec.name!r} (known: {', '.join(sorted(MODELS))})"
        ) from None
    return parse_params(cls, spec.params, "model.params")
