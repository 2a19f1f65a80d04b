"""An outgoing ``peer.Iterate``, serialised with its tensors' bytes spliced in by hand, and
cut into parts when it is large.

protobuf (upb) takes a ``bytes`` field by copying it into the message's arena, and copies
it again to serialise: encoding one 1000 × 1000 float64 iterate with
:func:`~starling.node.protocol.convert.message_to_iterate` and ``SerializeToString`` took
25 ms, against 0.7 ms here (measured alone on a 2-core machine, docs/performance.md). Here
protobuf serialises everything but the payloads — the envelope (experiment, sender,
receiver, round, phase, kind), each tensor's name, shape and dtype, the flags — and each
tensor's ``data`` field is written as the wire format defines a length-delimited field (its
tag, the length as a varint, the bytes), straight from the array's buffer, so the payload
is copied once, into the message's bytes.

Iterates under :data:`SPLICE_FROM` are left to protobuf whole. The result is byte for byte
what ``message_to_iterate(...).SerializeToString()`` gives
(fields in number order, proto3 defaults left out; ``tests/node/test_wire.py`` checks it
against protobuf itself), so the receiving side parses it with the generated class.

An iterate whose bytes exceed :data:`PART_BYTES` crosses as several messages
(:func:`split_iterate`, ``Iterate.chunk`` and ``more``): a node reads no message larger than
a few MiB from a caller it does not know yet, and the parts of an admitted stream are joined
again by :class:`PartJoiner`, up to a bound the receiver sets.
"""

from __future__ import annotations

import numpy as np

from starling.node.messages import Message
from starling.node.protocol.convert import message_to_iterate, wire_array
from starling.node.protocol.starling.v1 import peer_pb2, tensor_pb2

__all__ = [
    "PART_BYTES",
    "SPLICE_FROM",
    "PartJoiner",
    "PartsRefused",
    "encode_iterate",
    "split_iterate",
]

SPLICE_FROM = 32 * 1024
"""Payloads smaller than this are serialised by protobuf whole: splicing costs three small
messages' serialisation (7 µs for a dim-2 iterate against protobuf's 4.5 µs); protobuf's
copies overtake that at about 32 KiB (9.0 against 9.4 µs; 272 against 13 µs at 128 KB)."""

PART_BYTES = 1024 * 1024
"""The size of the parts a larger iterate crosses in: well under any node's receive limit
(:data:`~starling.node.runtime.transport.MIN_MAX_REQUEST_BYTES`), large enough that a
part's envelope and its message's overhead cost nothing beside its copy."""

_LENGTH_DELIMITED = 2
_VARINT = 0
_ITERATE_TENSORS = 7  # Iterate.tensors
_TENSOR_DATA = 4  # Tensor.data
_ITERATE_CHUNK = 10  # Iterate.chunk
_ITERATE_MORE = 11  # Iterate.more


def _varint(value: int) -> bytes:
    """An unsigned integer in protobuf's base-128 varint encoding."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tag(field: int) -> bytes:
    return _varint((field << 3) | _LENGTH_DELIMITED)


_TENSOR_TAG = _tag(_ITERATE_TENSORS)
_DATA_TAG = _tag(_TENSOR_DATA)
_CHUNK_TAG = _tag(_ITERATE_CHUNK)
_MORE_TRUE = _varint((_ITERATE_MORE << 3) | _VARINT) + b"\x01"


def _tensor_parts(name: str, value: np.ndarray) -> list[bytes | memoryview]:
    """One ``tensors`` entry of an Iterate: tag, length, then the Tensor itself."""
    wire_name, wire = wire_array(value, name)
    shape = np.shape(value)  # wire_array makes a 0-d array 1-d
    head = tensor_pb2.Tensor(name=name, shape=shape, dtype=wire_name).SerializeToString()
    size = wire.nbytes
    if size:
        payload: bytes | memoryview = wire.reshape(-1).data.cast("B")
        data = [_DATA_TAG, _varint(size), payload]
    else:
        data = []  # an empty bytes field is a proto3 default: left out
    length = len(head) + sum(len(part) for part in data[:2]) + size
    return [_TENSOR_TAG, _varint(length), head, *data]


def encode_iterate(
    message: Message | None,
    *,
    experiment: str,
    sender: str,
    receiver: str,
    round: int,  # noqa: A002 - the protobuf field's name
    phase: int,
    resent: bool = False,
) -> bytes:
    """The serialised ``peer.Iterate`` of ``message`` (None: a withheld notice).

    Raises :class:`~starling.node.protocol.convert.TensorError` for a tensor of a dtype the
    wire does not carry, as ``message_to_iterate`` does.
    """
    envelope = peer_pb2.Iterate(
        experiment=experiment, sender=sender, receiver=receiver, round=round, phase=phase
    )
    if message is None:
        envelope.withheld, envelope.resent = True, resent
        return envelope.SerializeToString()
    if message.nbytes < SPLICE_FROM:
        iterate = message_to_iterate(
            message,
            experiment=experiment,
            sender=sender,
            receiver=receiver,
            round=round,
            phase=phase,
        )
        iterate.resent = resent
        return iterate.SerializeToString()
    envelope.kind = message.kind
    parts: list[bytes | memoryview] = [envelope.SerializeToString()]
    for name, value in message.tensors.items():
        parts += _tensor_parts(name, value)
    if resent:
        parts.append(peer_pb2.Iterate(resent=True).SerializeToString())
    return b"".join(parts)


def split_iterate(encoded: bytes, part_bytes: int = PART_BYTES) -> list[bytes]:
    """The messages that carry the serialised Iterate ``encoded``: itself when it is at most
    ``part_bytes``, else one Iterate per part, each holding only ``chunk`` and, on all but
    the last, ``more`` (byte for byte what protobuf serialises for them)."""
    if len(encoded) <= part_bytes:
        return [encoded]
    view = memoryview(encoded)
    parts = []
    for start in range(0, len(encoded), part_bytes):
        piece = view[start : start + part_bytes]
        more = _MORE_TRUE if start + part_bytes < len(encoded) else b""
        parts.append(b"".join((_CHUNK_TAG, _varint(len(piece)), piece, more)))
    return parts


class PartsRefused(ValueError):
    """The parts of an iterate could not be joined; the message says why."""


class PartJoiner:
    """Joins the parts of the iterates of one stream (:func:`split_iterate`)."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        self._skipping = False

    def add(self, iterate: peer_pb2.Iterate, limit: int) -> peer_pb2.Iterate | None:
        """``iterate`` itself when it is whole; None while an iterate's parts are coming;
        the joined iterate with its last part. :class:`PartsRefused` once the parts exceed
        ``limit`` bytes (the rest of that iterate's parts are then skipped) or cannot be
        read as an Iterate."""
        if not iterate.chunk and not iterate.more:
            if self._parts:
                self._reset()
                raise PartsRefused("a whole message came between the parts of an iterate")
            return iterate
        if self._skipping:
            self._skipping = iterate.more
            return None
        chunk = iterate.chunk
        self._size += len(chunk)
        if self._size > limit:
            size = self._size
            self._reset()
            self._skipping = iterate.more
            raise PartsRefused(
                f"an iterate in parts of {size} bytes or more, beyond the {limit} this "
                "node takes for this run"
            )
        self._parts.append(chunk)
        if iterate.more:
            return None
        data = b"".join(self._parts)
        self._reset()
        whole = peer_pb2.Iterate()
        try:
            whole.ParseFromString(data)
        except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and its kin
            raise PartsRefused(f"its parts do not join into an iterate ({exc})") from None
        if whole.chunk or whole.more:
            raise PartsRefused("an iterate's parts join into parts again")
        return whole

    def _reset(self) -> None:
        self._parts, self._size = [], 0
