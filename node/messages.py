"""What nodes say to each other: named tensors, free of any transport.

A :class:`Message` is what a sampler emits for one neighbour in one round phase; the
runtime wraps it with (experiment, sender, round, phase) on the wire and unwraps it on
arrival, so sampler code never sees protobuf.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Message", "MessageRejected", "check_message"]


@dataclass(frozen=True)
class Message:
    """A sampler-level message: a kind (e.g. ``"x"``) and named float arrays."""

    kind: str
    tensors: Mapping[str, np.ndarray] = field(default_factory=dict)
    round: int = -1
    """The sender's round when it sent this; set by the driver on delivery (staleness)."""

    def __getitem__(self, name: str) -> np.ndarray:
        return self.tensors[name]


class MessageRejected(ValueError):
    """A received message does not match what the receiving sampler expects."""


def check_message(message: Message, expected: Mapping[str, tuple[int, ...]], sender: str) -> None:
    """Reject a message whose tensors are missing, misshapen or not finite.

    ``expected`` maps tensor name to shape, as declared by the receiving sampler.
    The error names the sender and the tensor, so a bad peer can be found.
    """
    for name, shape in expected.items():
        if name not in message.tensors:
            raise MessageRejected(
                f"peer {sender!r}: message {message.kind!r} lacks tensor {name!r}"
            )
        value = message.tensors[name]
        if tuple(value.shape) != tuple(shape):
            raise MessageRejected(
                f"peer {sender!r}: tensor {name!r} has shape {tuple(value.shape)}, "
                f"expected {tuple(shape)}"
            )
        if not np.all(np.isfinite(value)):
            raise MessageRejected(f"peer {sender!r}: tensor {name!r} holds NaN or Inf")
    extra = set(message.tensors) - set(expected)
    if extra:
        raise MessageRejected(f"peer {sender!r}: unexpected tensors {sorted(extra)}")
