"""The node's sample store: an append-only local file, readable from any offset.

Record ``k`` is the k-th sample the node produced::

    magic "SMP2" | round int64 | rows int32 | cols int32 | checksum uint32 | payload

with the payload ``rows × cols`` little-endian float64 (C order) and its checksum the low 32
bits of XXH3-64 (:mod:`starling.node.runtime.checksums`). Records of magic "SMPL", written
before, carry zlib's CRC-32 in the same place and are read as they were. Appends are
flushed to the operating system after each round, so a SIGKILL of the process loses
nothing already appended; ``sync()`` (called before each checkpoint) makes them durable
against a power loss too. On open, a torn last record (the process died inside ``write``)
is cut off — unless the store is opened ``read_only`` (a stored run served to a reader):
then it is left as it is, and neither indexed nor read.
``truncate(n)`` keeps the first ``n`` records: on resume the store is cut back to the
checkpoint, and the rounds after it are run again.
"""

from __future__ import annotations

import array
import io
import os
import struct
import threading
from pathlib import Path

import numpy as np

from starling.node.runtime.checksums import Checksum, crc32, xxh3_low32

__all__ = ["SampleStore", "StoreError"]

_MAGIC = b"SMP2"
_CHECKSUMS: dict[bytes, Checksum] = {_MAGIC: xxh3_low32, b"SMPL": crc32}
"""Each record kind's checksum, by its magic: the one written now, and the one before."""
_HEADER = struct.Struct("<4sqiiI")
_FLOAT = np.dtype("<f8")


class StoreError(RuntimeError):
    """The store file is damaged somewhere other than a torn last record."""


class SampleStore:
    """Thread-safe: the round loop appends while ``StreamSamples`` readers read.

    ``read_only``: the file must exist, and nothing is ever written to it — no torn record
    cut, no append, no truncate, no fsync. The whole records before a torn last one are
    the store; a stored run is read so, never changed by being read."""

    def __init__(self, path: str | Path, read_only: bool = False):
        self.path = Path(path)
        self._lock = threading.Condition()
        # The index, one int64 each (16 bytes a record, not a list's 72): a long run's
        # store index stays small on a small device.
        self._offsets = array.array("q")  # byte offset of each record
        self._rounds = array.array("q")
        self._end = 0
        self._file: io.BufferedRandom | None = None
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.touch(exist_ok=True)
        self._scan()
        if not read_only:
            self._file = open(self.path, "r+b")  # noqa: SIM115 - lives as long as the store
            self._file.truncate(self._end)
            self._file.seek(self._end)
        self._closed = False

    def _writer(self) -> io.BufferedRandom:
        if self._file is None:
            raise StoreError(f"{self.path}: opened read-only")
        return self._file

    def _scan(self) -> None:
        size = self.path.stat().st_size
        with open(self.path, "rb") as file:
            position = 0
            while position + _HEADER.size <= size:
                file.seek(position)
                magic, round_index, rows, cols, summed = _HEADER.unpack(file.read(_HEADER.size))
                length = rows * cols * _FLOAT.itemsize
                checksum = _CHECKSUMS.get(magic)
                if checksum is None or rows < 0 or cols < 0:
                    raise StoreError(f"{self.path}: record {len(self._offsets)} is damaged")
                if position + _HEADER.size + length > size:
                    break  # torn last record
                payload = file.read(length)
                if checksum((payload,)) != summed:
                    if position + _HEADER.size + length == size:
                        break  # torn last record whose length happened to be written
                    raise StoreError(f"{self.path}: record {len(self._offsets)} fails its checksum")
                self._offsets.append(position)
                self._rounds.append(int(round_index))
                position += _HEADER.size + length
        self._end = position

    def __len__(self) -> int:
        with self._lock:
            return len(self._offsets)

    def append(self, round_index: int, value: np.ndarray) -> int:
        """Append one (chains, d) sample; returns its index. Flushed to the OS at once."""
        array = np.ascontiguousarray(value, dtype=_FLOAT)
        if array.ndim != 2:
            raise ValueError(f"a sample must have shape (chains, d), got {array.shape}")
        payload = array.data.cast("B")  # the array's own bytes: no copy
        header = _HEADER.pack(
            _MAGIC, round_index, array.shape[0], array.shape[1], xxh3_low32((payload,))
        )
        with self._lock:
            file = self._writer()
            file.write(header)
            file.write(payload)
            file.flush()
            self._offsets.append(self._end)
            self._rounds.append(int(round_index))
            self._end += len(header) + payload.nbytes
            self._lock.notify_all()
            return len(self._offsets) - 1

    def sync(self) -> None:
        """Make every appended record durable (fsync)."""
        with self._lock:
            if not self._closed and self._file is not None:
                self._file.flush()
                os.fsync(self._file.fileno())

    def truncate(self, count: int) -> None:
        """Keep only the first ``count`` records."""
        with self._lock:
            if count > len(self._offsets):
                raise StoreError(
                    f"{self.path}: holds {len(self._offsets)} samples, cannot keep {count}"
                )
            if count == len(self._offsets):
                return
            file = self._writer()
            self._end = self._offsets[count]
            del self._offsets[count:]
            del self._rounds[count:]
            file.truncate(self._end)
            file.seek(self._end)
            file.flush()
            os.fsync(file.fileno())

    def rounds(self) -> list[int]:
        with self._lock:
            return self._rounds.tolist()

    def read(self, start: int, limit: int) -> list[tuple[int, int, np.ndarray]]:
        """Up to ``limit`` records from index ``start``: (index, round, array)."""
        with self._lock:
            stop = min(len(self._offsets), start + limit)
            spans = [(k, self._rounds[k], self._offsets[k]) for k in range(max(start, 0), stop)]
        out = []
        # A separate handle: readers never move the writer's file position.
        with open(self.path, "rb") as file:
            for index, round_index, offset in spans:
                file.seek(offset)
                header = file.read(_HEADER.size)
                magic, _, rows, cols, _ = _HEADER.unpack(header.ljust(_HEADER.size, b"\0"))
                known = magic in _CHECKSUMS
                payload = file.read(rows * cols * _FLOAT.itemsize) if known else b""
                if not known or len(payload) != rows * cols * _FLOAT.itemsize:
                    # Changed since it was indexed (cut by another process): never a
                    # guess at what it held.
                    raise StoreError(f"{self.path}: record {index} changed while read")
                array = np.frombuffer(payload, dtype=_FLOAT).reshape(rows, cols)
                out.append((index, round_index, array.astype(np.float64)))
        return out

    def wait_beyond(self, count: int, timeout: float) -> int:
        """Block until more than ``count`` records exist or ``timeout`` passes; the length."""
        with self._lock:
            self._lock.wait_for(lambda: len(self._offsets) > count or self._closed, timeout)
            return len(self._offsets)

    def wake(self) -> None:
        """Wake waiting readers (the run ended; they re-check and finish)."""
        with self._lock:
            self._lock.notify_all()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            if self._file is not None:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()
            self._closed = True
            self._lock.notify_all()
