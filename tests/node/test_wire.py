"""encode_iterate against protobuf itself: the same bytes, for every kind of iterate."""

from __future__ import annotations

import numpy as np
import pytest

from starling.node.messages import Message
from starling.node.protocol import convert, wire
from starling.node.protocol.starling.v1 import peer_pb2
from starling.node.protocol.wire import _varint, encode_iterate

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


@pytest.mark.parametrize("header", HEADERS)
@pytest.mark.parametrize("tensors", TENSORS.values(), ids=TENSORS)
@pytest.mark.parametrize("resent", [False, True])
def test_an_iterate_encodes_to_protobufs_own_bytes(header, tensors, resent, splice_from):
    message = Message("x" if header["phase"] >= 0 else "", tensors)
    expected = convert.message_to_iterate(message, **header)
    expected.resent = resent
    got = encode_iterate(message, **header, resent=resent)
    assert got == expected.SerializeToString()
    back = convert.iterate_to_message(peer_pb2.Iterate.FromString(got))
    assert list(back.tensors) == list(tensors)
    for name, value in tensors.items():
        np.testing.assert_array_equal(back[name], value)
        assert back[name].shape == np.shape(value)


@pytest.mark.parametrize("resent", [False, True])
def test_a_withheld_notice_encodes_to_protobufs_own_bytes(resent):
    header = HEADERS[1]
    expected = convert.withheld_iterate(**header)
    expected.resent = resent
    assert encode_iterate(None, **header, resent=resent) == expected.SerializeToString()


def test_a_dtype_the_wire_does_not_carry_is_refused_naming_the_tensor(splice_from):
    with pytest.raises(convert.TensorError, match="tensor 'z': dtype complex128"):
        encode_iterate(Message("x", {"z": np.zeros(2, complex)}), **HEADERS[0])


@pytest.mark.parametrize("value", [1, 127, 128, 300, 2**21 - 1, 2**21, 2**35 + 5])
def test_varints_are_protobufs(value):
    encoded = peer_pb2.Iterate(round=value).SerializeToString()
    assert encoded == b"\x20" + _varint(value)  # field 4, varint
