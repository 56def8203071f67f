"""Job records as JSON lines under ``jobs_dir``: appended, rotated, bounded.

``jobs.jsonl`` takes new records; when a record would take it past
``max_bytes`` it becomes ``jobs.jsonl.1`` (``.1`` becomes ``.2`` ...) and the
oldest of ``keep`` files goes, so the directory never holds more than
``keep * max_bytes``. A record is rare (one per job), so each append opens,
writes one line per record and closes: no handle to leak, nothing buffered to
lose, and a reader (``falcon-gpu stats``) never sees half a line unless the
disk filled mid-write — such a line is skipped when read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from falcon_gpu.model.jobs import JobRecord

FILE_NAME = "jobs.jsonl"
MAX_BYTES = 16 << 20
KEEP_FILES = 4


def prepare_dir(directory: Path) -> None:
    """Create ``directory`` and prove it writable. Raises OSError (the caller names ``jobs_dir``)."""
    directory.mkdir(parents=True, exist_ok=True)
    probe = directory / f".write-test-{os.getpid()}"
    probe.write_bytes(b"")
    probe.unlink()


class JobLog:
    def __init__(self, directory: Path, *, max_bytes: int = MAX_BYTES, keep: int = KEEP_FILES) -> None:
        self.directory = directory
        self.path = directory / FILE_NAME
        self._max, self._keep = max_bytes, max(1, keep)

    def files(self) -> list[Path]:
        """Oldest first: ``jobs.jsonl.<keep-1>`` ... ``jobs.jsonl.1``, ``jobs.jsonl``."""
        rotated = [self.path.with_name(f"{FILE_NAME}.{i}") for i in range(self._keep - 1, 0, -1)]
        return [p for p in (*rotated, self.path) if p.exists()]

    def append(self, records: Iterable[JobRecord]) -> None:
        """Raises OSError when the directory cannot be written."""
        for record in records:
            line = (json.dumps(record.as_json(), separators=(",", ":"), sort_keys=True) + "\n").encode()
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
            if size and size + len(line) > self._max:
                self._rotate()
            with self.path.open("ab") as fh:
                fh.write(line)

    def _rotate(self) -> None:
        oldest = self.path.with_name(f"{FILE_NAME}.{self._keep - 1}")
        if self._keep == 1:
            self.path.unlink(missing_ok=True)
            return
        oldest.unlink(missing_ok=True)
        for i in range(self._keep - 2, 0, -1):
            src = self.path.with_name(f"{FILE_NAME}.{i}")
            if src.exists():
                src.rename(self.path.with_name(f"{FILE_NAME}.{i + 1}"))
        self.path.rename(self.path.with_name(f"{FILE_NAME}.1"))

    def read(self) -> Iterator[JobRecord]:
        """Every record, oldest first; a line that is not a record (torn write) is skipped.
        Raises OSError when a file cannot be read."""
        for path in self.files():
            with path.open("rb") as fh:
                for raw in fh:
                    try:
                        yield JobRecord.from_json(json.loads(raw))
                    except (ValueError, KeyError, TypeError, AttributeError):
                        continue
