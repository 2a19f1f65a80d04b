"""An outgoing ``peer.Iterate``, serialised once for all its receivers with its tensors'
bytes spliced in by hand, and cut into parts when it is large.

protobuf (upb) takes a ``bytes`` field by copying it into the message's arena, and copies
it again to serialise: encoding one 1000 × 1000 float64 iterate with
:func:`~starling.node.protocol.convert.message_to_iterate` and ``SerializeToString`` took
25 ms, against 0.7 ms here (measured alone on a 2-core machine, docs/performance.md). Here
protobuf serialises everything but the payloads — the envelope (experiment, sender, round,
phase, kind), each tensor's name, shape and dtype — and each tensor's ``data`` field is
written as the wire format defines a length-delimited field (its tag, the length as a
varint, the bytes), straight from the array's buffer, starting at a multiple of
:data:`PAYLOAD_ALIGNMENT` bytes of the message (a length varint a byte longer, or a
``dtype`` written twice, the first one a few spaces: both mean to protobuf what the plain
encoding means). Iterates under :data:`SPLICE_FROM` are left to protobuf whole.

A node sends the same message to each of its out-peers, and only the ``receiver`` field
(and ``resent``, on a resend) differs between them. protobuf's wire format reads
concatenated messages as one, merged (a singular field takes the last value it is given,
repeated fields add up), so :class:`IterateBody` serialises the Iterate without those two
fields once — what protobuf serialises for it but for the payloads' padding (fields in
number order, proto3 defaults left out; ``tests/node/test_wire.py`` checks that protobuf
reads it as its own) — and :meth:`IterateBody.addressed` appends each receiver's two
fields, serialised on their own.

An iterate whose bytes exceed :data:`PART_BYTES` crosses as several messages
(``Iterate.chunk`` and ``more``): a node reads no message larger than a few MiB from a
caller it does not know yet, and the parts of an admitted stream are joined again by
:class:`PartJoiner`, up to a bound the receiver sets. The body is cut into its parts once,
straight from the arrays' buffers (so an iterate's payload is copied once, into the parts
every receiver shares); only the last part, which ends with the receiver's fields, is made
per receiver.

The receiving side takes each message's bytes as gRPC hands them over
(:meth:`PartJoiner.add_bytes`): a part framed as this module frames one is read without
protobuf, its chunk a view of those bytes, so an iterate's parts are copied once, when
joined. protobuf would copy each payload twice more (into its arena when it parses, out of
it when ``Tensor.data`` is read), so an Iterate of :data:`SPLICE_FROM` bytes or more has
its payloads found by hand (:func:`stripped_iterate`, which walks the wire format and hands
anything unusual to protobuf whole): protobuf parses the rest, and each tensor is read
with ``np.frombuffer`` as an aligned, read-only view of the received bytes
(:func:`~starling.node.protocol.convert.iterate_to_message`). An iterate is then copied
once on arrival: measured alone (thread CPU, fresh bytes for every message as gRPC gives
them), 1000 × 1000 float64 in parts 1.43 → 0.57 ms and 250 × 1000 0.20 → 0.09 ms.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np

from starling.node.messages import Message
from starling.node.protocol.convert import message_to_iterate, wire_array, withheld_iterate
from starling.node.protocol.starling.v1 import peer_pb2, tensor_pb2

__all__ = [
    "PART_BYTES",
    "Arrived",
    "SPLICE_FROM",
    "PartJoiner",
    "IterateBody",
    "PartsRefused",
    "split_iterate",
    "stripped_iterate",
    "withheld_notice",
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
_CHUNK_TAG_BYTE = _CHUNK_TAG[0]


PAYLOAD_ALIGNMENT = 8
"""Where a spliced payload starts in the serialised Iterate: a multiple of this many bytes,
so that the receiver's arrays, views of the bytes it received, are aligned for every dtype
the wire carries (:func:`~starling.node.protocol.convert.array_from_tensor`)."""
_MAX_LENGTH_VARINT = 5  # protobuf reads a length as a 32-bit varint: at most 5 bytes
_DTYPE_TAG = b"\x1a"  # Tensor.dtype, length-delimited


def _padded_varint(value: int, extra: int) -> bytes:
    """``value`` as a varint ``extra`` bytes longer than it needs: continuation bytes of
    zeros, which protobuf reads as the same value."""
    plain = _varint(value)
    if not extra:
        return plain
    return plain[:-1] + bytes([plain[-1] | 0x80]) + b"\x80" * (extra - 1) + b"\x00"


def _padding(extra: int) -> tuple[int, bytes]:
    """``extra`` bytes of padding before a tensor's payload, as (bytes added to the
    payload's length varint, a field written before the Tensor's own): one byte on the
    varint, or a ``dtype`` field of two bytes or more, which the Tensor's own ``dtype``,
    written after it, replaces (protobuf keeps the last value of a field given twice)."""
    if extra == 0:
        return 0, b""
    if extra == 1:
        return 1, b""
    return 0, _DTYPE_TAG + _varint(extra - 2) + b" " * (extra - 2)


def _tensor_parts(name: str, value: np.ndarray, offset: int) -> list[bytes | memoryview]:
    """One ``tensors`` entry of an Iterate: tag, length, then the Tensor itself, for a body
    in which the entry starts at byte ``offset``. Its payload starts at a multiple of
    :data:`PAYLOAD_ALIGNMENT` (:func:`_padding`), unless the payload's length varint has no
    room for the one byte that takes (payloads of 256 MiB or more)."""
    wire_name, wire = wire_array(value, name)
    shape = np.shape(value)  # wire_array makes a 0-d array 1-d
    head = tensor_pb2.Tensor(name=name, shape=shape, dtype=wire_name).SerializeToString()
    size = wire.nbytes
    if not size:  # an empty bytes field is a proto3 default: left out
        return [_TENSOR_TAG, _varint(len(head)), head]
    payload: bytes | memoryview = wire.reshape(-1).data.cast("B")

    def entry(extra: int) -> list[bytes] | None:
        """The entry up to its payload with ``extra`` bytes of padding; None if it has no
        room for them."""
        on_varint, before = _padding(extra)
        if len(_varint(size)) + on_varint > _MAX_LENGTH_VARINT:
            return None
        fields = [before, head, _DATA_TAG, _padded_varint(size, on_varint)]
        length = sum(len(field) for field in fields) + size
        return [_TENSOR_TAG, _varint(length), *fields]

    # Nine tries reach every remainder: the entry's length varint grows by a byte at most
    # once among them.
    for extra in range(PAYLOAD_ALIGNMENT + 1):
        pieces = entry(extra)
        if pieces is not None and (offset + sum(map(len, pieces))) % PAYLOAD_ALIGNMENT == 0:
            return [*pieces, payload]
    unpadded = entry(0)
    assert unpadded is not None
    return [*unpadded, payload]


def withheld_notice(
    *,
    experiment: str,
    sender: str,
    receiver: str,
    round: int,  # noqa: A002 - the protobuf field's name
    phase: int,
    resent: bool = False,
) -> bytes:
    """The serialised withheld notice of (round, phase) for ``receiver``
    (:func:`~starling.node.protocol.convert.withheld_iterate`)."""
    notice = withheld_iterate(
        experiment=experiment, sender=sender, receiver=receiver, round=round, phase=phase
    )
    notice.resent = resent
    return notice.SerializeToString()


class IterateBody:
    """One message's ``peer.Iterate`` without ``receiver`` and ``resent``, serialised once
    for every receiver (see the module's docstring).

    ``leading`` are the parts every receiver is sent first (none when the body is not cut);
    ``rest`` is what follows them: the body's last bytes, up to a part's worth, or the whole
    body when it is not cut.
    """

    def __init__(
        self,
        message: Message,
        *,
        experiment: str,
        sender: str,
        round: int,  # noqa: A002 - the protobuf field's name
        phase: int,
        part_bytes: int = PART_BYTES,
    ):
        """Raises :class:`~starling.node.protocol.convert.TensorError` for a tensor of a
        dtype the wire does not carry, as ``message_to_iterate`` does."""
        self.part_bytes = part_bytes
        if message.nbytes < SPLICE_FROM:
            iterate = message_to_iterate(
                message, experiment=experiment, sender=sender, receiver="", round=round, phase=phase
            )
            pieces: list[bytes | memoryview] = [iterate.SerializeToString()]
        else:
            envelope = peer_pb2.Iterate(
                experiment=experiment, sender=sender, round=round, phase=phase, kind=message.kind
            )
            pieces = [envelope.SerializeToString()]
            for name, value in message.tensors.items():
                pieces += _tensor_parts(name, value, sum(len(piece) for piece in pieces))
        self.size = sum(len(piece) for piece in pieces)
        """The body's serialised bytes."""
        if self.size <= part_bytes:
            self.leading: tuple[bytes, ...] = ()
            self.rest = b"".join(pieces)
            return
        # Every part but the last is the same for all receivers: the last holds at least one
        # byte of the body (a part is never empty) and ends with the receiver's fields.
        cuts = list(_cut(pieces, part_bytes))
        self.leading = tuple(
            b"".join((_CHUNK_TAG, _varint(part_bytes), *cut, _MORE_TRUE)) for cut in cuts[:-1]
        )
        self.rest = b"".join(cuts[-1])

    def addressed(self, receiver: str, resent: bool = False) -> tuple[list[bytes], int]:
        """The messages that carry this Iterate to ``receiver`` (the body's shared parts and
        its own last one; or the one whole message) and the Iterate's serialised size."""
        fields = peer_pb2.Iterate(receiver=receiver, resent=resent).SerializeToString()
        size = self.size + len(fields)
        if not self.leading:
            return split_iterate(self.rest + fields, self.part_bytes), size
        tail = len(self.rest) + len(fields)
        last = b"".join((_CHUNK_TAG, _varint(tail), self.rest, fields))
        return [*self.leading, last], size


def _cut(pieces: Sequence[bytes | memoryview], size: int) -> Iterator[list[memoryview]]:
    """The bytes of ``pieces``, in order, as runs of ``size`` bytes (the last one shorter,
    never empty), each a list of views into the pieces: nothing is copied."""
    run: list[memoryview] = []
    room = size
    for piece in pieces:
        view = memoryview(piece).cast("B")
        while len(view):
            take = view[:room]
            run.append(take)
            view = view[len(take) :]
            room -= len(take)
            if room == 0:
                yield run
                run, room = [], size
    if run:
        yield run


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


_FIXED64, _FIXED32 = 1, 5
_FIXED_BYTES = {_FIXED64: 8, _FIXED32: 4}


def _read_varint(data: bytes, position: int, end: int) -> tuple[int, int] | None:
    """(value, position after it) of the varint at ``position``; None if it runs past
    ``end`` or beyond 64 bits."""
    value, shift = 0, 0
    while position < end and shift <= 63:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position
    return None


def _fields(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """The fields of the message ``data[start:end]`` as ``(number, wire type, field start,
    value start, value end)``, a length-delimited value without its length; a field that
    protobuf would not read (a group, a truncated one) ends the walk with ``(-1, …)``."""
    position = start
    while position < end:
        key = _read_varint(data, position, end)
        if key is None:
            yield -1, -1, position, position, position
            return
        tag, value = key
        number, wire = tag >> 3, tag & 7
        if number == 0:
            yield -1, -1, position, value, value
            return
        if wire == _VARINT:
            read = _read_varint(data, value, end)
            stop = -1 if read is None else read[1]
        elif wire in _FIXED_BYTES:
            stop = value + _FIXED_BYTES[wire]
        elif wire == _LENGTH_DELIMITED:
            read = _read_varint(data, value, end)
            if read is None:
                stop = -1
            else:
                length, value = read
                stop = value + length
        else:  # groups (3, 4) and wire types protobuf does not have
            stop = -1
        if stop < 0 or stop > end:
            yield -1, -1, position, value, value
            return
        yield number, wire, position, value, stop
        position = stop


MOST_FIELDS_BY_HAND = 256
""":func:`stripped_iterate` walks at most this many fields (an Iterate's own and its
tensors'); beyond them it hands the message to protobuf, whose parser is C: a peer that
sends a megabyte of two-byte fields costs protobuf's time, not a Python loop's."""


def stripped_iterate(data: bytes) -> tuple[bytes, list[memoryview]] | None:
    """The serialised Iterate ``data`` with each tensor's ``data`` field taken out, and those
    payloads as views of ``data`` in the tensors' order (an empty view for a tensor with
    none): protobuf then parses only the envelope, and a payload is read without the two
    copies that parsing it and reading ``Tensor.data`` make.

    protobuf reads the stripped bytes as the same Iterate with every ``Tensor.data`` empty.
    None — read it whole with protobuf — unless every field is one protobuf reads as
    written (no group, nothing truncated), no tensor carries ``data`` twice or with
    another wire type, and there are at most :data:`MOST_FIELDS_BY_HAND` fields.
    """
    view = memoryview(data)
    envelope: list[bytes | memoryview] = []
    payloads: list[memoryview] = []
    kept = 0  # data[kept:] is not yet in the envelope
    walked = 0
    for number, wire, field, value, stop in _fields(data, 0, len(data)):
        walked += 1
        if number < 0 or walked > MOST_FIELDS_BY_HAND:
            return None
        if number != _ITERATE_TENSORS:
            continue
        if wire != _LENGTH_DELIMITED:
            return None
        payload: tuple[int, int, int] | None = None  # (field start, value start, end)
        for inner, inner_wire, inner_field, inner_value, inner_stop in _fields(data, value, stop):
            walked += 1
            if inner < 0 or walked > MOST_FIELDS_BY_HAND:
                return None
            if inner == _TENSOR_DATA:
                if inner_wire != _LENGTH_DELIMITED or payload is not None:
                    return None
                payload = inner_field, inner_value, inner_stop
        if payload is None:
            payloads.append(view[0:0])
            continue
        cut, begins, ends = payload
        head = b"".join((view[value:cut], view[ends:stop]))
        envelope += [view[kept:field], _TENSOR_TAG, _varint(len(head)), head]
        payloads.append(view[begins:ends])
        kept = stop
    envelope.append(view[kept:])
    return b"".join(envelope), payloads


class PartsRefused(ValueError):
    """The parts of an iterate could not be joined; the message says why."""


class Arrived(NamedTuple):
    """An Iterate as it arrived (:meth:`PartJoiner.add_bytes`)."""

    iterate: peer_pb2.Iterate
    payloads: tuple[memoryview, ...] | None = None
    """The tensors' payloads in their order, read out of the received bytes by hand
    (:func:`stripped_iterate`; the tensors' own ``data`` are then empty), or None: they are
    in the tensors."""


class PartJoiner:
    """Joins the parts of the iterates of one stream (:func:`split_iterate`)."""

    def __init__(self) -> None:
        self._parts: list[bytes | memoryview] = []
        self._size = 0
        self._skipping = False

    def add_bytes(self, data: bytes, limit: int) -> Arrived | None:
        """:meth:`add` for one message's bytes as received: a part framed as
        :class:`IterateBody` frames one (``chunk``, then ``more`` or nothing) is taken as a
        view of ``data``, anything else is parsed (:func:`_parsed`). :class:`PartsRefused`
        also for bytes that are not an Iterate."""
        framed = _part_frame(data)
        if framed is not None:
            return self._add_part(*framed, limit)
        return self._add_message(_parsed(data), limit)

    def add(self, iterate: peer_pb2.Iterate, limit: int) -> Arrived | None:
        """``iterate`` itself (as :class:`Arrived`) when it is whole; None while an
        iterate's parts are coming; the joined iterate with its last part.
        :class:`PartsRefused` once the parts exceed ``limit`` bytes (the rest of that
        iterate's parts are then skipped) or cannot be read as an Iterate."""
        return self._add_message(Arrived(iterate), limit)

    def _add_message(self, arrived: Arrived, limit: int) -> Arrived | None:
        iterate = arrived.iterate
        chunk = iterate.chunk  # a copy each time it is read: read once
        if not chunk and not iterate.more:
            if self._parts:
                self._reset()
                raise PartsRefused("a whole message came between the parts of an iterate")
            return arrived
        return self._add_part(chunk, iterate.more, limit)

    def _add_part(self, chunk: bytes | memoryview, more: bool, limit: int) -> Arrived | None:
        if self._skipping:
            self._skipping = more
            return None
        self._size += len(chunk)
        if self._size > limit:
            size = self._size
            self._reset()
            self._skipping = more
            raise PartsRefused(
                f"an iterate in parts of {size} bytes or more, beyond the {limit} this "
                "node takes for this run"
            )
        self._parts.append(chunk)
        if more:
            return None
        data = b"".join(self._parts)
        self._reset()
        arrived = _parsed(data, "its parts do not join into an iterate")
        if arrived.iterate.chunk or arrived.iterate.more:
            raise PartsRefused("an iterate's parts join into parts again")
        return arrived

    def _reset(self) -> None:
        self._parts, self._size = [], 0


def _parsed(data: bytes, refusal: str = "a message that is not an Iterate") -> Arrived:
    """The Iterate ``data``: its payloads read out of ``data`` by hand when it is
    :data:`SPLICE_FROM` bytes or more (:func:`stripped_iterate`), else all of it by
    protobuf. :class:`PartsRefused` with ``refusal`` if it is no Iterate."""
    stripped = stripped_iterate(data) if len(data) >= SPLICE_FROM else None
    try:
        if stripped is None:
            return Arrived(peer_pb2.Iterate.FromString(data))
        envelope, payloads = stripped
        iterate = peer_pb2.Iterate.FromString(envelope)
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and its kin
        raise PartsRefused(f"{refusal} ({exc})") from None
    return Arrived(iterate, tuple(payloads))


def _part_frame(data: bytes) -> tuple[memoryview, bool] | None:
    """(chunk, more) of a message that is exactly ``chunk`` (non-empty) and, optionally,
    ``more: true`` after it — what :class:`IterateBody` sends; None for anything else
    (protobuf reads it then). Such bytes mean to protobuf exactly this chunk and flag."""
    if len(data) < 3 or data[0] != _CHUNK_TAG_BYTE:
        return None
    read = _read_varint(data, 1, len(data))
    if read is None:
        return None
    length, position = read
    end = position + length
    if length == 0 or end > len(data):
        return None
    if end == len(data):
        more = False
    elif data[end:] == _MORE_TRUE:
        more = True
    else:
        return None
    return memoryview(data)[position:end], more
