"""The spool's on-disk format: segment files of checksummed records.

A segment is ``<seq>.seg`` (``seq`` a 16-digit zero-padded counter, so names
sort in write order). It starts with the 8-byte magic ``FGSPOOL1`` and holds
records, each::

    u32 little-endian  length of payload
    u32 little-endian  crc32 of payload
    payload            length bytes

A segment is only ever appended to by the process that created it; a new
process always starts a new segment, so a torn tail left by a crash is never
written after. A reader that meets a bad magic, a length past the end of the
file, an absurd length or a checksum mismatch stops reading that segment and
reports :class:`Corrupt` (a truncated or damaged tail cannot be resynchronised
safely): the rest of that segment is skipped, never a crash.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

MAGIC = b"FGSPOOL1"
HEADER = struct.Struct("<II")
MAX_RECORD = 256 << 20
SUFFIX = ".seg"


@dataclass(frozen=True, slots=True)
class Record:
    """One record; ``end`` is the file offset just after it (the ledger's position)."""

    offset: int
    end: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class Corrupt:
    """The segment cannot be read past ``offset``; ``reason`` says why."""

    offset: int
    reason: str


def segment_name(seq: int) -> str:
    return f"{seq:016d}{SUFFIX}"


def segment_seq(path: Path) -> int | None:
    """The sequence number of a segment file name, None for any other file."""
    if path.suffix != SUFFIX or not path.stem.isdigit():
        return None
    return int(path.stem)


def encode_record(payload: bytes) -> bytes:
    return HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def read_at(fh: BinaryIO, pos: int, size: int) -> Record | Corrupt | None:
    """The record at file offset ``pos`` of an open segment ``size`` bytes long.

    None at a clean end (``pos >= size``); :class:`Corrupt` for a bad magic,
    a torn or oversized record or a checksum mismatch. Position 0 means the
    first record. Raises OSError only for a failing read.
    """
    if pos < len(MAGIC):
        fh.seek(0)
        if size == 0:
            return None  # created just before a crash, nothing written
        if fh.read(len(MAGIC)) != MAGIC:
            return Corrupt(0, "bad magic")
        pos = len(MAGIC)
    if pos >= size:
        return None
    if pos + HEADER.size > size:
        return Corrupt(pos, "truncated record header")
    fh.seek(pos)
    length, crc = HEADER.unpack(fh.read(HEADER.size))
    if length > MAX_RECORD or pos + HEADER.size + length > size:
        return Corrupt(pos, f"truncated record (length {length})")
    payload = fh.read(length)
    if len(payload) != length or zlib.crc32(payload) != crc:
        return Corrupt(pos, "checksum mismatch")
    return Record(pos, pos + HEADER.size + length, payload)


def read_records(path: Path) -> Iterator[Record | Corrupt]:
    """Every record of a closed segment, ending after a :class:`Corrupt` if any.
    Raises OSError when the file cannot be opened."""
    with path.open("rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        pos = 0
        while True:
            item = read_at(fh, pos, size)
            if item is None:
                return
            yield item
            if isinstance(item, Corrupt):
                return
            pos = item.end
