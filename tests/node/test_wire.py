"""The wire's hand-made Iterates against protobuf itself, for every kind of iterate: the
body protobuf's own bytes, each receiver's message read as protobuf's own Iterate."""

from __future__ import annotations

import numpy as np
import pytest

from starling.node.messages import Message
from starling.node.protocol import convert, wire
from starling.node.protocol.starling.v1 import peer_pb2
from starling.node.protocol.wire import (
    Arrived,
    IterateBody,
    PartJoiner,
    PartsRefused,
    _part_frame,
    _varint,
    split_iterate,
    stripped_iterate,
    withheld_notice,
)

HEADERS = [
    dict(experiment="exp", sender="1", receiver="0", round=0, phase=0),
    dict(experiment="é-xp", sender="node-a", receiver="node-b", round=2**40, phase=3),
    dict(experiment="", sender="", receiver="", round=-1, phase=-2),  # defaults, negatives
]

rng = np.random.default_rng(0)
TENSORS = {
    "dim 2": {"x": np.array([1.5, -2.0])},
    "chains x dim": {"x": rng.standard_normal((7, 3))},
    "several, each dtype": {
        "x": rng.standard_normal((2, 2)),
        "y": np.arange(5, dtype=np.int64),
        "w": np.float32([0.5, 1.5]),
        "n": np.int32([[1], [2]]),
    },
    "empty": {"x": np.zeros((0, 3))},
    "0-d": {"s": np.array(3.25)},
    "big-endian and strided": {"x": np.arange(12.0).astype(">f8").reshape(3, 4).T},
    "no tensors": {},
    "large (length varints of 3 bytes)": {"x": rng.standard_normal((300, 100))},
}


@pytest.fixture(params=["spliced", "small ones by protobuf"])
def splice_from(request, monkeypatch):
    """Both encoders: every payload spliced by hand, and the default (small ones whole)."""
    if request.param == "spliced":
        monkeypatch.setattr(wire, "SPLICE_FROM", 0)


def _envelope(header: dict) -> dict:
    return {key: value for key, value in header.items() if key != "receiver"}


def _whole(arrived: Arrived) -> peer_pb2.Iterate:
    """The Iterate of ``arrived`` with its payloads back in its tensors: what protobuf
    alone reads from the same bytes."""
    iterate = peer_pb2.Iterate()
    iterate.CopyFrom(arrived.iterate)
    if arrived.payloads is not None:
        for tensor, payload in zip(iterate.tensors, arrived.payloads, strict=True):
            assert tensor.data == b""  # taken out: only the payload holds it
            tensor.data = bytes(payload)
    return iterate


def _arrived(parts: list[bytes], limit: int = 2**31) -> Arrived:
    """What a receiver reads from ``parts``, as the peer door does (PartJoiner)."""
    joiner = PartJoiner()
    arrived = None
    for part in parts:
        arrived = joiner.add_bytes(part, limit)
    assert arrived is not None
    return arrived


def _received(parts: list[bytes], limit: int = 2**31) -> peer_pb2.Iterate:
    return _whole(_arrived(parts, limit))


@pytest.mark.parametrize("header", HEADERS)
@pytest.mark.parametrize("tensors", TENSORS.values(), ids=TENSORS)
@pytest.mark.parametrize("resent", [False, True])
@pytest.mark.parametrize("part_bytes", [wire.PART_BYTES, 100], ids=["whole", "in parts"])
def test_an_addressed_iterate_reads_as_protobufs_own(
    header, tensors, resent, part_bytes, splice_from
):
    message = Message("x" if header["phase"] >= 0 else "", tensors)
    expected = convert.message_to_iterate(message, **header)
    expected.resent = resent
    body = IterateBody(message, **_envelope(header), part_bytes=part_bytes)
    # The shared body reads as protobuf's Iterate without receiver and resent flag: byte
    # for byte its serialisation but for the lengths written longer to align payloads.
    unaddressed = convert.message_to_iterate(message, **{**header, "receiver": ""})
    if not body.leading:
        assert peer_pb2.Iterate.FromString(body.rest) == unaddressed
        assert len(body.rest) == body.size
        if body.size == unaddressed.ByteSize():
            assert body.rest == unaddressed.SerializeToString()
    assert 0 <= body.size - unaddressed.ByteSize() <= 2 * wire.PAYLOAD_ALIGNMENT * len(tensors)
    parts, size = body.addressed(header["receiver"], resent)
    assert size - body.size == expected.ByteSize() - unaddressed.ByteSize()
    assert all(len(part) <= part_bytes + 64 for part in parts)
    arrived = _arrived(parts)
    assert _whole(arrived) == expected
    back = convert.iterate_to_message(arrived.iterate, arrived.payloads)
    assert list(back.tensors) == list(tensors)
    for name, value in tensors.items():
        np.testing.assert_array_equal(back[name], value)
        assert back[name].shape == np.shape(value)
        assert not back[name].flags.writeable


def test_receivers_share_every_part_but_their_last():
    """An iterate in parts is cut once: each receiver's messages are the same objects but
    the last, which carries its own receiver and resend flag."""
    message = Message("x", {"x": rng.standard_normal((300, 100))})  # 240 kB
    body = IterateBody(message, **_envelope(HEADERS[0]), part_bytes=64 * 1024)
    to_a, _ = body.addressed("a")
    to_b, _ = body.addressed("b", resent=True)
    assert len(to_a) == len(to_b) == 4
    assert all(x is y for x, y in zip(to_a[:-1], to_b[:-1], strict=True))
    assert _received(to_a).receiver == "a" and not _received(to_a).resent
    assert _received(to_b).receiver == "b" and _received(to_b).resent


def test_a_body_just_under_a_part_goes_in_parts_once_addressed():
    """A body that fits a part whole but not with the receiver's fields is cut then."""
    message = Message("x", {"x": np.zeros(100)})
    body = IterateBody(message, **_envelope(HEADERS[0]), part_bytes=1000)
    limit = body.size + 1  # the body fits; with receiver "0" (3 bytes) it does not
    body = IterateBody(message, **_envelope(HEADERS[0]), part_bytes=limit)
    parts, size = body.addressed("0")
    assert size == limit + 2 and len(parts) == 2
    assert parts == split_iterate(
        body.rest + peer_pb2.Iterate(receiver="0").SerializeToString(), limit
    )
    assert _received(parts).receiver == "0"


@pytest.mark.parametrize("resent", [False, True])
def test_a_withheld_notice_encodes_to_protobufs_own_bytes(resent):
    header = HEADERS[1]
    expected = convert.withheld_iterate(**header)
    expected.resent = resent
    assert withheld_notice(**header, resent=resent) == expected.SerializeToString()


def test_a_dtype_the_wire_does_not_carry_is_refused_naming_the_tensor(splice_from):
    with pytest.raises(convert.TensorError, match="tensor 'z': dtype complex128"):
        IterateBody(Message("x", {"z": np.zeros(2, complex)}), **_envelope(HEADERS[0]))


@pytest.mark.parametrize("value", [1, 127, 128, 300, 2**21 - 1, 2**21, 2**35 + 5])
def test_varints_are_protobufs(value):
    encoded = peer_pb2.Iterate(round=value).SerializeToString()
    assert encoded == b"\x20" + _varint(value)  # field 4, varint


def test_parts_as_received_are_read_without_protobuf_and_mean_the_same():
    """The peer door takes each message's bytes (PartJoiner.add_bytes): parts framed as the
    sender frames them are read as views of those bytes, and join into protobuf's Iterate."""
    message = Message("x", {"x": rng.standard_normal((300, 100))})
    parts, _ = IterateBody(message, **_envelope(HEADERS[1]), part_bytes=50_000).addressed("b")
    assert len(parts) == 5 and all(_part_frame(part) is not None for part in parts)
    joiner = PartJoiner()
    got = [joiner.add_bytes(part, 2**31) for part in parts]
    assert got[:-1] == [None] * 4
    last = got[-1]
    assert last is not None and last.payloads is not None  # read out of the bytes by hand
    assert _whole(last) == convert.message_to_iterate(message, **{**HEADERS[1], "receiver": "b"})
    back = convert.iterate_to_message(last.iterate, last.payloads)
    np.testing.assert_array_equal(back["x"], message["x"])


@pytest.mark.parametrize(
    "data",
    [
        peer_pb2.Iterate(chunk=b"abc").SerializeToString(),  # a last part
        peer_pb2.Iterate(chunk=b"abc", more=True).SerializeToString(),
        peer_pb2.Iterate(experiment="e", round=3).SerializeToString(),  # whole
        peer_pb2.Iterate(more=True).SerializeToString(),  # a part with an empty chunk
        b"\x52\x03abc\x20\x02",  # a chunk, then another field (round)
        b"\x52\x03abc\x58\x00",  # a chunk, then more: false written out
        b"\x52\x83\x00abc",  # a chunk whose length is a padded varint
    ],
    ids=["last part", "part", "whole", "empty chunk", "chunk, round", "more false", "padded"],
)
def test_any_message_as_received_means_what_protobuf_reads(data):
    by_bytes, by_protobuf = PartJoiner(), PartJoiner()

    def outcome(add, message):
        try:
            return add(message, 100)
        except PartsRefused as exc:
            return str(exc)

    first = outcome(by_bytes.add_bytes, data)
    assert first == outcome(by_protobuf.add, peer_pb2.Iterate.FromString(data))
    assert by_bytes._parts == by_protobuf._parts and by_bytes._size == by_protobuf._size


def test_bytes_that_are_not_an_iterate_are_refused_with_a_reason():
    with pytest.raises(PartsRefused, match="not an Iterate"):
        PartJoiner().add_bytes(b"\x52\x05ab", 100)  # a chunk cut short
    with pytest.raises(PartsRefused, match="not an Iterate"):
        PartJoiner().add_bytes(b"\xff\xff\xff", 100)


def _padded(value: int) -> bytes:
    """``value`` as a varint one byte longer than it needs (protobuf reads it the same)."""
    return wire._padded_varint(value, 1)


def _tensor(fields: bytes) -> bytes:
    """An Iterate ``tensors`` entry holding the Tensor fields ``fields`` as written."""
    return b"\x3a" + _varint(len(fields)) + fields


PAYLOAD = np.arange(5000.0).tobytes()  # 40 kB: read by hand (SPLICE_FROM)
NAME = b"\x0a\x01x"  # Tensor.name "x"
SHAPE = b"\x12\x02\x88\x27"  # Tensor.shape [5000], packed
DTYPE = b"\x1a\x07float64"
DATA = b"\x22" + _varint(len(PAYLOAD)) + PAYLOAD
ENVELOPE = peer_pb2.Iterate(experiment="e", sender="a", round=3, kind="x").SerializeToString()

WRITTEN = {
    "as protobuf writes it": ENVELOPE + _tensor(NAME + SHAPE + DTYPE + DATA),
    "data first": ENVELOPE + _tensor(DATA + NAME + SHAPE + DTYPE),
    "fields after the tensors": _tensor(NAME + SHAPE + DTYPE + DATA) + ENVELOPE,
    "two tensors, one empty": ENVELOPE
    + _tensor(b"\x0a\x01y" + b"\x12\x01\x00" + DTYPE)
    + _tensor(NAME + SHAPE + DTYPE + DATA),
    "padded tags and lengths": ENVELOPE
    + b"\xba\x00"  # tensors (7), its tag one byte longer than it needs
    + _padded(len(NAME + SHAPE + DTYPE) + 1 + len(_padded(len(PAYLOAD))) + len(PAYLOAD))
    + NAME
    + SHAPE
    + DTYPE
    + b"\x22"
    + _padded(len(PAYLOAD))
    + PAYLOAD,
    "unknown fields kept": ENVELOPE
    + b"\xa8\x06\x07"  # field 101, a varint
    + _tensor(NAME + b"\xa9\x06" + b"\x01" * 8 + SHAPE + DTYPE + DATA + b"\xb5\x06abcd"),
    "data twice (the last one counts)": ENVELOPE
    + _tensor(NAME + SHAPE + DTYPE + b"\x22\x03abc" + DATA),
    "data as a varint": ENVELOPE + _tensor(NAME + SHAPE + DTYPE + b"\x20\x05") + b"\x00" * 40000,
    "a group": ENVELOPE + b"\x63\x64" + _tensor(NAME + SHAPE + DTYPE + DATA),
    "a tensor cut short": ENVELOPE + _tensor(NAME + SHAPE + DTYPE + DATA)[:-10],
    "field number 0": ENVELOPE + _tensor(NAME + SHAPE + DTYPE + DATA) + b"\x02\x00",
}


def _outcome(read):
    try:
        return read()
    except Exception as exc:  # noqa: BLE001 - either way of reading may refuse
        return type(exc).__name__


def _by_protobuf(data: bytes):
    return _outcome(lambda: peer_pb2.Iterate.FromString(data))


def _by_door(data: bytes):
    def read():
        arrived = PartJoiner().add_bytes(data, 2**31)
        assert arrived is not None
        return _whole(arrived)

    found = _outcome(read)
    return "DecodeError" if found == "PartsRefused" else found


@pytest.mark.parametrize("data", WRITTEN.values(), ids=WRITTEN)
def test_an_iterate_read_by_hand_is_the_one_protobuf_reads(data):
    """However a large Iterate is written — fields in any order, padded varints, unknown
    fields, a tensor's data twice or with another wire type, groups, cut short — the peer
    door reads what protobuf reads from the same bytes, or refuses what protobuf refuses."""
    assert len(data) >= wire.SPLICE_FROM
    assert _by_door(data) == _by_protobuf(data)
    by_hand = {"as protobuf", "data first", "fields after", "two tensors", "padded", "unknown"}
    name = next(key for key, value in WRITTEN.items() if value == data)
    assert (stripped_iterate(data) is not None) == name.startswith(tuple(by_hand))


def test_the_envelope_is_the_iterate_without_its_payloads():
    data = WRITTEN["two tensors, one empty"]
    stripped = stripped_iterate(data)
    assert stripped is not None
    envelope, payloads = stripped
    assert len(envelope) < 100
    expected = peer_pb2.Iterate.FromString(data)
    assert [bytes(p) for p in payloads] == [t.data for t in expected.tensors]
    for tensor in expected.tensors:
        tensor.data = b""
    assert peer_pb2.Iterate.FromString(envelope) == expected
    assert stripped_iterate(WRITTEN["data twice (the last one counts)"]) is None  # protobuf


def test_bytes_changed_anywhere_in_the_envelope_read_as_protobuf_reads_them():
    """A fuzzer's view: 400 copies of a large Iterate with one to three bytes changed among
    its first 80 (the envelope and the tensor's header), or cut at a random length. The
    door's reading equals protobuf's every time (the same Iterate, or both refuse)."""
    data = WRITTEN["as protobuf writes it"]
    fuzz = np.random.default_rng(32)
    for _ in range(400):
        changed = bytearray(data)
        for position in fuzz.integers(0, 80, size=fuzz.integers(1, 4)):
            changed[position] = int(fuzz.integers(0, 256))
        if fuzz.random() < 0.25:
            changed = changed[: int(fuzz.integers(wire.SPLICE_FROM, len(changed)))]
        sample = bytes(changed)
        assert _by_door(sample) == _by_protobuf(sample), sample[:80]


@pytest.mark.parametrize("experiment", ["e", "an experiment", "x" * 200])
@pytest.mark.parametrize("part_bytes", [wire.PART_BYTES, 10_000], ids=["whole", "in parts"])
def test_spliced_payloads_arrive_aligned_and_are_read_in_place(experiment, part_bytes):
    """The sender places every spliced payload at a multiple of 8 bytes of the Iterate, so
    the receiver's arrays are aligned views of the bytes it joined: no copy of its own."""
    tensors = {
        "x": rng.standard_normal((70, 100)),
        "n": np.arange(9001, dtype=np.int32),
        "w": np.float32(rng.standard_normal(8191)),
    }
    body = IterateBody(
        Message("x", tensors),
        experiment=experiment,
        sender="s",
        round=1,
        phase=0,
        part_bytes=part_bytes,
    )
    arrived = _arrived(body.addressed("r")[0])
    assert arrived.payloads is not None
    back = convert.iterate_to_message(arrived.iterate, arrived.payloads)
    for name, value in tensors.items():
        np.testing.assert_array_equal(back[name], value)
        assert back[name].flags.aligned and not back[name].flags.writeable
        assert not back[name].flags.owndata  # a view of the received bytes


def test_a_payload_another_sender_left_unaligned_is_copied_once_and_read_only():
    data = WRITTEN["as protobuf writes it"]
    arrived = PartJoiner().add_bytes(data, 2**31)
    assert arrived is not None and arrived.payloads is not None
    assert np.frombuffer(arrived.payloads[0], np.uint8).ctypes.data % 8 != 0  # as written
    back = convert.iterate_to_message(arrived.iterate, arrived.payloads)
    assert back["x"].flags.aligned and not back["x"].flags.writeable
    np.testing.assert_array_equal(back["x"], np.arange(5000.0))


@pytest.mark.parametrize("where", ["in the Iterate", "in its tensor"])
def test_a_megabyte_of_tiny_fields_is_left_to_protobuf(where):
    """A peer's message of a million bytes of two-byte fields (an unknown varint field,
    over and over) is not walked in Python: it is handed to protobuf, which reads it as it
    would anyway."""
    tiny = b"\xa8\x06\x01" * 350_000  # field 101 = 1
    tensor = NAME + SHAPE + DTYPE + DATA
    data = (
        ENVELOPE + tiny + _tensor(tensor)
        if where == "in the Iterate"
        else ENVELOPE + _tensor(NAME + tiny + SHAPE + DTYPE + DATA)
    )
    fields = wire.MOST_FIELDS_BY_HAND
    assert stripped_iterate(ENVELOPE + b"\xa8\x06\x01" * (fields - 10) + _tensor(tensor))
    assert stripped_iterate(data) is None
    assert _by_door(data) == _by_protobuf(data)
