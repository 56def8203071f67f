"""One sink's durable queue: ``<spool_dir>/<sink>/``, FIFO, capped, crash-safe.

Who does what (the Vector disk-buffer model):

- :class:`~.spool_writer.SpoolWriter` appends batches to the newest segment;
  every batch is written here *before* its first delivery attempt.
- :class:`~.spool_reader.SpoolReader` hands batches to the one sender, oldest
  first, so a backlog always goes out before newer data (per-series order).
- The ledger file ``ack`` holds the position just after the last batch the
  server confirmed (or refused for good). It is replaced atomically after each
  acknowledgement; a segment file is deleted only when the reader has moved
  past it and every record in it was acknowledged. At start the reader resumes
  from the ledger: a batch that was in flight when the agent died is sent again
  (at-least-once; Prometheus and VictoriaMetrics ignore an identical sample).
- One process owns a directory: the first append or read takes an exclusive
  ``flock`` on ``lock`` (released at close) and only then recovers it (deletes
  acknowledged segments, starts a new one). Until then the spool only reads,
  so ``doctor`` run next to the agent changes nothing; a second agent or a
  ``run --once`` on the same directory gets :class:`SpoolBusy` (counted and
  logged by the sink, retried) instead of deleting or duplicating its data.
- A read-only disk (remounted after an error): the lock is taken through a
  read-only descriptor when the lock file exists, so the backlog is still read
  and sent (acknowledgements and deletions then fail, counted by the sink, and a
  later start sends it again); without a lock file the spool cannot be opened
  and the sink sends from memory only.
- Past ``max_bytes`` the oldest segments are deleted and their unsent samples
  reported through ``on_evict`` (counted ``dropped``). A damaged segment is
  reported through ``on_corrupt`` and skipped from the damage on.
- A segment that cannot be opened or read at all (permission denied, an I/O
  error, a directory of a segment's name) is set aside by the reader (renamed
  ``<seq>.seg.unreadable``, or skipped where even that fails) and reported
  through ``on_unreadable``; everything after it is still delivered. The spool
  never deletes such a segment, not even for the cap; the one being written is
  closed, so new batches go to a new segment.

Each record is ``u32 sample count`` + the sink's encoded, ready-to-send body,
so replay needs no re-encoding. Thread-safe (one lock; the batcher appends
while the sender reads). Methods raise OSError for disk failures; the caller
counts them.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from falcon_gpu.delivery.segment import Corrupt, Record, read_records, segment_name
from falcon_gpu.delivery.spool_reader import Position, SpoolReader, Unreadable, list_segments, set_aside
from falcon_gpu.delivery.spool_writer import SpoolWriter

_COUNT = struct.Struct("<I")
LEDGER = "ack"
LOCK_FILE = "lock"


def _open_lock(path: Path) -> int:
    """The lock file's descriptor; on a read-only disk an existing one is opened read-only
    (``flock`` works on it), so the backlog can still be sent."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if exc.errno != errno.EROFS:
            raise
        try:
            return os.open(path, os.O_RDONLY)
        except OSError:
            raise exc from None


def _remove(path: Path) -> bool:
    """Delete an acknowledged segment; False when the disk refuses (read-only): it is
    only disk space, and the ledger already says it was sent."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        return False
    return True


class SpoolBusy(OSError):
    """Another process (the running agent, a ``run --once``) holds this spool directory."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One spooled batch, as handed to the sender."""

    position: Position
    samples: int
    body: bytes


def _samples_of(record: Record) -> int:
    return int(_COUNT.unpack_from(record.payload)[0]) if len(record.payload) >= _COUNT.size else 0


class Spool:
    def __init__(
        self,
        directory: Path,
        max_bytes: int,
        *,
        on_evict: Callable[[int, str], None],
        on_corrupt: Callable[[str], None],
        on_unreadable: Callable[[Unreadable], None],
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._dir = directory
        self._max = max_bytes
        self._on_evict = on_evict
        self._on_corrupt = on_corrupt
        self._on_unreadable = on_unreadable
        self._lock = threading.Lock()
        self._lock_fd: int | None = None  # held from the first append or read until close
        start = self._read_ledger()
        self._reader = SpoolReader(directory, start)
        self._writer = SpoolWriter(directory, 4096, start.seq + 1)  # replaced by _open
        self._acked = start
        self._bytes = 0
        self.backlog_at_start = self._backlog(start)

    def _backlog(self, start: Position) -> int:
        """Bytes not yet acknowledged, read without changing anything (another process may
        own the directory: ``doctor`` next to the running agent)."""
        total = 0
        for seq in list_segments(self._dir):
            if seq < start.seq:
                continue
            try:
                size = (self._dir / segment_name(seq)).stat().st_size
            except FileNotFoundError:
                continue
            total += size - (min(start.offset, size) if seq == start.seq else 0)
        return total

    def _open(self) -> None:
        """Take the directory (an exclusive lock) and recover it, once, under ``self._lock``.
        Raises SpoolBusy while another process holds it, OSError for a failing disk."""
        if self._lock_fd is not None:
            return
        fd = _open_lock(self._dir / LOCK_FILE)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SpoolBusy(
                    errno.EWOULDBLOCK,
                    f"spool directory {self._dir} is in use by another "
                    "falcon-gpu process (the running agent?); a second one needs its own "
                    "spool_dir",
                ) from None
            except OSError:  # a filesystem without locks (ENOLCK, EOPNOTSUPP): work unguarded
                pass
            self._recover()
        except BaseException:
            os.close(fd)
            raise
        self._lock_fd = fd

    def _recover(self) -> None:
        directory = self._dir
        start = self._read_ledger()
        seqs = list_segments(directory)
        for seq in seqs:
            if seq < start.seq:  # fully acknowledged before a crash, not yet deleted
                _remove(directory / segment_name(seq))
        seqs = [s for s in seqs if s >= start.seq]
        acked = directory / segment_name(start.seq)
        if seqs and seqs[0] == start.seq and start.offset >= acked.stat().st_size:
            _remove(acked)  # every record acknowledged (the active segment at a clean shutdown)
            seqs = seqs[1:]
        self._bytes = sum((directory / segment_name(s)).stat().st_size for s in seqs)  # on disk
        self._reader = SpoolReader(directory, start)
        # the acknowledged head of the oldest segment, if that segment is still there
        self._acked = start if seqs and seqs[0] == start.seq else Position(start.seq, 0)
        segment_max = max(4096, min(16 << 20, self._max // 8))
        self._writer = SpoolWriter(directory, segment_max, max([*seqs, start.seq]) + 1)

    # -- writer side --------------------------------------------------------
    def append(self, samples: int, body: bytes) -> Position:
        """Write one batch durably (flushed to the kernel) and apply the cap; returns the
        batch's position (the one its :class:`Entry` will carry)."""
        with self._lock:
            self._open()
            self._bytes += self._writer.append(_COUNT.pack(samples) + body)
            assert self._writer.active_seq is not None
            position = Position(self._writer.active_seq, self._writer.size)
            if self._bytes > self._max:
                self._evict()
            return position

    def _evict(self) -> None:
        seqs = list_segments(self._dir)
        for seq in seqs:
            if self._bytes <= self._max:
                return
            if seq == self._writer.active_seq:
                return  # never the segment being written (at most max_bytes/8, or one batch)
            if seq in self._reader.set_aside:
                continue
            path = self._dir / segment_name(seq)
            start = self._reader.offset if seq == self._reader.seq else 0
            size = path.stat().st_size
            try:
                unsent = 0
                if seq >= self._reader.seq:
                    unsent = sum(
                        _samples_of(r)
                        for r in read_records(path)
                        if isinstance(r, Record) and r.offset >= start
                    )
            except OSError as exc:  # unreadable: set aside, never deleted
                self._set_aside(seq, exc)
                continue
            path.unlink()
            self._bytes -= size
            self._reader.skip_to(seq + 1)
            self._on_evict(unsent, f"spool over {self._max} bytes: dropped segment {path.name}")

    def _set_aside(self, seq: int, exc: OSError) -> None:
        """Segment ``seq`` (not yet reached by the reader) cannot be read: set it aside."""
        path = self._dir / segment_name(seq)
        moved = set_aside(path)
        if moved is None:
            self._reader.set_aside.add(seq)
        if seq == self._reader.seq:
            self._reader.skip_to(seq + 1)
        self._unreadable(Unreadable(path, exc.strerror or str(exc), moved))

    def _unreadable(self, item: Unreadable) -> None:
        """Stop counting a set-aside segment in the spool's size; never write to it again."""
        with contextlib.suppress(OSError):
            self._bytes = max(0, self._bytes - (item.moved_to or item.path).stat().st_size)
        active = self._writer.active_seq
        if active is not None and item.path.name == segment_name(active):
            with contextlib.suppress(OSError):
                self._writer.close()  # the next batch starts a new segment
        self._on_unreadable(item)

    # -- reader side --------------------------------------------------------
    def next(self) -> Entry | None:
        """The oldest batch not yet handed out, or None when caught up. Segments the
        reader leaves behind are deleted (the single sender acknowledges before
        asking for the next batch)."""
        with self._lock:
            self._open()
            while True:
                before = self._reader.seq
                item = self._reader.read(self._writer.active_seq)
                if self._reader.seq != before:
                    self._delete_before(self._reader.seq)
                if isinstance(item, Corrupt):
                    self._on_corrupt(f"{item.reason} at offset {item.offset}: skipping the rest of it")
                    continue
                if isinstance(item, Unreadable):
                    self._unreadable(item)
                    continue
                if item is None:
                    return None
                pos, record = item
                return Entry(pos, _samples_of(record), record.payload[_COUNT.size :])

    def ack(self, entry: Entry) -> None:
        """The server confirmed (or refused for good) ``entry``: move the ledger past it."""
        with self._lock:
            tmp = self._dir / (LEDGER + ".tmp")
            tmp.write_text(f"{entry.position.seq} {entry.position.offset}\n")
            os.replace(tmp, self._dir / LEDGER)
            self._acked = entry.position

    def holds(self, entry: Entry) -> bool:
        """Whether ``entry`` is still on disk (False when the cap evicted its segment while it
        was in flight: if it is not delivered now, it is gone)."""
        return (self._dir / segment_name(entry.position.seq)).exists()

    def _delete_before(self, seq: int) -> None:
        for old in list_segments(self._dir):
            if old >= seq or old == self._writer.active_seq:
                break
            if old in self._reader.set_aside:
                continue
            path = self._dir / segment_name(old)
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if _remove(path):
                self._bytes -= size

    def _read_ledger(self) -> Position:
        try:
            seq, offset = (self._dir / LEDGER).read_text().split()
            return Position(int(seq), int(offset))
        except (FileNotFoundError, ValueError):
            return Position(0, 0)

    @property
    def size_bytes(self) -> int:
        """Bytes on disk not yet acknowledged: what an outage has piled up (segment files
        minus the acknowledged head of the one being read)."""
        with self._lock:
            if self._lock_fd is None:
                return self.backlog_at_start
            acked = self._acked.offset if self._acked.seq == self._reader.seq else 0
            return max(0, self._bytes - acked)

    def close(self) -> None:
        with self._lock:
            if self._lock_fd is None:
                return
            try:
                self._writer.close()
                self._reader.close()
            finally:
                os.close(self._lock_fd)  # releases the directory
                self._lock_fd = None
