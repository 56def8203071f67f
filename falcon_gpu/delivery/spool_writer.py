"""Appends records to the newest segment of one sink's spool directory.

Durability policy: every record is written with one ``write`` and flushed to
the kernel at once, so it survives SIGKILL or an OOM kill of the agent (the
common crash); ``fsync`` happens when a segment is rotated and at close, which
bounds what a host power loss can take to the unsynced tail of the newest
segment (the record checksums let the reader detect and skip such a tail).
fsync per batch would cost a disk flush per cycle per sink for a case the
checksum already makes safe.

The writer never reopens an existing segment: each process starts a new one,
so a torn tail from a crash is never followed by good data. Raises OSError
(disk full, permissions) to the caller, which counts it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

from falcon_gpu.delivery.segment import MAGIC, encode_record, segment_name


class SpoolWriter:
    def __init__(self, directory: Path, segment_max_bytes: int, next_seq: int) -> None:
        self._dir = directory
        self._segment_max = segment_max_bytes
        self._next_seq = next_seq
        self._fh: BinaryIO | None = None
        self._size = 0
        self.active_seq: int | None = None

    def append(self, payload: bytes) -> int:
        """Write one record; returns the bytes the spool grew by (header and magic included)."""
        record = encode_record(payload)
        grown = 0
        if self._fh is None or (self._size > len(MAGIC) and self._size + len(record) > self._segment_max):
            grown += self._rotate()
        assert self._fh is not None
        self._fh.write(record)
        self._fh.flush()
        self._size += len(record)
        return grown + len(record)

    def _rotate(self) -> int:
        self._seal()
        seq = self._next_seq
        self._next_seq += 1
        fh = (self._dir / segment_name(seq)).open("xb")
        fh.write(MAGIC)
        fh.flush()
        self._fh, self._size, self.active_seq = fh, len(MAGIC), seq
        return len(MAGIC)

    def _seal(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None

    def close(self) -> None:
        self._seal()
        self.active_seq = None
