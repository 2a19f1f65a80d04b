"""The per-round resume slots (node/runtime/resume.py) and how a run picks its resume point
(node/runtime/run.py): real files, torn and damaged the way a crash leaves them."""

from __future__ import annotations

import numpy as np

from starling.node.runtime.checkpoint import Checkpoint, save_checkpoint
from starling.node.runtime.resume import (
    SENDING_FILE,
    SLOT_FILES,
    ResumeSlots,
    SendingMark,
    read_sending,
    read_slot,
)
from starling.node.runtime.run import CHECKPOINT_FILE, resume_points


def _point(next_round: int, samples: int | None = None) -> Checkpoint:
    rng = np.random.default_rng(next_round)
    return Checkpoint(
        next_round=next_round,
        samples=next_round if samples is None else samples,
        rng_state=dict(rng.bit_generator.state),
        program_state={
            "x": rng.standard_normal((3, 4)),
            "counts": np.arange(5, dtype=np.int32),
            "flag": np.array(True),
            "scalar": np.float64(next_round * 0.5),
            "empty": np.zeros((0, 2)),
        },
        fingerprint="spec-a",
    )


def _same(a: Checkpoint, b: Checkpoint) -> bool:
    arrays = a.program_state.keys() == b.program_state.keys() and all(
        np.asarray(v).dtype == b.program_state[k].dtype
        and np.asarray(v).shape == b.program_state[k].shape
        and np.asarray(v).tobytes() == b.program_state[k].tobytes()
        for k, v in a.program_state.items()
    )
    return arrays and (a.next_round, a.samples, a.rng_state, a.fingerprint) == (
        b.next_round,
        b.samples,
        b.rng_state,
        b.fingerprint,
    )


def test_a_slot_reads_back_bit_for_bit_and_the_two_alternate(tmp_path):
    slots = ResumeSlots(tmp_path)
    for r in (1, 2, 3):
        slots.write(_point(r))
    slots.close()
    read = sorted((read_slot(tmp_path / name) for name in SLOT_FILES), key=lambda c: c.next_round)
    assert [c.next_round for c in read] == [2, 3]  # round 1 was overwritten by round 3
    assert _same(read[1], _point(3)) and _same(read[0], _point(2))
    # Reopened, the older slot (round 2's) is the one overwritten next.
    slots = ResumeSlots(tmp_path)
    slots.write(_point(4))
    slots.close()
    assert [p.next_round for p in resume_points(tmp_path)] == [4, 3]


def test_a_torn_or_damaged_slot_is_skipped_for_the_other(tmp_path):
    slots = ResumeSlots(tmp_path)
    slots.write(_point(5))
    slots.write(_point(6))
    slots.close()
    newest = max(SLOT_FILES, key=lambda name: read_slot(tmp_path / name).next_round)
    path = tmp_path / newest
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])  # killed inside the write
    assert read_slot(path) is None
    assert [p.next_round for p in resume_points(tmp_path)] == [5]
    damaged = bytearray(whole)
    damaged[-1] ^= 0xFF  # one flipped byte: the CRC catches it
    path.write_bytes(bytes(damaged))
    assert read_slot(path) is None
    assert [p.next_round for p in resume_points(tmp_path)] == [5]


def test_the_newest_point_wins_durable_checkpoint_or_slot(tmp_path):
    save_checkpoint(tmp_path / CHECKPOINT_FILE, _point(7))
    slots = ResumeSlots(tmp_path)
    slots.write(_point(8))
    slots.close()
    points = resume_points(tmp_path)
    assert [p.next_round for p in points] == [8, 7]
    assert _same(points[0], _point(8)) and _same(points[1], _point(7))
    save_checkpoint(tmp_path / CHECKPOINT_FILE, _point(9))
    assert [p.next_round for p in resume_points(tmp_path)] == [9, 8]


def test_the_sending_mark_keeps_the_latest_round_begun_and_a_torn_one_reads_as_none(tmp_path):
    """What a resumed process sends again (runtime.network.Links' replay): the rounds up to
    the one its predecessor had begun to send, as the mark it left says."""
    assert read_sending(tmp_path) is None  # no process ran here yet
    mark = SendingMark(tmp_path)
    for round_index in (0, 0, 1, 3, 2):  # once a round; never back
        mark.mark(round_index)
    mark.close()
    assert read_sending(tmp_path) == 3
    successor = SendingMark(tmp_path)  # a new process overwrites from its first round
    successor.mark(2)
    successor.close()
    assert read_sending(tmp_path) == 2
    (tmp_path / SENDING_FILE).write_bytes(b"\x01\x02\x03")  # torn
    assert read_sending(tmp_path) is None
