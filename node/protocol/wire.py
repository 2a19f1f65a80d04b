"""An outgoing ``peer.Iterate``, serialised with its tensors' bytes spliced in by hand.

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
"""

from __future__ import annotations

import numpy as np

from starling.node.messages import Message
from starling.node.protocol.convert import message_to_iterate, wire_array
from starling.node.protocol.starling.v1 import peer_pb2, tensor_pb2

__all__ = ["SPLICE_FROM", "encode_iterate"]

SPLICE_FROM = 32 * 1024
"""Payloads smaller than this are serialised by protobuf whole: splicing costs three small
messages' serialisation (7 µs for a dim-2 iterate against protobuf's 4.5 µs); protobuf's
copies overtake that at about 32 KiB (9.0 against 9.4 µs; 272 against 13 µs at 128 KB)."""

_LENGTH_DELIMITED = 2
_ITERATE_TENSORS = 7  # Iterate.tensors
_TENSOR_DATA = 4  # Tensor.data


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
