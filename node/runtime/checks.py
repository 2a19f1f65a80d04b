"""Checks at the node's two doors: the spec it is configured with, and what peers send.

Every failure names the field (``round_deadline``, ``schedule[0].in_peers``) or the peer,
so the orchestrator can show one clear line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from starling.node.config import NODE_SOURCE, HomeData, check_data_path, home_data
from starling.node.messages import Message, check_message
from starling.node.params import ConfigError
from starling.node.protocol import convert
from starling.node.protocol.starling.v1 import peer_pb2
from starling.node.runtime.archive import MAX_NAME_LENGTH, safe_name
from starling.node.runtime.screening import screen
from starling.node.samplers.base import NodeProgram
from starling.node.security import ORCHESTRATOR_ID
from starling.node.shown import shorten
from starling.node.spec import MAX_SECONDS, DataSpec, NodeSpec

__all__ = [
    "Rejected",
    "Screened",
    "admit_spec",
    "check_iterate",
    "check_link_setting",
    "check_spec",
    "iterate_bound",
]


ROUND_WINDOW = 10_000
"""How many rounds ahead of the node's own round a peer's message may be. Peers are never
that far ahead in a run (a synchronous sender waits for its own in-peers; a node restarted
from a checkpoint is behind by at most the rounds since it); a message beyond it is refused
and counted ``rejected``, so one bogus round number cannot make the node count that peer as
answered for the rest of the run."""


ENVELOPE_BYTES = 64 * 1024
"""What an iterate's bytes may hold beyond its tensors' payload: its envelope (ids, round,
kind), each tensor's name, shape and dtype."""


def iterate_bound(spec: NodeSpec, program: NodeProgram) -> int:
    """The most bytes an iterate of this run may have: two ``(chains, dim)`` float64 arrays
    and a small one. Every program's message is one ``(chains, dim)`` array with at most a
    narrower one beside it (push-sum's weights, DG-LMC's profile, a round number), so this
    is twice what any of them needs, and :func:`check_iterate` then holds the message to its
    kind's exact shapes. It bounds what an admitted sender can make a node hold while it
    joins an iterate's parts (:class:`~starling.node.protocol.wire.PartJoiner`)."""
    return 8 * (2 * spec.chains * program.ctx.dim + 4096) + ENVELOPE_BYTES


class Rejected(ValueError):
    """An incoming iterate failed validation; the message says why, naming the sender.

    What it quotes of the iterate (its experiment, kind, claimed sender) is cut to a readable
    length (:func:`starling.node.shown.shorten`): the reason goes to the log and stays in the
    link's ``last_error`` in every Status, and an admitted peer's message may hold megabytes
    of name, each echoed whole before."""

    def __init__(self, message: object = "", *rest: object):
        super().__init__(shorten(str(message)), *rest)


class Unusable(Rejected):
    """An iterate from an admitted in-neighbour, for a round it may send, refused for its
    content (its kind, its tensors' shapes or bytes, a value beyond the screening bound):
    the sender has answered for that round, with nothing the receiver can use, and the
    receiver need not wait out its deadline for it (:data:`starling.node.runtime.inbox.REFUSED`).
    A sampler that ran away sends finite values beyond the bound, round after round: each
    round waited its whole deadline for it before."""


class Screened(Unusable):
    """A well-formed iterate with a value beyond the node's screening bound
    (:mod:`starling.node.runtime.screening`)."""


def _positive_int(value: int, where: str, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}: must be an integer >= {minimum}, got {value!r}")


def check_spec(spec: NodeSpec) -> None:
    """Raise ConfigError naming the first field that cannot work on a network node."""
    for name in ("experiment", "node_id", "algorithm", "role"):
        if not getattr(spec, name):
            raise ConfigError(f"{name}: must not be empty")
    for name in ("experiment", "node_id"):
        length = len(safe_name(getattr(spec, name)))
        if length > MAX_NAME_LENGTH:
            raise ConfigError(
                f"{name}: too long for a file name ({length} characters once quoted, "
                f"at most {MAX_NAME_LENGTH})"
            )
    # With TLS the orchestrator is whoever's certificate names it: a node of that name
    # would hold a certificate that calls Control on every node.
    if ORCHESTRATOR_ID in {
        spec.node_id,
        *spec.peers,
        *spec.in_peers(),
    }:
        raise ConfigError(
            f"node ids: {ORCHESTRATOR_ID!r} is the orchestrator's identity; no node may take it"
        )
    _positive_int(spec.node_index, "node_index", 0)
    _positive_int(spec.rounds, "rounds")
    _positive_int(spec.chains, "chains")
    _positive_int(spec.seed, "seed", 0)
    _positive_int(spec.num_nodes, "num_nodes", 0)
    _positive_int(spec.schedule_period, "schedule_period")
    _positive_int(spec.checkpoint_every, "checkpoint_every")
    if not math.isfinite(spec.round_deadline) or not 0 < spec.round_deadline <= MAX_SECONDS:
        raise ConfigError(
            f"round_deadline: must be a positive number of seconds up to {MAX_SECONDS:g}, "
            f"got {spec.round_deadline!r}"
        )
    if not 0.0 <= spec.prior_share <= 1.0:
        raise ConfigError(f"prior_share: must be in [0, 1], got {spec.prior_share!r}")
    _check_schedule(spec)
    _check_faults(spec)
    if spec.data is not None and spec.data.num_shards < 1:
        raise ConfigError("data.num_shards: must be at least 1")


def _check_schedule(spec: NodeSpec) -> None:
    """Every neighbourhood of the schedule: no self-loop or repeated peer, finite weights,
    an address for every out-peer."""
    for k, hood in enumerate(spec.schedule):
        for side in ("out_peers", "in_peers"):
            peers = getattr(hood, side)
            if spec.node_id in peers:
                raise ConfigError(f"schedule[{k}].{side}: lists the node itself")
            if len(set(peers)) != len(peers):
                raise ConfigError(f"schedule[{k}].{side}: lists a peer twice")
        for peer, weight in hood.weights.items():
            if not math.isfinite(weight):
                raise ConfigError(f"schedule[{k}].weights.{peer}: must be finite")
        for peer in hood.out_peers:
            if not spec.peers.get(peer):
                raise ConfigError(f"peers.{peer}: out-peer {peer!r} has no address")


def _check_faults(spec: NodeSpec) -> None:
    """Every link fault, outbound and inbound: a window in order, a drop probability."""
    faults = [("link_faults", k, f) for k, f in enumerate(spec.link_faults)]
    faults += [("inbound_faults", k, f) for k, (_, f) in enumerate(spec.inbound_faults)]
    for where, k, fault in faults:
        if fault.start > fault.stop:
            raise ConfigError(f"{where}[{k}].rounds: start {fault.start} > stop {fault.stop}")
        if not 0.0 <= fault.drop <= 1.0:
            raise ConfigError(f"{where}[{k}].drop: must be in [0, 1], got {fault.drop!r}")


def check_link_setting(drop: float | None, delay_ms: float | None) -> None:
    """A live link setting (``SetLink``): a drop probability, a delay no clock balks at."""
    if drop is not None and not 0.0 <= drop <= 1.0:
        raise ConfigError(f"drop: must be a probability in [0, 1], got {drop!r}")
    if delay_ms is not None and not 0.0 <= delay_ms <= MAX_SECONDS * 1000.0:
        raise ConfigError(f"delay_ms: must be in [0, {MAX_SECONDS * 1e3:g}], got {delay_ms!r}")


def admit_spec(
    spec: NodeSpec,
    *,
    own_id: str,
    own_data: HomeData | None,
    data_dir: Path | None,
    secret_needed: bool,
) -> tuple[NodeSpec, DataSpec | None]:
    """The spec a Configure brings, checked against the node it reaches: its id (``--id``),
    its own data (``data.source: node`` resolves to it; returned second, else None), its
    data directory, and a peer secret where no TLS carries identities."""
    if secret_needed:
        raise ConfigError("peer_secret: required without TLS (the orchestrator's, per run)")
    if own_id and spec.node_id != own_id:
        raise ConfigError(
            f"node {own_id!r}: asked to run as node {spec.node_id!r}; check the "
            "inventory's addresses"
        )
    own = None
    if spec.data is not None and spec.data.source == NODE_SOURCE:
        spec = replace(spec, data=home_data(spec.data, own_data, spec.node_id))
        own = spec.data
    check_spec(spec)
    check_data_path(spec.data, data_dir, own_data)
    return spec, own


def check_iterate(
    iterate: peer_pb2.Iterate,
    spec: NodeSpec | None,
    program: NodeProgram | None,
    senders: frozenset[str],
    newest_round: int | None = None,
    screen_bound: float = 0.0,
    payloads: Sequence[memoryview] | None = None,
) -> Message | None:
    """The decoded message (None for a withheld notice), or Rejected saying why
    (:class:`Screened` for a value beyond ``screen_bound``, 0: not screened). ``payloads``:
    the tensors' bytes when they were read out of the received message by hand
    (:class:`~starling.node.protocol.wire.Arrived`).

    ``newest_round``: the latest round a message may be for (the receiver's round plus its
    window); a message beyond it is refused, never trusted — a peer cannot claim a round so
    far ahead that the receiver would count it as answered for the rest of the run. A
    message for a round the run does not have (``spec.rounds`` or later) is refused too.
    """
    sender = iterate.sender
    if spec is None:
        raise Rejected(f"peer {sender!r}: node is not configured yet")
    _check_envelope(iterate, spec, program, senders, newest_round)
    if iterate.withheld:
        if len(iterate.tensors):
            raise Unusable(f"peer {sender!r}: a withheld notice must carry no tensors")
        return None
    if program is None:
        raise Rejected(f"peer {sender!r}: node is not configured")
    try:
        expected = program.message_shapes(iterate.kind)
    except Exception as exc:  # noqa: BLE001 - a program may refuse a kind any way it likes
        raise Unusable(
            f"peer {sender!r}: unexpected message kind {iterate.kind!r} ({exc})"
        ) from None
    # Refuse an oversized message before allocating arrays for it, by the shapes it
    # declares: reading a tensor's bytes copies them out of protobuf (an 8 MB iterate's
    # bytes were copied once here and again to decode them). Bytes that do not match
    # their declared shape are refused on decoding (convert.array_from_tensor).
    limit = sum(math.prod(shape) for shape in expected.values()) * 8
    size = sum(math.prod(t.shape) for t in iterate.tensors) * 8  # no dtype is wider
    if size > limit:
        raise Unusable(
            f"peer {sender!r}: oversized message {iterate.kind!r} "
            f"(its shapes declare {size} bytes, at most {limit} expected)"
        )
    try:
        message = convert.iterate_to_message(iterate, payloads)
    except convert.TensorError as exc:
        raise Unusable(f"peer {sender!r}: {exc}") from None
    try:
        check_message(message, expected, sender)
    except ValueError as exc:
        raise Unusable(str(exc)) from None
    scales = program.screened_tensors(iterate.kind)
    _check_values(message, scales, program.positive_tensors(iterate.kind), sender)
    reason = screen(message, scales, screen_bound)
    if reason is not None:
        raise Screened(f"peer {sender!r}: screened, round {iterate.round}: {reason}")
    return message


def _check_values(
    message: Message, iterates: Iterable[str], positive: Iterable[str], sender: str
) -> None:
    """Unusable if an iterate's tensor (one the program screens: a position, a share, a
    gradient) is not float64, as every sampler computes and sends it, or if a tensor the
    program holds positive (push-sum's weights) is not. Before, an admitted peer's float32
    or integer iterate entered the sums (``run`` then no longer computed what ``simulate``
    does), and a push-sum weight of 0 or below made the receiver's samples inf or NaN.
    Counters (a round number, a step count) may be integers."""
    for name in iterates:
        value = message.tensors.get(name)
        if value is not None and value.dtype != np.float64:
            raise Unusable(f"peer {sender!r}: tensor {name!r} is {value.dtype}, expected float64")
    for name in positive:
        value = message.tensors.get(name)
        if value is not None and value.size and not float(value.min()) > 0.0:
            raise Unusable(
                f"peer {sender!r}: tensor {name!r} holds {float(value.min()):.3g}; "
                "expected every value above 0"
            )


def _check_envelope(
    iterate: peer_pb2.Iterate,
    spec: NodeSpec,
    program: NodeProgram | None,
    senders: frozenset[str],
    newest_round: int | None,
) -> None:
    """Who sent it, to whom, for which experiment, round and phase (module docstring)."""
    sender = iterate.sender
    if iterate.experiment != spec.experiment:
        raise Rejected(f"peer {sender!r}: unknown experiment {iterate.experiment!r}")
    if sender not in senders:
        raise Rejected(f"peer {sender!r}: not an in-peer of node {spec.node_id!r}")
    if iterate.receiver != spec.node_id:
        raise Rejected(f"peer {sender!r}: message addressed to {iterate.receiver!r}")
    phases = program.phases if program is not None else 1
    if iterate.round < 0 or not 0 <= iterate.phase < phases:
        raise Rejected(
            f"peer {sender!r}: no round {iterate.round} phase {iterate.phase} in this run"
        )
    if newest_round is not None and iterate.round > newest_round:
        raise Rejected(
            f"peer {sender!r}: round {iterate.round} is beyond this node's window "
            f"(it accepts rounds up to {newest_round})"
        )
    if iterate.round >= spec.rounds:
        # Nothing legitimate sends for such a round (every program sends only in the rounds
        # it runs, resends included); filed, it would wait as pending for ever. A run that
        # is extended is configured again, with its new number of rounds.
        raise Rejected(
            f"peer {sender!r}: round {iterate.round} is past this run's last round "
            f"(the run has {spec.rounds} rounds, 0 to {spec.rounds - 1})"
        )
