"""The checksums of the node's record files (node/runtime/checksums.py): the sample store's
records and the resume slots are written with XXH3 now, and files written before, with
zlib's CRC-32, still read — alone, or with new records appended after theirs. The old
records here are written by hand from the documented layout, not by the node's code."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

from starling.node.runtime.checkpoint import Checkpoint
from starling.node.runtime.checksums import crc32, xxh3_low32
from starling.node.runtime.resume import SLOT_FILES, ResumeSlots, read_slot
from starling.node.runtime.store import SampleStore, StoreError

_OLD_RECORD = struct.Struct("<4sqiiI")  # magic "SMPL", round, rows, cols, CRC-32
_OLD_SLOT = struct.Struct("<4sQI")  # magic "RSUM", payload length, CRC-32


def test_xxh3_low32_is_xxh3_64s_low_half_and_does_not_depend_on_how_the_bytes_are_cut():
    # XXH3-64 of no bytes, seed 0, is 0x2D06800538D394C2 (the xxHash reference's test vector).
    assert xxh3_low32([b""]) == 0x38D394C2
    data = np.random.default_rng(3).standard_normal(5000).tobytes()
    whole = xxh3_low32([data])
    view = memoryview(data)
    assert xxh3_low32([view[:7], view[7:4096], view[4096:]]) == whole
    assert crc32([view[:7], view[7:]]) == zlib.crc32(data)
    assert xxh3_low32([data[:-1] + b"\0"]) != whole


def _old_record(round_index: int, value: np.ndarray) -> bytes:
    payload = np.ascontiguousarray(value, dtype="<f8").tobytes()
    rows, cols = value.shape
    return _OLD_RECORD.pack(b"SMPL", round_index, rows, cols, zlib.crc32(payload)) + payload


def test_a_store_written_with_crc32_reads_and_takes_new_records_after_its_own(tmp_path):
    path = tmp_path / "samples.bin"
    old = [np.full((2, 3), float(k)) for k in range(3)]
    path.write_bytes(b"".join(_old_record(10 + k, v) for k, v in enumerate(old)))
    store = SampleStore(path)
    assert len(store) == 3 and store.rounds() == [10, 11, 12]
    store.append(13, np.full((2, 3), 13.0))
    store.close()
    raw = path.read_bytes()
    assert raw[len(raw) - 48 - _OLD_RECORD.size : len(raw) - 48][:4] == b"SMP2"
    store = SampleStore(path, read_only=True)
    got = store.read(0, 10)
    assert [r for _, r, _ in got] == [10, 11, 12, 13]
    expected = [*old, np.full((2, 3), 13.0)]
    assert all(np.array_equal(a, b) for (_, _, a), b in zip(got, expected, strict=True))


@pytest.mark.parametrize("record", [0, 1], ids=["an old record", "a new record"])
def test_a_flipped_byte_inside_a_store_fails_its_records_checksum(tmp_path, record):
    """A record that is not the last and does not match its checksum is damage, not a
    torn write: the store refuses to open, naming the record."""
    path = tmp_path / "samples.bin"
    path.write_bytes(_old_record(0, np.zeros((2, 2))))
    store = SampleStore(path)
    store.append(1, np.ones((2, 2)))
    store.append(2, np.ones((2, 2)))
    store.close()
    damaged = bytearray(path.read_bytes())
    size = _OLD_RECORD.size + 32
    damaged[record * size + _OLD_RECORD.size + 5] ^= 0x01
    path.write_bytes(bytes(damaged))
    with pytest.raises(StoreError, match=f"record {record} fails its checksum"):
        SampleStore(path, read_only=True)


def test_a_torn_new_record_is_cut_off_as_before(tmp_path):
    path = tmp_path / "samples.bin"
    store = SampleStore(path)
    for k in range(3):
        store.append(k, np.full((4, 5), float(k)))
    store.close()
    whole = path.read_bytes()
    path.write_bytes(whole[:-7])  # killed inside the last write
    store = SampleStore(path)
    assert store.rounds() == [0, 1]
    store.close()
    assert path.read_bytes() == whole[: 2 * len(whole) // 3]


def _point(next_round: int) -> Checkpoint:
    rng = np.random.default_rng(next_round)
    return Checkpoint(
        next_round=next_round,
        samples=next_round,
        rng_state=dict(rng.bit_generator.state),
        program_state={"x": rng.standard_normal((3, 4)), "n": np.arange(4, dtype=np.int32)},
        fingerprint="spec-a",
    )


def test_a_resume_slot_written_with_crc32_still_reads(tmp_path):
    """The old slot's record is the new one's with magic "RSUM" and CRC-32 in its header:
    the payload layout did not change."""
    slots = ResumeSlots(tmp_path)
    slots.write(_point(4))
    slots.close()
    path = next(tmp_path / name for name in SLOT_FILES if (tmp_path / name).stat().st_size)
    record = path.read_bytes()
    payload = record[_OLD_SLOT.size :]
    path.write_bytes(_OLD_SLOT.pack(b"RSUM", len(payload), zlib.crc32(payload)) + payload)
    old = read_slot(path)
    assert old is not None and old.next_round == 4
    assert np.array_equal(old.program_state["x"], _point(4).program_state["x"])
    path.write_bytes(_OLD_SLOT.pack(b"RSUM", len(payload), zlib.crc32(payload) ^ 1) + payload)
    assert read_slot(path) is None
    assert record[:4] == b"RSU2"
