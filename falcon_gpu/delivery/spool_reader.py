"""Reads one sink's spool oldest first, from the acknowledged position on.

The reader keeps the segment it is in open and reads record by record, so a
replay of many segments costs one pass over the data. Within the segment the
writer is still appending to, a clean end means "caught up", not damage: the
writer and reader run under the spool's lock and the writer only ever writes
whole records.

A segment that cannot be opened or read (permission denied, an I/O error, a
directory where a segment file should be) must not stop the sink for good: the
reader sets it aside, renamed to ``<seq>.seg.unreadable`` (never deleted: what
it holds may still be wanted), reports :class:`Unreadable` and goes on with
the next segment. Where the rename fails too (a read-only disk), the segment is
left where it is and only skipped, in this process; :attr:`SpoolReader.set_aside`
names it so that the spool never deletes it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from falcon_gpu.delivery.segment import Corrupt, Record, read_at, segment_name, segment_seq

SET_ASIDE = ".unreadable"
"""Appended to the name of a segment that could not be read (no longer a segment name)."""


def list_segments(directory: Path) -> list[int]:
    """Sequence numbers of the segment files in ``directory``, oldest first."""
    seqs = [s for p in directory.iterdir() if (s := segment_seq(p)) is not None]
    return sorted(seqs)


@dataclass(frozen=True, slots=True)
class Position:
    seq: int
    offset: int


@dataclass(frozen=True, slots=True)
class Unreadable:
    """Segment ``path`` could not be read (``reason``); it was renamed to ``moved_to``
    (None: the rename failed as well and it only stays skipped)."""

    path: Path
    reason: str
    moved_to: Path | None


def set_aside(path: Path) -> Path | None:
    """Rename an unreadable segment out of the spool's sight; None when that fails too."""
    target = path.with_name(path.name + SET_ASIDE)
    try:
        os.rename(path, target)
    except OSError:
        return None
    return target


class SpoolReader:
    def __init__(self, directory: Path, start: Position) -> None:
        self._dir = directory
        self.seq = start.seq
        self.offset = start.offset
        self._fh: BinaryIO | None = None
        self._fh_seq: int | None = None
        self.set_aside: set[int] = set()
        """Unreadable segments that could not be renamed: skipped, and never deleted."""

    def read(self, active_seq: int | None) -> tuple[Position, Record] | Corrupt | Unreadable | None:
        """The next record and the position after it; a :class:`Corrupt` or an
        :class:`Unreadable` (the reader has already moved past that segment) or None when
        there is nothing more for now. Raises OSError when the directory cannot be listed."""
        while True:
            opened = self._open_current()
            if isinstance(opened, Unreadable):
                return opened
            if not opened:
                return None
            assert self._fh is not None
            try:
                size = os.fstat(self._fh.fileno()).st_size
                item = read_at(self._fh, self.offset, size)
            except OSError as exc:  # an I/O error in the middle of a segment
                return self._unreadable(self.seq, exc)
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

    def _open_current(self) -> bool | Unreadable:
        """Open the segment at or after ``self.seq``; False when there is none."""
        if self._fh is not None and self._fh_seq == self.seq:
            return True
        self._close()
        for seq in list_segments(self._dir):
            if seq < self.seq or seq in self.set_aside:
                continue
            if seq > self.seq:
                self.seq, self.offset = seq, 0
            try:
                self._fh = (self._dir / segment_name(seq)).open("rb")
            except FileNotFoundError:  # evicted meanwhile
                continue
            except OSError as exc:  # permission denied, an I/O error, a directory
                return self._unreadable(seq, exc)
            self._fh_seq = seq
            return True
        return False

    def _unreadable(self, seq: int, exc: OSError) -> Unreadable:
        """Set segment ``seq`` aside and move past it."""
        self._close()
        path = self._dir / segment_name(seq)
        moved = set_aside(path)
        if moved is None:
            self.set_aside.add(seq)
        self.seq, self.offset = seq + 1, 0
        return Unreadable(path, exc.strerror or str(exc), moved)

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
