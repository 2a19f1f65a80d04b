"""The per-round resume point: two slot files, written alternately, never fsynced.

After every round the node writes where it stands (the same :class:`Checkpoint` a durable
checkpoint holds) into one of two files, ``resume-0.bin`` and ``resume-1.bin``, in turn::

    magic "RSU2" | payload length uint64 | checksum of payload uint32 | payload

with the payload a JSON header (next round, sample count, RNG state, fingerprint, and each
state array's name, dtype and shape) followed by the arrays' bytes, and its checksum the
low 32 bits of XXH3-64 (:mod:`starling.node.runtime.checksums`; a slot of magic "RSUM",
written before, carries zlib's CRC-32 and reads as it did). One ``pwrite`` of the whole
record puts it in the operating system's hands: a process killed at any moment (the
crash tests' SIGKILL) leaves the other slot whole, and a torn slot fails its checksum. No
``fsync``, no rename: against a power loss the node relies on the durable checkpoint
(:mod:`starling.node.runtime.checkpoint`), written every ``checkpoint_every`` rounds or after a
second at most (group commit, :mod:`starling.node.runtime.runtime`).

On resume the newest slot that is whole, and whose sample count the store still holds,
wins over an older durable checkpoint (:func:`starling.node.runtime.run.open_run`).

Beside them, ``sending.bin`` says the latest round whose messages the node began to hand to
its links (:class:`SendingMark`: written, 8 bytes, before the first of them, no ``fsync``).
A round's resume point is written once the next round's messages are on their way, so a
process killed may have sent rounds past the point it is resumed from; its successor sends
those again, marked resent (:class:`starling.node.runtime.network.Links`), and the run's
books count each message once. A process held at a round boundary and stopped there (a
scheduled kill) began no round past it, and its successor replays none.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np

from starling.node.runtime.checkpoint import Checkpoint
from starling.node.runtime.checksums import Checksum, crc32, xxh3_low32

__all__ = ["SENDING_FILE", "SLOT_FILES", "ResumeSlots", "SendingMark", "read_sending", "read_slot"]

SLOT_FILES = ("resume-0.bin", "resume-1.bin")
SENDING_FILE = "sending.bin"
_SENDING = struct.Struct("<q")
_MAGIC = b"RSU2"
_CHECKSUMS: dict[bytes, Checksum] = {_MAGIC: xxh3_low32, b"RSUM": crc32}
"""Each slot kind's checksum, by its magic: the one written now, and the one before."""
_HEADER = struct.Struct("<4sQI")
_LENGTH = struct.Struct("<I")


def _encode(checkpoint: Checkpoint) -> list[bytes | memoryview]:
    """The record as a list of buffers (the state arrays' own bytes, not copies), to be
    written together by one ``pwritev``."""
    arrays = {name: np.asarray(v) for name, v in checkpoint.program_state.items()}
    for name, array in arrays.items():
        if array.dtype.hasobject:
            raise TypeError(f"resume point: state array {name!r} holds Python objects")
    meta = {
        "next_round": checkpoint.next_round,
        "samples": checkpoint.samples,
        "rng_state": checkpoint.rng_state,
        "fingerprint": checkpoint.fingerprint,
        "arrays": [[name, a.dtype.str, list(a.shape)] for name, a in arrays.items()],
    }
    head = json.dumps(meta).encode()
    parts: list[bytes | memoryview] = [_LENGTH.pack(len(head)), head]
    parts += [_raw_bytes(a) for a in arrays.values() if a.size]
    length = sum(len(part) for part in parts)
    return [_HEADER.pack(_MAGIC, length, xxh3_low32(parts)), *parts]


def _raw_bytes(array: np.ndarray) -> memoryview:
    """The bytes of ``array`` in C order: its own buffer when it is C-contiguous."""
    flat = np.ascontiguousarray(array).reshape(-1)
    return flat.data.cast("B")


def _decode(payload: bytes) -> Checkpoint:
    (length,) = _LENGTH.unpack_from(payload, 0)
    start = _LENGTH.size + length
    meta = json.loads(payload[_LENGTH.size : start])
    state = {}
    for name, dtype, shape in meta["arrays"]:
        kind, count = np.dtype(dtype), int(np.prod(shape, dtype=np.int64))
        state[name] = np.frombuffer(payload, kind, count, start).reshape(shape).copy()
        start += kind.itemsize * count
    return Checkpoint(
        next_round=int(meta["next_round"]),
        samples=int(meta["samples"]),
        rng_state=meta["rng_state"],
        program_state=state,
        fingerprint=str(meta["fingerprint"]),
    )


def read_slot(path: str | Path) -> Checkpoint | None:
    """The resume point in one slot file, or None if it is missing, torn or damaged."""
    try:
        with open(path, "rb") as file:
            head = file.read(_HEADER.size)
            if len(head) < _HEADER.size:
                return None
            magic, length, summed = _HEADER.unpack(head)
            checksum = _CHECKSUMS.get(magic)
            if checksum is None:
                return None
            payload = file.read(length)
    except FileNotFoundError:
        return None
    if len(payload) != length or checksum((payload,)) != summed:
        return None
    try:
        return _decode(payload)
    except (ValueError, KeyError, TypeError, struct.error):
        return None


class ResumeSlots:
    """The two slot files of one run; :meth:`write` overwrites the older one."""

    def __init__(self, directory: str | Path):
        self.paths = [Path(directory) / name for name in SLOT_FILES]
        self._fds = [os.open(p, os.O_RDWR | os.O_CREAT, 0o644) for p in self.paths]
        newest = [read_slot(p) for p in self.paths]
        rounds = [c.next_round if c is not None else -1 for c in newest]
        self._next = 0 if rounds[0] <= rounds[1] else 1  # the older (or torn) one first

    def write(self, checkpoint: Checkpoint) -> None:
        """Write ``checkpoint`` over the older slot: one ``pwrite``, no ``fsync``."""
        parts = _encode(checkpoint)
        fd = self._fds[self._next]
        total = sum(len(part) for part in parts)
        written = os.pwritev(fd, parts, 0)
        if written < total:  # a short write (rare, large records): the rest, in one piece
            rest = b"".join(parts)[written:]
            while rest:
                done = os.pwrite(fd, rest, total - len(rest))
                rest = rest[done:]
        self._next = 1 - self._next

    def sync(self) -> None:
        for fd in self._fds:
            if fd >= 0:
                os.fsync(fd)

    def close(self) -> None:
        for index, fd in enumerate(self._fds):
            if fd >= 0:
                os.close(fd)
                self._fds[index] = -1


class SendingMark:
    """``sending.bin``: the latest round whose messages this process began to send."""

    def __init__(self, directory: str | Path):
        self._fd = os.open(Path(directory) / SENDING_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        self._marked = -1

    def mark(self, round_index: int) -> None:
        """Note ``round_index`` before its first message goes to a link (once a round)."""
        if round_index > self._marked and self._fd >= 0:
            os.pwrite(self._fd, _SENDING.pack(round_index), 0)
            self._marked = round_index

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def read_sending(directory: str | Path) -> int | None:
    """The round the process that last ran in ``directory`` had begun to send, or None
    (no mark, or a torn one)."""
    try:
        raw = (Path(directory) / SENDING_FILE).read_bytes()
    except OSError:
        return None
    if len(raw) != _SENDING.size:
        return None
    return int(_SENDING.unpack(raw)[0])
