"""Where batches wait when the spool cannot be written (disk full, I/O error).

Not durable, bounded, strictly FIFO. The batcher offers batches, the sender
takes the head only after it was delivered, so the entry in flight is never
evicted: a full lane refuses new batches instead (the caller counts them).
"""

from __future__ import annotations

import collections


class MemoryEntry:
    """A batch held in memory; ``counted``: already counted as ``spooled``."""

    def __init__(self, samples: int, body: bytes, counted: bool) -> None:
        self.samples = samples
        self.body = body
        self.counted = counted


class MemoryLane:
    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._entries: collections.deque[MemoryEntry] = collections.deque()

    def __len__(self) -> int:
        return len(self._entries)

    def offer(self, entry: MemoryEntry) -> bool:
        """Append unless full; False when refused."""
        if len(self._entries) >= self._capacity:
            return False
        self._entries.append(entry)
        return True

    def head(self) -> MemoryEntry | None:
        return self._entries[0] if self._entries else None

    def done(self) -> None:
        """The head was settled (delivered or refused for good): remove it."""
        self._entries.popleft()

    def samples(self) -> int:
        return sum(e.samples for e in self._entries)
