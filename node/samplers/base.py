"""The one interface every sampler implements, whatever carries its messages.

A round has one or more *phases*. In each phase the driver (simulator or gRPC runtime)

1. asks every node's program for :meth:`NodeProgram.outgoing` — a message per receiver,
2. delivers what the links let through,
3. hands each program its :meth:`NodeProgram.incoming` inbox, ordered by sender id,

and after the last phase records :meth:`NodeProgram.sample`. A synchronous driver waits
for :meth:`NodeProgram.expected_senders` until the round deadline; a missing message
means that link was down in that round. Asynchronous programs (``synchronous = False``)
get the latest message each peer has sent instead, possibly stale.

Programs are pure numpy: no IO, no grpc, and the random generator is passed in. A program
is a thin adapter: it turns its inbox into a starting point and a force and hands them to a
kernel of :mod:`starling.node.samplers.kernels`. Everything a restart needs lives in one typed state
value, ``program.current`` (a NamedTuple of arrays), which checkpoints by value.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from starling.node.messages import Message
from starling.node.models.base import LocalPotential
from starling.node.params import ConfigError
from starling.node.spec import Neighbourhood, NodeSpec

__all__ = ["Inbox", "NodeContext", "NodeProgram", "Program", "ProgramState", "ordered_inbox"]

Inbox = Mapping[str, Message]


def ordered_inbox(received: Mapping[str, Message]) -> dict[str, Message]:
    """The inbox in sender-id order, so sums over neighbours are bit-reproducible."""
    return {sender: received[sender] for sender in sorted(received)}


@dataclass(frozen=True)
class NodeContext:
    """What a program may know about its node: its spec, its potential and its settings."""

    spec: NodeSpec
    potential: LocalPotential | None
    dim: int
    hyper: Any

    @property
    def node_id(self) -> str:
        return self.spec.node_id

    @property
    def local_potential(self) -> LocalPotential:
        """The potential of the node's own data; a role that holds none has no use for it."""
        if self.potential is None:
            raise ConfigError(
                f"node {self.node_id!r}: role {self.spec.role!r} of {self.spec.algorithm} "
                "needs data, but the node was given none"
            )
        return self.potential

    @property
    def chains(self) -> int:
        return self.spec.chains

    def neighbourhood(self, round_index: int) -> Neighbourhood:
        return self.spec.neighbourhood(round_index)


class ProgramState(Protocol):
    """What a program's state is: a NamedTuple of numpy arrays (this is its shape)."""

    def _asdict(self) -> dict[str, Any]: ...


S = TypeVar("S", bound=ProgramState)


class NodeProgram(ABC):
    """One node's part of a decentralised sampler: the interface the round drivers use.

    Samplers implement it through :class:`Program`, which keeps their state typed.
    """

    phases: int = 1
    synchronous: bool = True

    def __init__(self, ctx: NodeContext, rng: np.random.Generator):
        self.ctx = ctx

    @abstractmethod
    def outgoing(self, round_index: int, phase: int) -> dict[str, Message]:
        """Messages to send this phase, keyed by receiver id."""

    @abstractmethod
    def incoming(
        self, round_index: int, phase: int, inbox: Inbox, rng: np.random.Generator
    ) -> None:
        """Update the state from what arrived (``inbox`` is ordered by sender id)."""

    def expected_senders(self, round_index: int, phase: int) -> tuple[str, ...]:
        """Whom a synchronous driver waits for in this phase: by default the in-peers."""
        return self.ctx.neighbourhood(round_index).in_peers

    def max_staleness(self, round_index: int, phase: int) -> int | None:
        """Asynchronous programs: how many rounds old each expected sender's latest message
        may be before the runtime waits for a fresher one (up to the round deadline).
        None: no bound. The simulator's lockstep model of asynchrony and this bound are
        described in :mod:`starling.node.engine.rounds`."""
        return None

    message_kind = "x"
    """The one kind of message the default :meth:`message_shapes` accepts: an iterate,
    carried in a tensor of the same name (the undirected samplers' ``x``)."""

    def message_shapes(self, kind: str) -> dict[str, tuple[int, ...]]:
        """Tensor shapes expected in an incoming message of ``kind`` (checked on arrival);
        ValueError for a kind this program never receives."""
        if kind != self.message_kind:
            raise ValueError(f"expected {self.message_kind!r}")
        return {kind: (self.ctx.chains, self.ctx.dim)}

    def screened_tensors(self, kind: str) -> dict[str, float]:
        """The tensors of an incoming message of ``kind`` whose values a receiving node
        screens (:mod:`starling.node.runtime.screening`), each with its scale (a multiple of
        the node's bound it may reach): by default every tensor of :meth:`message_shapes`
        at scale 1, an iterate's. A program whose message carries a counter, or a sum that
        grows, says so here."""
        return dict.fromkeys(self.message_shapes(kind), 1.0)

    def positive_tensors(self, kind: str) -> tuple[str, ...]:
        """The tensors of an incoming message of ``kind`` whose every value must be above
        zero (push-sum's weights); a message with one that is not is refused on arrival
        (:mod:`starling.node.runtime.checks`). None by default."""
        return ()

    def sample(self) -> np.ndarray | None:
        """This round's sample, shape (chains, d), or None for a role that records none."""
        return None

    def metrics(self) -> dict[str, float]:
        """Figures the program keeps about its own run (an acceptance rate, how many stale
        inputs it used ...). Read by the driver at the end of the run and reported with the
        node's results; plain floats only, and never part of the sampler's state."""
        return {}

    @abstractmethod
    def state(self) -> dict[str, np.ndarray]:
        """Everything a restart needs, as named arrays (copies), for a checkpoint."""

    @abstractmethod
    def restore(self, state: Mapping[str, np.ndarray]) -> None:
        """Continue from a checkpoint taken by :meth:`state` on an equal program."""


class Program(NodeProgram, Generic[S]):
    """A sampler program whose whole state is one typed value, ``current``.

    ``current`` is a NamedTuple of arrays that updates replace, never mutate; :meth:`state`
    and :meth:`restore` checkpoint it by value, so a restarted node resumes exactly where it
    stopped. Counters a program keeps for :meth:`metrics` only are plain attributes,
    outside the state.
    """

    current: S

    def state(self) -> dict[str, np.ndarray]:
        """The state as named arrays (copies), for a checkpoint."""
        return {name: np.array(value, copy=True) for name, value in self.current._asdict().items()}

    def restore(self, state: Mapping[str, np.ndarray]) -> None:
        """Continue from a checkpoint taken by :meth:`state` on an equal program."""
        names = tuple(self.current._asdict())
        missing = [name for name in names if name not in state]
        if missing:
            raise KeyError(f"checkpoint: the saved state has no {missing[0]!r}")
        self.current = type(self.current)(*(np.array(state[name], copy=True) for name in names))


def broadcast(message: Message, receivers: tuple[str, ...]) -> dict[str, Message]:
    """The same message to each receiver (arrays are shared, never mutated in place)."""
    return {receiver: message for receiver in receivers}
