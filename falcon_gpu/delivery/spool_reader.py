"""Reads one sink's spool oldest first, from the acknowledged position on.

The reader keeps the segment it is in open and reads record by record, so a
replay of many segments costs one pass over the data. Within the segment the
writer is still appending to, a clean end means "caught up", not damage: the
writer and reader run under the spool's lock and the writer only ever writes
whole records.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from falcon_gpu.delivery.segment import Corrupt, Record, read_at, segment_name, segment_seq


def list_segments(directory: Path) -> list[int]:
    """Sequence numbers of the segment files in ``directory``, oldest first."""
    seqs = [s for p in directory.iterdir() if (s := segment_seq(p)) is not None]
    return sorted(seqs)


@dataclass(frozen=True, slots=True)
class Position:
    seq: int
    offset: int


class SpoolReader:
    def __init__(self, directory: Path, start: Position) -> None:
        self._dir = directory
        self.seq = start.seq
        self.offset = start.offset
        self._fh: BinaryIO | None = None
        self._fh_seq: int | None = None

    def read(self, active_seq: int | None) -> tuple[Position, Record] | Corrupt | None:
        """The next record and the position after it; a :class:`Corrupt` (the reader has
        already moved past that segment) or None when there is nothing more for now.
        Raises OSError for a failing read of a present file."""
        while True:
            if not self._open_current():
                return None
            assert self._fh is not None
            size = os.fstat(self._fh.fileno()).st_size
            item = read_at(self._fh, self.offset, size)
            if isinstance(item, Record):
                self.offset = item.end
                return Position(self.seq, item.end), item
            if item is None and self.seq == active_seq:
                return None
            if isinstance(item, Corrupt):
                bad = Corrupt(item.offset, f"segment {segment_name(self.seq)}: {item.reason}")
                self._advance()
                return bad
            self._advance()

    def _open_current(self) -> bool:
        """Open the segment at or after ``self.seq``; False when there is none."""
        if self._fh is not None and self._fh_seq == self.seq:
            return True
        self._close()
        for seq in list_segments(self._dir):
            if seq < self.seq:
                continue
            if seq > self.seq:
                self.seq, self.offset = seq, 0
            try:
                self._fh = (self._dir / segment_name(seq)).open("rb")
            except FileNotFoundError:  # evicted meanwhile
                continue
            self._fh_seq = seq
            return True
        return False

    def _advance(self) -> None:
        self._close()
        self.seq, self.offset = self.seq + 1, 0

    def skip_to(self, seq: int) -> None:
        """Move to the start of segment ``seq`` (the cap evicted the one being read)."""
        if seq > self.seq:
            self._close()
            self.seq, self.offset = seq, 0

    def _close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
            self._fh_seq = None

    def close(self) -> None:
        self._close()
