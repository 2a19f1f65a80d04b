"""The wire's hand-made Iterates against protobuf itself, for every kind of iterate: the
body protobuf's own bytes, each receiver's message read as protobuf's own Iterate."""

from __future__ import annotations

import numpy as np
import pytest

from starling.node.messages import Message
from starling.node.protocol import convert, wire
from starling.node.protocol.starling.v1 import peer_pb2
from starling.node.protocol.wire import (
    IterateBody,
    PartJoiner,
    PartsRefused,
    _part_frame,
    _varint,
    split_iterate,
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


def _received(parts: list[bytes], limit: int = 2**31) -> peer_pb2.Iterate:
    """What a receiver reads from ``parts``, as the peer door does (PartJoiner)."""
    joiner = PartJoiner()
    whole = None
    for part in parts:
        whole = joiner.add(peer_pb2.Iterate.FromString(part), limit)
    assert whole is not None
    return whole


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
    # The shared body is byte for byte protobuf's serialisation of the Iterate without
    # receiver and resent flag.
    unaddressed = convert.message_to_iterate(message, **{**header, "receiver": ""})
    assert body.size == unaddressed.ByteSize()
    if not body.leading:
        assert body.rest == unaddressed.SerializeToString()
    parts, size = body.addressed(header["receiver"], resent)
    assert size == expected.ByteSize()
    assert all(len(part) <= part_bytes + 64 for part in parts)
    got = _received(parts)
    assert got == expected
    back = convert.iterate_to_message(got)
    assert list(back.tensors) == list(tensors)
    for name, value in tensors.items():
        np.testing.assert_array_equal(back[name], value)
        assert back[name].shape == np.shape(value)


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
    assert got[-1] == _received(parts)
    np.testing.assert_array_equal(convert.iterate_to_message(got[-1])["x"], message["x"])


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
