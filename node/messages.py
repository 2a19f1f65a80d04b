"""What nodes say to each other: named tensors, free of any transport.

A :class:`Message` is what a sampler emits for one neighbour in one round phase; the
runtime wraps it with (experiment, sender, round, phase) on the wire and unwraps it on
arrival, so sampler code never sees protobuf.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Message", "MessageRejected", "all_finite", "check_message"]


@dataclass(frozen=True)
class Message:
    """A sampler-level message: a kind (e.g. ``"x"``) and named float arrays."""

    kind: str
    tensors: Mapping[str, np.ndarray] = field(default_factory=dict)
    round: int = -1
    """The sender's round when it sent this; set by the driver on delivery (staleness)."""

    def __getitem__(self, name: str) -> np.ndarray:
        return self.tensors[name]

    @property
    def nbytes(self) -> int:
        """The tensor bytes it carries (what a link's ``bytes`` counts at both ends, and
        what bounds a sender's waiting messages), known without encoding anything."""
        return sum(np.asarray(value).nbytes for value in self.tensors.values())


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
        if not all_finite(value):
            raise MessageRejected(f"peer {sender!r}: tensor {name!r} holds NaN or Inf")
    extra = set(message.tensors) - set(expected)
    if extra:
        raise MessageRejected(f"peer {sender!r}: unexpected tensors {sorted(extra)}")


def all_finite(value: np.ndarray) -> bool:
    """Whether every element of ``value`` is finite. A large real array is decided by its sum
    in one pass, without a boolean array its size: the sum is finite only if every term is
    (NaN and ±Inf propagate); only a sum that overflowed is checked element by element."""
    array = np.asarray(value)
    kind = array.dtype.kind
    if kind not in "fc":
        return True
    if kind == "f" and array.size > _ELEMENTWISE_UP_TO:
        with np.errstate(over="ignore", invalid="ignore"):
            if math.isfinite(array.sum()):
                return True
    return bool(np.isfinite(array).all())


_ELEMENTWISE_UP_TO = 4096
"""Up to this many elements the plain element-wise check is as fast as the sum."""
