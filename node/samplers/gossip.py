"""The consensus half of the undirected samplers: what a node makes of its neighbours' iterates.

Pure functions of the node's own iterate and its inbox (ordered by sender id, so the sums
are bit-reproducible). A neighbour whose message did not arrive this round is absent from
that round's graph.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from starling.node.messages import Message
from starling.node.params import ConfigError
from starling.node.spec import NodeSpec

__all__ = ["check_mixing_weights", "disagreement", "mix"]

_ROUNDING = 1e-9


def check_mixing_weights(spec: NodeSpec) -> None:
    """Refuse, naming the field, a schedule whose weights cannot be a row of a doubly
    stochastic S: an in-peer without a weight (its message could not be mixed), a weight
    outside [0, 1], or in-peer weights summing past 1 (the node's own weight would be
    negative)."""
    for k, hood in enumerate(spec.schedule):
        for peer in hood.in_peers:
            if peer not in hood.weights:
                raise ConfigError(f"schedule[{k}].weights: no weight for in-peer {peer!r}")
        for peer, weight in hood.weights.items():
            if not 0.0 <= weight <= 1.0:
                raise ConfigError(
                    f"schedule[{k}].weights.{peer}: must be in [0, 1], got {weight!r}"
                )
        total = sum(hood.weights[peer] for peer in hood.in_peers)
        if total > 1.0 + _ROUNDING:
            raise ConfigError(
                f"schedule[{k}].weights: the in-peers' weights sum to {total}, more than 1"
            )


def mix(
    own: np.ndarray, weights: Mapping[str, float], inbox: Mapping[str, Message], kind: str
) -> np.ndarray:
    """``Σ_{j∈N_i∪{i}} S_ij x_j`` ([000] eq. 22, 24) over the node and the neighbours heard
    from; a missing neighbour's weight moves to the node itself, so the row still sums to 1."""
    self_weight = 1.0 - sum(weights[j] for j in inbox)
    total = self_weight * own
    for sender, message in inbox.items():
        total = total + weights[sender] * message[kind]
    return total


def disagreement(own: np.ndarray, inbox: Mapping[str, Message], kind: str) -> np.ndarray:
    """``Σ_{j∈N_i} (x_i − x_j)`` with unweighted adjacency ([004] eq. 8) over the neighbours
    heard from."""
    total = np.zeros_like(own)
    for message in inbox.values():
        total = total + (own - message[kind])
    return total
