"""Appends records to the newest segment of one sink's spool directory.

Durability policy: every record is written straight to the kernel (an
unbuffered file: no bytes wait in a user-space buffer), so it survives
SIGKILL or an OOM kill of the agent (the common crash); ``fsync`` happens
when a segment is rotated and at close, which bounds what a host power loss
can take to the unsynced tail of the newest segment (the record checksums
let the reader detect and skip such a tail). fsync per batch would cost a
disk flush per cycle per sink for a case the checksum already makes safe.

The writer never reopens an existing segment: each process starts a new one,
so a torn tail from a crash is never followed by good data. The same holds
for a write that fails part-way (disk full): the segment is cut back to its
last whole record and sealed, and the next record starts a new segment, so a
full disk costs the batches written while it was full, not every later batch
of that segment. Raises OSError (disk full, permissions) to the caller, which
counts it.
"""

from __future__ import annotations

import contextlib
import os
from io import FileIO
from pathlib import Path

from falcon_gpu.delivery.segment import MAGIC, encode_record, segment_name


class SpoolWriter:
    def __init__(self, directory: Path, segment_max_bytes: int, next_seq: int) -> None:
        self._dir = directory
        self._segment_max = segment_max_bytes
        self._next_seq = next_seq
        self._fh: FileIO | None = None
        self._size = 0
        self.active_seq: int | None = None

    def append(self, payload: bytes) -> int:
        """Write one record; returns the bytes the spool grew by (header and magic included)."""
        record = encode_record(payload)
        grown = 0
        if self._fh is None or (self._size > len(MAGIC) and self._size + len(record) > self._segment_max):
            grown += self._rotate()
        assert self._fh is not None
        try:
            _write_all(self._fh, record)
        except OSError:
            self._abandon()
            raise
        self._size += len(record)
        return grown + len(record)

    @property
    def size(self) -> int:
        """Bytes in the active segment: the position just after the last record written."""
        return self._size

    def _rotate(self) -> int:
        self._seal()
        seq = self._next_seq
        self._next_seq += 1
        fh = FileIO(self._dir / segment_name(seq), "xb")
        self._fh, self._size, self.active_seq = fh, 0, seq
        try:
            _write_all(fh, MAGIC)
        except OSError:
            self._abandon()
            raise
        self._size = len(MAGIC)
        return len(MAGIC)

    def _abandon(self) -> None:
        """After a failed write: cut the segment back to its last whole record (what is
        beyond may be a torn record) and stop writing to it."""
        fh, self._fh = self._fh, None
        if fh is None:
            return
        with contextlib.suppress(OSError):  # else the reader stops at the torn record; later
            os.ftruncate(fh.fileno(), self._size)  # batches go to a new segment anyway
        fh.close()

    def _seal(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            try:
                os.fsync(fh.fileno())
            finally:
                fh.close()

    def close(self) -> None:
        self._seal()
        self.active_seq = None


def _write_all(fh: FileIO, data: bytes) -> None:
    """One record to an unbuffered file (a short write is continued). Raises OSError."""
    view = memoryview(data)
    while view:
        n = fh.write(view)
        if not n:
            raise OSError("write wrote nothing")
        view = view[n:]
